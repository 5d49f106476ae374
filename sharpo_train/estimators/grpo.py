"""GRPO (docs/method.md §1): every generated token of a trajectory's rows gets the
trajectory's group-relative advantage A_i; also the A_i every other estimator starts from
(``StepBatch.episode_advantages``, step/batch.py)."""
from __future__ import annotations

from ..step.batch import StepBatch
from .registry import CreditOutput, GroupParams, register_estimator


@register_estimator("grpo", params=GroupParams, label="GRPO", base_advantage=True)
def grpo(batch: StepBatch, cfg: GroupParams) -> CreditOutput:
    """Every generated token of a trajectory's rows gets its A_i (docs/method.md §1)."""
    base = batch.episode_advantages(cfg)[batch.traj_index]
    return CreditOutput(base[:, None] * batch.response_mask.float(), base)
