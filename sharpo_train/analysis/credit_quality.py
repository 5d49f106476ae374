"""Credit quality: does a method's per-token credit land on the right actions?
(docs/credit_quality.md)

An environment that can label actions offers a labeller (``EnvSpec.plan_labels``;
ALFWorld's planner: envs/alfworld/plan_labels.py): every action of a rollout is **on-plan**
(it deserves credit) or **off-plan** (invalid actions, detours, undoing progress).
``action_credit`` turns a method's [B, L] advantages into one
coefficient per action (advantage / A_i); ``credit_auc`` scores how well the coefficients
separate the actions that deserve credit from those that do not:

- in a successful rollout (A_i > 0) an on-plan action should get the larger coefficient
  (more credit), in a failed one (A_i < 0) an off-plan action should (more blame: its
  advantage is more negative);
- AUC = over all pairs (deserving, undeserving) of actions *of the same rollout*, the
  fraction where the deserving one has the larger coefficient, ties counting 1/2. GRPO
  gives every token of a rollout A_i, so every coefficient is 1, every pair ties and its
  AUC is 0.5 by construction. The interval is a percentile bootstrap over groups.

Offline scoring (``score_run``): with ``log.save_batches`` the trainer writes the scored
``StepBatch`` of a step (step/batch.py) to RUN/batches/step_<S>.safetensors (tensors) and
.json (episodes, hints, labels; no pickle anywhere); every registered estimator is then
recomputed on exactly those rollouts and scored the same way.

Shapes: N episodes, B rows (one per generated turn), L the longest response, S labelled
action segments.
"""
from __future__ import annotations

import dataclasses
import glob
import math
import os
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

from ..step.batch import StepBatch
from ..envs.base import Task
from ..envs.registry import DEFAULT_ENV, get_spec
from ..estimators import ESTIMATORS
from ..estimators.registry import estimator_config_class
from ..io import atomic_write_json, loads_json
from ..settings.loader import load_settings, read_yaml_layers
from ..step.rollout import Episode, Turn
from ..runs.run_files import run_subdir
from ..step.segments import Span

# counts of a labeller's ``stats`` logged per step as credit_quality/<key> (when present)
LABELLER_COUNTS = ("planner_calls", "cache_hits", "mismatches")
TIE_TOLERANCE = 1e-6        # |c_p - c_q| <= tol * max(1, |c_p|, |c_q|) counts as a tie


# ------------------------------------------------------------------------- coefficients
@dataclasses.dataclass
class Segments:
    """S labelled action segments with A_i != 0: one entry per turn."""
    coeff: np.ndarray       # [S] float64 mean advantage over the action's tokens / A_i
    on_plan: np.ndarray     # [S] bool
    success: np.ndarray     # [S] bool: the rollout succeeded (A_i > 0 in a mixed group)
    rollout: np.ndarray     # [S] int64 rollout id (unique within what is scored together)
    group: np.ndarray       # [S] int64 group id (unit of the bootstrap)
    coeff_sum: np.ndarray = None   # [S] float64 summed advantage over the action's tokens / A_i

    @staticmethod
    def concat(parts: list["Segments"]) -> "Segments":
        if not parts:
            z = np.zeros(0)
            return Segments(z, z.astype(bool), z.astype(bool), z.astype(np.int64),
                            z.astype(np.int64), z)
        return Segments(*(np.concatenate([getattr(p, f.name) for p in parts])
                          for f in dataclasses.fields(Segments)))


def action_credit(batch, advantages: torch.Tensor, labels, *, offset: int = 0
                         ) -> Segments:
    """The labelled action segments of a ``StepBatch`` under ``advantages`` [B, L].

    Per row b (episode e, turn t) with A_e = ``batch.episode_adv[e]`` != 0 and a label:
    coefficient = mean of advantages[b] over the tokens of the turn's action span
    (step/segments.py), or over all its response tokens when it has none (an unparsable reply,
    executed as an invalid action), divided by A_e (the per-token credit); coeff_sum = the
    same sum without dividing by the span's length (the segment's total credit, what
    SHARPO's length factor balances: docs/method.md §4). ``labels`` [N][turns];
    ``offset`` is added to episode and group ids (to pool several steps)."""
    adv = advantages.detach().double().cpu()
    ea = batch.episode_adv.double().cpu()
    rows = []
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        lab = labels[e][t] if t < len(labels[e]) else None
        a_e = float(ea[e])
        if lab is None or a_e == 0.0:
            continue
        turn = batch.episodes[e].turns[t]
        span = next((s for s in turn.spans if s.kind == "action"), None)
        lo, hi = (span.start, span.end) if span else (0, len(turn.response_ids))
        if hi <= lo:
            continue
        total = float(adv[b, lo:hi].sum()) / a_e
        rows.append((total / (hi - lo), bool(lab), bool(batch.episodes[e].success), offset + e,
                     offset + int(batch.group_of[e]), total))
    if not rows:
        return Segments.concat([])
    c, lab, succ, roll, grp, tot = zip(*rows)
    return Segments(np.array(c, dtype=np.float64), np.array(lab), np.array(succ),
                    np.array(roll, dtype=np.int64), np.array(grp, dtype=np.int64),
                    np.array(tot, dtype=np.float64))


