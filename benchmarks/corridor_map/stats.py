"""A cell's numbers from its filed results alone (RESULTS/<cell>/: warm.json and per RL run
eval.json, metrics.jsonl, unit.json; runner.py writes them).

Per arm: held-out success (the final policy, 4 episodes on each held-out task; mean over
seeds), late training success (per run the mean training success over the last half of
its steps, as benchmarks/ceiling.py), collapses (runs whose final held-out success is
below the warm start's) and seconds per RL run. Against GRPO: the gain in held-out points
by task (each task's rate averaged over the seeds both arms ran, then paired task by task)
and by seed (the runs' rates paired seed by seed), and the late-training gain by seed, each
with a 95% percentile bootstrap (10,000 resamples, generator seed 0: the method of
benchmarks/ceiling.py); the share of the oracle's held-out gain that SHARPO captures (the
ratio of the mean by-task gains on the seeds all three arms ran, tasks resampled jointly).
Beside them, not part of the reading, the credit diagnostics each run logged per step
(``DIAGNOSTICS``: the credit AUC against the corridor's exact lamp labels, SHARPO's teacher
coverage, clipped segments and weight range), averaged over steps, then over seeds.

The declared reading (benchmarks/results/map_summary.md): a cell counts as "SHARPO helps"
only when SHARPO and GRPO both finished every one of the cell's seeds and the by-seed 95%
interval of SHARPO - GRPO (held-out) excludes 0 from above (``verdict``).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from _inputs import finite_number, read_text

from .filed import metric_rows, rate, read_unit, read_warm
from .grid import (ARMS, ORACLE, REFERENCE, SEEDS, TESTED, UNIT_FILE, WARM_FILE, Cell, arm_slug,
                   parse_cell)

N_BOOT = 10000


def boot(diff: np.ndarray, base: np.ndarray | None = None, n_boot: int = N_BOOT, seed: int = 0):
    """(mean of ``diff``, 2.5th, 97.5th percentile of the resampled means) and, with
    ``base`` (the same units: e.g. the oracle's gains), the ratio of the means and its
    interval over the same resamples: (mean, lo, hi, ratio, rlo, rhi)."""
    diff = np.asarray(diff, dtype=float)
    if diff.ndim != 1 or len(diff) == 0:
        raise ValueError("boot: expected a non-empty 1-d array of differences")
    idx = np.random.default_rng(seed).integers(0, len(diff), size=(n_boot, len(diff)))
    gm = diff[idx].mean(1)
    lo, hi = np.percentile(gm, [2.5, 97.5])
    if base is None:
        return float(diff.mean()), float(lo), float(hi)
    base = np.asarray(base, dtype=float)
    if base.shape != diff.shape:
        raise ValueError("boot: diff and base must have the same units")
    go = base[idx].mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = gm / go
    r = r[np.isfinite(r)]
    rlo, rhi = np.percentile(r, [2.5, 97.5]) if len(r) else (math.nan, math.nan)
    ratio = diff.mean() / base.mean() if base.mean() else math.nan
    return float(diff.mean()), float(lo), float(hi), float(ratio), float(rlo), float(rhi)


def train_rows(rows: list[dict], where: str = "metrics.jsonl") -> list[dict]:
    """The run's training rows (of its metrics.jsonl rows, ``filed.metric_rows``: ``kind``
    train, with a step and a success rate in [0, 1]), in step order."""
    out = [r for r in rows if r.get("kind", "train") == "train" and "success" in r and "step" in r]
    for r in out:
        rate(r["success"], f"{where}: step {r['step']!r:.20} success")
    return sorted(out, key=lambda r: finite_number(r["step"], f"{where}: step"))


def run_rows(metrics_path: Path) -> list[dict]:
    """The training rows (``train_rows``) of a run's metrics.jsonl, read through
    benchmarks/_inputs.py (a regular UTF-8 file; InputError naming it otherwise)."""
    where = str(metrics_path)
    return train_rows(metric_rows(read_text(metrics_path, "an RL run's metrics (JSON lines)"),
                                  where), where)


def late_success(rows: list[dict], frac: float = 0.5):
    """Mean training success over the last ``frac`` of the run's steps (None: no steps);
    ``rows``: ``train_rows``."""
    xs = [float(r["success"]) for r in rows]
    if not xs:
        return None
    k = max(1, math.ceil(round(len(xs) * frac, 9)))
    return sum(xs[-k:]) / k


# The credit diagnostics (RESULTS/map.md "Credit diagnostics"; not part of the reading):
# per run the mean over its training steps of each metric that the step logged.
DIAGNOSTICS = {"auc": "credit_quality/auc", "coverage": "sharpo/teacher_coverage",
               "clipped": "sharpo/clipped_frac", "weight_min": "sharpo/weight_min",
               "weight_max": "sharpo/weight_max"}


def step_means(rows: list[dict], keys=DIAGNOSTICS, where: str = "metrics.jsonl") -> dict:
    """{name: mean over the training steps (``train_rows``) that logged ``keys[name]`` (a
    finite number; NaN or inf is refused, naming the step), or None}."""
    out = {}
    for name, key in keys.items():
        xs = [finite_number(r[key], f"{where}: step {r['step']!r:.20} {key}") for r in rows
              if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
        out[name] = sum(xs) / len(xs) if xs else None
    return out


def load_runs(folder: Path, arm: str, seeds=SEEDS) -> dict[int, dict]:
    """{seed: {"held", "per_task", "late", "seconds", "diag"}} of the arm's filed runs in a
    cell's results folder (a run counts when its unit.json is there), each read and
    checked by ``filed.read_unit`` (its cell, arm, seed and evaluation; InputError)."""
    out = {}
    slug = arm_slug(arm)
    cell = parse_cell(Path(folder).name)
    for k in seeds:
        d = Path(folder) / f"{slug}-seed{k}"
        if not (d / UNIT_FILE).exists() and not (d / UNIT_FILE).is_symlink():
            continue                # not filed; a folder or fifo there: read_unit refuses it
        unit = read_unit(d, cell, arm, k)
        where = str(d / "metrics.jsonl")
        rows = run_rows(d / "metrics.jsonl")
        out[k] = {"held": unit["held"], "per_task": unit["per_task"],
                  "late": late_success(rows), "seconds": unit["seconds"],
                  "diag": step_means(rows, where=where)}
    return out


def per_task(runs: list[dict]) -> dict[str, float]:
    """{task: success averaged over the runs}, on the tasks every run played."""
    if not runs:
        return {}
    ids = set.intersection(*(set(r["per_task"]) for r in runs))
    return {i: sum(r["per_task"][i] for r in runs) / len(runs) for i in sorted(ids)}


def gain(arm: dict, ref: dict) -> dict:
    """``arm`` against ``ref`` (load_runs of each) on the seeds both ran: by task, by seed
    (held-out) and late training by seed; {} when they share no seed."""
    common = sorted(set(arm) & set(ref))
    if not common:
        return {}
    pa, pr = per_task([arm[k] for k in common]), per_task([ref[k] for k in common])
    ids = sorted(set(pa) & set(pr))
    dt = np.array([pa[i] - pr[i] for i in ids])
    ds = np.array([arm[k]["held"] - ref[k]["held"] for k in common])
    out = {"seeds": common, "by_seed": boot(ds), "per_seed": [float(x) for x in ds]}
    if len(ids):
        out["by_task"] = boot(dt)
        out["tasks_up_down"] = (int((dt > 0).sum()), int((dt < 0).sum()))
    late = [k for k in common if arm[k]["late"] is not None and ref[k]["late"] is not None]
    if late:
        out["late_by_seed"] = boot(np.array([arm[k]["late"] - ref[k]["late"] for k in late]))
    return out


def share(tested: dict, oracle: dict, ref: dict):
    """(ratio, lo, hi): the tested arm's mean by-task held-out gain over the oracle's, on
    the seeds all three ran (tasks resampled jointly); None without such a seed."""
    common = sorted(set(tested) & set(oracle) & set(ref))
    if not common:
        return None
    pt, po, pr = (per_task([d[k] for k in common]) for d in (tested, oracle, ref))
    ids = sorted(set(pt) & set(po) & set(pr))
    if not ids:
        return None
    return boot(np.array([pt[i] - pr[i] for i in ids]), np.array([po[i] - pr[i] for i in ids]))[3:]


def has_ceiling(oracle_gain: dict) -> bool:
    """Whether the oracle's by-task gain over GRPO has its 95% interval above 0: only then is
    SHARPO's share of it a ratio worth reading (with a ceiling near 0 the ratio and its
    interval run to any size: t20-d5-full, oracle -0.4, gave 1325%). Added after the
    first full grid was seen; a presentation rule, not part of the reading."""
    return bool(oracle_gain) and oracle_gain.get("by_task") is not None \
        and oracle_gain["by_task"][1] > 0


def verdict(g: dict, seeds=SEEDS) -> str:
    """The declared reading of SHARPO - GRPO (``gain``): "helps" (every seed of ``seeds``
    paired and the by-seed interval above 0), "hurts" (below 0), "level" (it holds 0), or
    "incomplete (k/n seeds)"."""
    n = len(g.get("seeds", []))
    if not g or set(g["seeds"]) != set(seeds):
        return f"incomplete ({n}/{len(seeds)} seeds)"
    _m, lo, hi = g["by_seed"]
    return "helps" if lo > 0 else ("hurts" if hi < 0 else "level")


def warm_fails(warm: dict) -> list[str]:
    """The declared warm-start failures (benchmarks/results/map_summary.md): its held-out
    success at or below the random agent's, and its right-door rate at a lamp at chance
    (within 1.96 binomial standard errors of 1/2 over its lamp turns: two doors)."""
    out = []
    if warm["eval"]["success"] <= warm["random_agent"]:
        out.append("at or below random")
    play = warm.get("play") or {}
    n, p = play.get("lamp_turns"), play.get("right_door")
    if n and p is not None and abs(p - 0.5) <= 1.96 * math.sqrt(0.25 / n):
        out.append("right door at chance")
    return out


def cell_summary(results: Path, cell: Cell, seeds=SEEDS, arms=ARMS) -> dict | None:
    """Everything the table and the figures show of one cell; None when its warm start is
    not filed."""
    folder = Path(results) / cell.name
    if not (folder / WARM_FILE).exists() and not (folder / WARM_FILE).is_symlink():
        return None                 # not filed; a folder or fifo there: read_warm refuses it
    warm = read_warm(folder, cell)
    w = warm["eval"]["success"]
    runs = {arm: load_runs(folder, arm, seeds) for arm in arms}
    out = {"cell": cell, "warm": warm, "arms": {}, "warm_fails": warm_fails(warm)}
    for arm, r in runs.items():
        held = [x["held"] for x in r.values()]
        late = [x["late"] for x in r.values() if x["late"] is not None]
        secs = [x["seconds"] for x in r.values() if x["seconds"] is not None]
        diag = {}
        for name in DIAGNOSTICS:        # mean over the runs of each run's step mean
            xs = [x["diag"][name] for x in r.values() if x["diag"][name] is not None]
            diag[name] = float(np.mean(xs)) if xs else None
        out["arms"][arm] = {"seeds": sorted(r), "held": float(np.mean(held)) if held else None,
                            "late": float(np.mean(late)) if late else None,
                            "collapses": sum(h < w for h in held),
                            "seconds": float(np.mean(secs)) if secs else None, "diag": diag}
    out["sharpo_vs_grpo"] = gain(runs[TESTED], runs[REFERENCE])
    out["oracle_vs_grpo"] = gain(runs[ORACLE], runs[REFERENCE])
    out["share"] = share(runs[TESTED], runs[ORACLE], runs[REFERENCE])
    out["ceiling"] = has_ceiling(out["oracle_vs_grpo"])
    out["verdict"] = verdict(out["sharpo_vs_grpo"], seeds)
    out["complete"] = all(len(out["arms"][a]["seeds"]) == len(seeds) for a in arms)
    return out
