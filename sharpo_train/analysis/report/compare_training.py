"""Per-method summaries of a compare's training runs, paired by RL seed (compare.md):

* late training success: per run, the mean sampled training success over the last half of
  its steps (``late_success``); per method the mean over seeds, and each method against
  the first one paired seed by seed (report/stats.py ``paired_difference``: the mean of
  the per-seed differences, its bootstrap interval over seeds, the sign test);
* credit quality (runs with ``log.credit_quality``): the per-token and the per-segment-sum
  credit AUC pooled over every step and seed, each step weighted by its pairs
  (analysis/credit_auc.py, docs/credit_quality.md);
* the time each method took (its RL phases, evaluation included).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from .records import read_metrics
from .stats import paired_difference
from .tables import mean_std


def late_success(run_dir, frac: float = 0.5) -> Optional[float]:
    """Mean training success over the last ``frac`` of the run's steps (None: no steps)."""
    train, _ = read_metrics(run_dir)
    xs = [float(r["success"]) for r in sorted(train, key=lambda r: r["step"]) if "success" in r]
    if not xs:
        return None
    k = max(1, math.ceil(round(len(xs) * frac, 9)))     # 10 x 0.3 is 3.0000000000000004
    return sum(xs[-k:]) / k


def pooled_auc(run_dirs, key: str = "credit_quality/auc") -> Optional[float]:
    """The per-step AUCs ``key`` of the runs pooled, each step weighted by its pairs."""
    num = den = 0.0
    for d in run_dirs:
        train, _ = read_metrics(d)
        for r in train:
            a, p = r.get(key), r.get("credit_quality/pairs") or 0
            if a is not None and isinstance(a, (int, float)) and math.isfinite(a) and p:
                num += a * p
                den += p
    return num / den if den else None


def training_lines(out: Path, methods, seeds, done: dict, seconds: dict) -> list[str]:
    """compare.md lines: late training success paired by seed, credit AUC, time."""
    late = {}
    for label, slug, _ in methods:
        vals = {k: late_success(out / "runs" / f"{slug}-seed{k}") for k in done.get(label, [])}
        late[label] = {str(k): v for k, v in vals.items() if v is not None}
    late = {k: v for k, v in late.items() if v}
    if not late:
        return []
    first = next(iter(late))
    lines = ["", "## Training success over the last half of the steps (sampled), paired by "
             "RL seed", "",
             "Per run: the mean training success over its last half of steps; per method the "
             "mean ± sample std over seeds; against " + first + ": the mean of the per-seed "
             "differences, a 95% bootstrap interval over seeds and the sign test.", "",
             f"| Method | seeds | late training success (%) | vs {first} |", "|---|---:|---:|---|"]
    for label, vals in late.items():
        m, sd = mean_std(list(vals.values()))
        vs = ("-" if label == first or not set(vals) & set(late[first])
              else paired_difference(late[first], vals).describe("seeds"))
        lines.append(f"| {label} | {len(vals)} | {100 * m:.1f} ± {100 * sd:.1f} | {vs} |")
    lines += ["", "Per-run late training success: `"
              + str({k: [round(v, 3) for v in vals.values()] for k, vals in late.items()}) + "`"]
    aucs = {}
    for label, slug, _ in methods:
        dirs = [out / "runs" / f"{slug}-seed{k}" for k in done.get(label, [])]
        a, s = pooled_auc(dirs), pooled_auc(dirs, "credit_quality/auc_sum")
        if a is not None:
            aucs[label] = (a, s)
    if aucs:
        lines += ["", "## Credit quality on the training rollouts (exact labels)", "",
                  "Within-rollout AUC of the action coefficients (docs/credit_quality.md), "
                  "pooled over every step and seed: per token = the action's mean "
                  "advantage / A_i; segment sum = its summed advantage / A_i (what the "
                  "length factor balances). 0.5 = no credit signal.", "",
                  "| Method | AUC per token | AUC segment sum |", "|---|---:|---:|"]
        for label, (a, s) in aucs.items():
            lines.append(f"| {label} | {a:.3f} | {'n/a' if s is None else f'{s:.3f}'} |")
    times = {}
    for label, slug, _ in methods:
        t = [v for k, v in seconds.items() if k.startswith(f"rl/{slug}/seed")]
        if t:
            times[label] = (sum(t), len(t))
    if times:
        lines += ["", "| Method | RL runs | seconds (total) | seconds per run |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {label} | {n} | {t:.0f} | {t / n:.0f} |" for label, (t, n) in times.items()]
    return lines