# ------------------------------------------------------------------------- AUC
def _pair_scores(deserving: np.ndarray, other: np.ndarray) -> float:
    """Sum over pairs of [c_p > c_q] + 1/2 [tie] (c_p from ``deserving``)."""
    if not deserving.size or not other.size:
        return 0.0
    d = deserving[:, None] - other[None, :]
    tol = TIE_TOLERANCE * np.maximum(1.0, np.maximum(np.abs(deserving)[:, None], np.abs(other)[None, :]))
    return float(np.where(np.abs(d) <= tol, 0.5, (d > 0).astype(np.float64)).sum())


def credit_auc(coeffs, labels, success, rollout, group=None, *, n_boot: int = 1000,
               seed: int = 0, level: float = 0.95) -> dict:
    """Within-rollout credit AUC (module docstring, docs/credit_quality.md).

    coeffs [S] float (advantage / A_i per action segment), labels [S] bool (on-plan),
    success [S] bool (the segment's rollout succeeded), rollout [S] int (pairs only form
    within one rollout), group [S] int (bootstrap unit; None: no interval).
    Returns auc, auc_success, auc_failure (NaN without pairs), lo/hi (the ``level``
    percentile bootstrap interval over groups, NaN without groups), pairs, segments,
    on_plan_frac."""
    c = np.asarray(coeffs, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(success, dtype=bool)
    r = np.asarray(rollout, dtype=np.int64)
    S = c.shape[0]
    for name, v in (("labels", y), ("success", s), ("rollout", r)):
        if v.shape != (S,):
            raise ValueError(f"{name}: expected shape ({S},) like coeffs, got {v.shape}")
    if c.ndim != 1:
        raise ValueError(f"coeffs: expected a 1-D array, got shape {c.shape}")
    if not np.isfinite(c).all():
        raise ValueError("coeffs: must be finite")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    g = None if group is None else np.asarray(group, dtype=np.int64)
    if g is not None and g.shape != (S,):
        raise ValueError(f"group: expected shape ({S},) like coeffs, got {g.shape}")
    # per rollout: wins and pairs, split by outcome
    stats = []   # (group, success, wins, pairs)
    for rid in np.unique(r):
        m = r == rid
        succ = bool(s[m][0])
        if (s[m] != succ).any():
            raise ValueError(f"success: rollout {rid} has segments with both outcomes")
        deserving = y[m] if succ else ~y[m]
        n_p, n_q = int(deserving.sum()), int((~deserving).sum())
        if n_p and n_q:
            stats.append((int(g[m][0]) if g is not None else 0, succ,
                          _pair_scores(c[m][deserving], c[m][~deserving]), n_p * n_q))
    nan = float("nan")

    def ratio(rows):
        p = sum(x[3] for x in rows)
        return sum(x[2] for x in rows) / p if p else nan
    out = {"auc": ratio(stats), "auc_success": ratio([x for x in stats if x[1]]),
           "auc_failure": ratio([x for x in stats if not x[1]]),
           "lo": nan, "hi": nan, "pairs": int(sum(x[3] for x in stats)), "segments": S,
           "on_plan_frac": float(y.mean()) if S else nan,
           "groups": int(len(np.unique(g))) if g is not None and S else 0}
    if g is not None and stats and n_boot > 0:
        groups = np.unique(g)
        idx = {k: i for i, k in enumerate(groups)}
        wins = np.zeros(len(groups))
        pairs = np.zeros(len(groups))
        for grp, _, w, p in stats:
            wins[idx[grp]] += w
            pairs[idx[grp]] += p
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, len(groups), size=(n_boot, len(groups)))
        pw, pp = wins[draws].sum(1), pairs[draws].sum(1)
        boots = pw[pp > 0] / pp[pp > 0]
        if boots.size:
            out["lo"] = float(np.quantile(boots, (1 - level) / 2))
            out["hi"] = float(np.quantile(boots, 1 - (1 - level) / 2))
    return out


