"""Credit quality offline (docs/credit_quality.md): with ``log.save_batches`` the trainer
writes the scored ``StepBatch`` of a step (step/batch.py; ``save_batch``) to
RUN/batches/step_<S>.safetensors (tensors) and .json (episodes, hints, labels; no pickle
anywhere); ``score_run`` then recomputes every registered estimator on exactly those
rollouts and scores it as the per-step metric does (credit_auc.py).

Also ``weight_profile``: where SHARPO's segment weight departs from 1, by segment class,
over saved batches (benchmarks/weight_profile.py).
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

from ..envs.base import Task
from ..envs.registry import DEFAULT_ENV, get_spec
from ..estimators import ESTIMATORS
from ..estimators.registry import estimator_config_class
from ..io import atomic_write_json, loads_json
from ..runs.run_files import run_subdir
from ..settings.loader import load_settings, read_yaml_layers
from ..step.batch import StepBatch
from ..step.rollout import Episode, Turn
from ..step.segments import Span
from .credit_auc import Segments, action_credit, credit_auc


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
            est, params = ESTIMATORS[m], estimator_cfg.params(m)
            if est.needs_teacher(params) and (batch.teacher_logp is None or batch.has_teacher is None):
                skipped[m] = "the saved batches hold no teacher log-probs (a run without teachers)"
                continue
            try:
                out = est.fn(batch, params)
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
