"""An environment's exact credit labels on a batch (docs/estimators.md, "Oracle credit").

An environment with exact labels (``EnvSpec.exact_labels``: the corridor's lamp turns,
envs/corridor/labels.py) lets the trainer put them on the batch before scoring
(``StepBatch.credit_labels`` [N][turns]: True = a right move, False = a wrong one, None = a
move that did not matter). Two readers: the oracle estimators (estimators/oracle.py) and
``teacher.oracle``, the perfect teacher the scoring phase builds here (``perfect_teacher_logp``):
the teacher's log-probs are the student's plus the row's label ``y_b`` on every token of its
action segment, so SHARPO's segment gap (docs/method.md §4) is exactly +1 on a right move,
-1 on a wrong one and 0 on every other segment.
"""
from __future__ import annotations

import torch

from .batch import StepBatch, segment_kind_mask


def credit_labels(batch: StepBatch, method: str) -> list:
    """The batch's exact labels [N][turns] (``batch.credit_labels``); a ValueError
    naming ``method`` when the trainer did not put them there."""
    labels = batch.credit_labels
    if labels is None:
        raise ValueError(f"{method}: the environment's exact credit labels are required "
                         f"(batch.credit_labels, filled from EnvSpec.exact_labels)")
    if len(labels) != batch.num_episodes:
        raise ValueError(f"{method}: batch.credit_labels has {len(labels)} episodes, "
                         f"the batch {batch.num_episodes}")
    return labels


def row_labels(batch: StepBatch, labels) -> torch.Tensor:
    """[B] float32 label of each row: +1 (True), -1 (False), 0 (None or no label)."""
    out = []
    for e, t in zip(batch.episode, batch.turn):
        lab = labels[e][t] if t < len(labels[e]) else None
        out.append(0.0 if lab is None else (1.0 if lab else -1.0))
    return torch.tensor(out, dtype=torch.float32)


def oracle_teacher_logp(old_logp: torch.Tensor, label: torch.Tensor,
                        action_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] the perfect teacher: ``old_logp + label_b`` on the action tokens of row b
    (action_mask [B, L] bool), ``old_logp`` elsewhere, so that every action segment's mean
    gap is its label and every other segment's gap is 0 (docs/method.md §4)."""
    return old_logp + label.to(old_logp.dtype)[:, None] * action_mask.to(old_logp.dtype)


def perfect_teacher_logp(batch: StepBatch) -> torch.Tensor:
    """[B, L] ``teacher.oracle``'s teacher log-probs for a scored batch (old_logp and the
    exact labels set): ``oracle_teacher_logp`` on the action segments of every row."""
    label = row_labels(batch, credit_labels(batch, "teacher.oracle"))
    return oracle_teacher_logp(batch.old_logp, label,
                               segment_kind_mask(batch, "action", "teacher.oracle"))