def step_credit_quality(batch, advantages: torch.Tensor, labels, *, n_boot: int = 200,
                        seed: int = 0) -> dict:
    """The ``credit_quality/*`` metrics of one step (docs/run_directory.md)."""
    seg = action_credit(batch, advantages, labels)
    res = credit_auc(seg.coeff, seg.on_plan, seg.success, seg.rollout, seg.group,
                     n_boot=n_boot, seed=seed)
    res_sum = credit_auc(seg.coeff_sum, seg.on_plan, seg.success, seg.rollout, n_boot=0)
    flat = [x for ep in labels for x in ep]
    known = [x for x in flat if x is not None]
    return {"credit_quality/auc": res["auc"], "credit_quality/auc_lo": res["lo"],
            "credit_quality/auc_hi": res["hi"], "credit_quality/auc_success": res["auc_success"],
            "credit_quality/auc_failure": res["auc_failure"],
            "credit_quality/auc_sum": res_sum["auc"], "credit_quality/pairs": res["pairs"],
            "credit_quality/segments": res["segments"],
            "credit_quality/labelled_frac": len(known) / max(len(flat), 1),
            "credit_quality/on_plan_frac": (sum(known) / len(known)) if known else float("nan")}


# ------------------------------------------------------------------------- SHARPO weights
PROFILE_CLASSES = ("decisive action", "other action", "decisive reasoning", "other reasoning")
SATURATION_TOLERANCE = 1e-4     # |w - 1| >= alpha * (1 - tol) counts as saturated


def weight_profile(parts, *, alpha: float) -> dict:
    """Where SHARPO's segment weight w (docs/method.md §4) departs from 1, by segment class,
    pooled over ``parts``: (batch, out, labels) triples.

    ``out``: a CreditOutput of ``sharpo`` on ``batch`` (its ``segments``: gap/weight [B, K],
    K the segments of a row, segment k = the row's turn's ``spans[k]``); ``labels`` [N][turns]
    as for ``action_credit``; ``alpha`` the clip bound the weights were made with.
    Only scored segments count (a teacher, A_i != 0, a real segment). Classes: "decisive
    action" (an action span whose turn has a label: the corridor's lamp turns, ALFWorld's
    planner-labelled turns), "other action" (an action span of an unlabelled turn: any
    choice was fine), "decisive reasoning" / "other reasoning" (think spans of a labelled /
    unlabelled turn). Per class: {segments, gap_mean (signed), gap_abs_mean, gap_abs_median,
    w_dev_mean (mean |w - 1|), saturated_frac (|w - 1| at alpha)};
    NaN where a class has no segment."""
    rows: dict = {c: ([], []) for c in PROFILE_CLASSES}
    for batch, out, labels in parts:
        _profile_rows(batch, out, labels, rows)
    res = {}
    for c, (g, d) in rows.items():
        g, d = np.array(g), np.array(d)
        nan = float("nan")
        res[c] = {"segments": int(g.size), "gap_mean": float(g.mean()) if g.size else nan,
                  "gap_abs_mean": float(np.abs(g).mean()) if g.size else nan,
                  "gap_abs_median": float(np.median(np.abs(g))) if g.size else nan,
                  "w_dev_mean": float(d.mean()) if d.size else nan,
                  "saturated_frac": float((d >= alpha * (1 - SATURATION_TOLERANCE)).mean())
                  if d.size else nan}
    return res


def _profile_rows(batch, out, labels, rows: dict) -> None:
    """Append (gap, |w - 1|) of every scored segment of one batch to rows[class]."""
    seg = out.segments
    if seg is None:
        raise ValueError("out: expected sharpo's CreditOutput (with segments), got none")
    gap, w = seg.gap.double().cpu(), seg.weight.double().cpu()
    base, has_t = out.base.cpu(), batch.has_teacher.cpu()
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        if not bool(has_t[b]) or float(base[b]) == 0.0:
            continue
        lab = labels[e][t] if t < len(labels[e]) else None
        for k, span in enumerate(batch.episodes[e].turns[t].spans):
            if k >= gap.shape[1] or math.isnan(float(gap[b, k])):
                continue
            c = ("decisive " if lab is not None else "other ") + (
                "action" if span.kind == "action" else "reasoning")
            rows[c][0].append(float(gap[b, k]))
            rows[c][1].append(abs(float(w[b, k]) - 1.0))


