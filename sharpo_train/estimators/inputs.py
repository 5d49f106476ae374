"""What an estimator reads from a ``StepBatch``, and the checked readers of the optional
fields (a ValueError naming the method when a field is missing).

An estimator reads (and never writes) these fields of the batch (step/batch.py; B rows,
L = longest response, N trajectories):
- ``rewards`` [N] fp32, ``group_of`` [N] int64: terminal reward and group of each
  trajectory; group statistics are over trajectories, not rows (docs/method.md §1).
- ``healthy`` [N] bool: trajectories not ended by an env fault; the others leave the
  group statistics and get A = 0 (``StepBatch.episode_advantages``).
- ``traj_index`` [B] int64: the trajectory of each row.
- ``response_mask`` [B, L] fp32 0/1, ``segment_ids`` [B, L] int64 (-1: no segment; ids
  0..K-1 per row, docs/method.md §2).
- ``old_logp`` / ``teacher_logp`` [B, L] fp32 (theta_old without / with the hint) and
  ``has_teacher`` [B] bool; teacher fields are None when the method needs no teacher.
- ``episodes`` [N]: the rollout itself (states, actions), for methods that need it;
  ``turn`` [B]: row b is ``episodes[traj_index[b]].turns[turn[b]]``.
- ``old_entropy`` [B, L] fp32: token entropies under theta_old (``needs_entropy`` only).
- ``step``: the training step (1, 2, ...), for methods with a schedule.
- ``episode_adv`` [N] with ``episode_adv_norm`` (norm_std, eps): GRPO's A_i as the
  trainer computed it (``StepBatch.fill_episode_advantages``); ``StepBatch.episode_advantages``
  reads it back.
- ``credit_labels`` [N][turns]: the environment's exact labels (step/exact_labels.py), for
  the methods registered with ``needs_labels``.
It returns a ``CreditOutput``. ``aux_loss`` (optional): a term the update adds to the
policy loss, for methods that are a loss and not only an advantage (SDAR; step/update.py).
"""
from __future__ import annotations

import torch

from ..checks import is_int
from ..step.batch import StepBatch


def batch_step(batch: StepBatch, method: str) -> int:
    """The training step of ``batch`` (``batch.step``, set by the trainer), for methods
    with a schedule; a ValueError naming it when absent."""
    step = batch.step
    if not is_int(step) or step < 0:
        raise ValueError(f"{method}: batch.step (the training step, an int >= 0) is "
                         f"required, got {step!r}")
    return step


def teacher_fields(batch: StepBatch, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(teacher_logp [B, L] with the student's values where there is no teacher,
    has_teacher [B] bool); a ValueError naming the method when they are missing."""
    if batch.has_teacher is None or batch.teacher_logp is None:
        raise ValueError(f"{method}: teacher log-probs are required (has_teacher, teacher_logp)")
    if batch.old_logp is None:
        raise ValueError(f"{method}: old_logp is required")
    teacher = torch.where(batch.has_teacher[:, None], batch.teacher_logp, batch.old_logp)
    return teacher, batch.has_teacher
