"""The credit record of a step: RUN/credit/step_<S:05d>.json (docs/run_directory.md).

For every group and rollout: reward, success, A_i, the env fault that ended it (null when
none), teacher (hint_from, hint), and per turn
the user message, the response, the environment's reply, and per segment its text, length,
gap, weight, length factor, A_i and the effective advantage A~ on its tokens; where the
environment has exact credit labels, also the turn's label and what perfect credit (the
``oracle`` estimator, estimators/oracle.py) would give the segment.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Optional

from ..io import atomic_write_json
from .run_files import run_subdir


def _num(x) -> Optional[float]:
    v = float(x)
    return v if math.isfinite(v) else None


def credit_record(step: int, method: str, estimator_cfg, batch, credit, tokenizer) -> dict:
    """The record of a scored and credited ``StepBatch`` (step/batch.py) and the estimator's
    ``CreditOutput``."""
    episodes, teacher_of, hints = batch.episodes, batch.teacher_of, batch.hints
    episode_adv = batch.episode_adv.tolist()
    row_of = {(e, t): r for r, (e, t) in enumerate(zip(batch.episode, batch.turn))}
    seg = credit.segments
    labels = batch.credit_labels                 # exact labels [N][turns] (oracle.py), or None
    groups: dict[int, dict] = {}
    for e, ep in enumerate(episodes):
        g = groups.setdefault(ep.group, {"task_id": ep.task.id, "family": ep.task.family,
                                         "rollouts": []})
        turns = []
        for t, turn in enumerate(ep.turns):
            r = row_of.get((e, t))
            segments = []
            for k, span in enumerate(turn.spans):
                ids = turn.response_ids[span.start:span.end]
                entry = {"kind": span.kind, "text": tokenizer.decode(ids), "num_tokens": len(ids),
                         "gap": None, "weight": None, "length_factor": None,
                         "advantage_grpo": episode_adv[e],
                         "advantage": episode_adv[e] if r is None else
                         float(credit.advantages[r, span.start])}
                if labels is not None:     # the ceiling next to the method: perfect credit
                    lab = labels[e][t] if t < len(labels[e]) else None
                    a = episode_adv[e]
                    entry.update(label=lab, advantage_oracle=a if lab is not None and (
                        (a > 0 and lab) or (a < 0 and not lab)) else 0.0)
                if seg is not None and r is not None:
                    entry.update(gap=_num(seg.gap[r, k]), weight=_num(seg.weight[r, k]),
                                 length_factor=_num(seg.length_factor[r, k]))
                segments.append(entry)
            turns.append({"user": turn.user_text, "response": turn.response_text,
                          "observation_after": turn.observation_after, "segments": segments})
        g["rollouts"].append({"index": ep.index, "reward": ep.reward, "success": ep.success,
                              "advantage_grpo": episode_adv[e], "env_fault": ep.error,
                              "has_teacher": teacher_of[e] is not None,
                              "hint_from": None if teacher_of[e] is None else episodes[teacher_of[e]].index,
                              "hint": hints[e], "turns": turns})
    return {"step": step, "method": method,
            "estimator_config": dataclasses.asdict(estimator_cfg),
            "groups": [groups[k] for k in sorted(groups)]}


def write_credit(run_dir: str | Path, record: dict) -> Path:
    path = run_subdir(run_dir, "credit") / f"step_{record['step']:05d}.json"   # never a link
    atomic_write_json(path, record)
    return path