# ------------------------------------------------------------------------- saved batches
def _episode_json(ep) -> dict:
    return {"task": dataclasses.asdict(ep.task), "group": ep.group, "index": ep.index,
            "reward": ep.reward, "success": ep.success, "error": ep.error,
            "turns": [{"user_text": t.user_text, "prompt_ids": list(t.prompt_ids),
                       "response_ids": list(t.response_ids), "response_text": t.response_text,
                       "action": t.action, "observation_after": t.observation_after,
                       "spans": [[s.kind, s.start, s.end] for s in t.spans]} for t in ep.turns]}


def _episode_from_json(d: dict):
    turns = [Turn(t["user_text"], list(t["prompt_ids"]), list(t["response_ids"]),
                  t["response_text"], t["action"], t["observation_after"],
                  [Span(k, a, b) for k, a, b in t["spans"]]) for t in d["turns"]]
    return Episode(Task(**d["task"]), d["group"], d["index"], turns, d["reward"],
                   d["success"], d["error"])


def batch_paths(run_dir, step: int) -> tuple[Path, Path]:
    stem = Path(run_dir) / "batches" / f"step_{step:05d}"
    return stem.with_suffix(".safetensors"), stem.with_suffix(".json")


def save_batch(run_dir, step: int, batch, *, method: str, labels=None) -> Path:
    """RUN/batches/step_<S>.safetensors (every tensor field of the ``StepBatch``) and
    .json (step, method, episodes, teacher_of, hints, labels or null)."""
    from safetensors.torch import save_file
    run_subdir(run_dir, "batches")                       # a symbolic link is refused
    tpath, jpath = batch_paths(run_dir, step)
    tensors = {f.name: getattr(batch, f.name).detach().cpu().contiguous()
               for f in dataclasses.fields(batch) if isinstance(getattr(batch, f.name), torch.Tensor)}
    tmp = tpath.with_suffix(".safetensors.tmp")
    save_file(tensors, str(tmp))
    os.replace(tmp, tpath)
    atomic_write_json(jpath, {"step": step, "method": method,
                              "episodes": [_episode_json(ep) for ep in batch.episodes],
                              "teacher_of": batch.teacher_of, "hints": batch.hints,
                              "labels": labels})
    return jpath


def load_batch(path) -> tuple[object, dict]:
    """(StepBatch, info) from a saved step (either file of the pair); info holds step,
    method and labels. Tensors through safetensors, the rest JSON (no pickle)."""
    from safetensors.torch import load_file
    p = Path(path)
    tpath, jpath = p.with_suffix(".safetensors"), p.with_suffix(".json")
    if not tpath.is_file() or not jpath.is_file():
        raise FileNotFoundError(f"{p.with_suffix('')}: saved batch needs both "
                                f"{tpath.name} and {jpath.name}")
    info = loads_json(jpath.read_text(encoding="utf-8"), jpath)
    batch = StepBatch.from_episodes([_episode_from_json(d) for d in info["episodes"]])
    names = {f.name for f in dataclasses.fields(batch)}
    for k, v in load_file(str(tpath)).items():
        if k in names:
            setattr(batch, k, v)
    batch.teacher_of, batch.hints = info.get("teacher_of"), info.get("hints")
    batch.step = info.get("step")       # scheduled estimators read it
    return batch, info


# ------------------------------------------------------------------------- offline scoring
def score_batches(paths: Sequence, estimator_cfg, methods: Optional[Sequence[str]] = None,
                  *, labeller=None, env: str = DEFAULT_ENV, n_boot: int = 1000,
                  seed: int = 0) -> dict:
    """Every method (default: every registered estimator) recomputed on the same saved
    batches (``estimator_cfg``: the run's ``estimator.*``, an EstimatorConfig) and scored:
    {method: credit_auc result | {"skipped": reason}}. Labels come from the saved files,
    else from ``labeller`` (default: the ``plan_labels`` hook of environment ``env``'s
    EnvSpec, created on demand). Where ``env`` has exact labels (EnvSpec.exact_labels) the
    oracle estimators are scored too, the ceiling next to the methods; elsewhere they are
    skipped with the reason."""
    names = list(methods) if methods else sorted(ESTIMATORS)
    for m in names:
        if m not in ESTIMATORS:
            raise ValueError(f"methods: unknown method {m!r}; known: {sorted(ESTIMATORS)}")
    parts: dict[str, list[Segments]] = {m: [] for m in names}
    skipped: dict[str, str] = {}
    own = exact = None
    for k, path in enumerate(paths):
        batch, info = load_batch(path)
        labels = info.get("labels")
        if labels is None:
            own = own or labeller or get_spec(env).load("plan_labels")()
            labels = own.label_episodes(batch.episodes)
        if not len(batch):
            continue
        if exact is None:
            exact = get_spec(env).exact_labels is not None and get_spec(env).load("exact_labels")
        if exact:          # the oracle estimators' input (estimators/oracle.py)
            batch.credit_labels = exact(batch.episodes)
        offset = (k + 1) * 1_000_000
        for m in names:
            est = ESTIMATORS[m]
            if est.needs_teacher and (batch.teacher_logp is None or batch.has_teacher is None):
                skipped[m] = "the saved batches hold no teacher log-probs (a run without teachers)"
                continue
            try:
                out = est.fn(batch, estimator_cfg.params(m))
            except (ValueError, KeyError, TypeError) as exc:   # needs a field this run lacks
                skipped[m] = f"{type(exc).__name__}: {exc}"
                continue
            parts[m].append(action_credit(batch, out.advantages, labels, offset=offset))
    if own is not None and labeller is None:
        own.close()
    results = {}
    for m in names:
        if m in skipped and not parts[m]:
            results[m] = {"skipped": skipped[m]}
            continue
        seg = Segments.concat(parts[m])
        results[m] = credit_auc(seg.coeff, seg.on_plan, seg.success, seg.rollout, seg.group,
                                n_boot=n_boot, seed=seed)
        total = credit_auc(seg.coeff_sum, seg.on_plan, seg.success, seg.rollout, seg.group,
                           n_boot=n_boot, seed=seed)
        results[m].update({"auc_sum": total["auc"], "auc_sum_lo": total["lo"],
                           "auc_sum_hi": total["hi"]})
    return results


def saved_batches(run_dir) -> list[Path]:
    return [Path(p) for p in sorted(glob.glob(str(Path(run_dir) / "batches" / "step_*.json")))]


def score_run(run_dir, methods: Optional[Sequence[str]] = None, *, n_boot: int = 1000,
              seed: int = 0) -> dict:
    """``score_batches`` over every saved batch of a run, with the run's estimator
    settings (its config.yaml)."""
    run_dir = Path(run_dir)
    paths = saved_batches(run_dir)
    if not paths:
        raise FileNotFoundError(f"{run_dir}: no saved batches (train with log.save_batches=1)")
    # RUN/config.yaml is the resolved config (no ``base:``): its estimator.* and env.name
    saved = read_yaml_layers(run_dir / "config.yaml")[-1]
    estimator = load_settings(estimator_config_class(), None, dict(saved.get("estimator") or {}))
    env = saved.get("env") if isinstance(saved.get("env"), dict) else {}
    return score_batches(paths, estimator, methods, env=env.get("name", DEFAULT_ENV),
                         n_boot=n_boot, seed=seed)


def results_table(results: dict) -> str:
    """Markdown table of ``score_batches`` results."""
    def f(x):
        return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"
    lines = ["| method | AUC per token | 95% CI (groups) | AUC success | AUC failure | "
             "AUC segment sum | 95% CI (groups) | pairs | segments |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m, r in results.items():
        if "skipped" in r:
            lines.append(f"| {m} | skipped: {r['skipped']} | | | | | | | |")
            continue
        lines.append(f"| {m} | {f(r['auc'])} | [{f(r['lo'])}, {f(r['hi'])}] | "
                     f"{f(r['auc_success'])} | {f(r['auc_failure'])} | "
                     f"{f(r.get('auc_sum'))} | [{f(r.get('auc_sum_lo'))}, "
                     f"{f(r.get('auc_sum_hi'))}] | {r['pairs']} | {r['segments']} |")
    return "\n".join(lines)
