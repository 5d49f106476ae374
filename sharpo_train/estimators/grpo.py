"""GRPO (docs/method.md §1): every generated token of a trajectory's rows gets the
trajectory's group-relative advantage A_i; also the A_i every other estimator starts from
(``episode_advantages``)."""
from __future__ import annotations

import torch

from ..step.batch import StepBatch
from .registry import CreditOutput, GroupParams, register_estimator


def episode_advantages(batch: StepBatch, params: GroupParams) -> torch.Tensor:
    """[N] GRPO A_i of every trajectory of the batch with ``params``' (norm_std, eps):
    the trainer's ``batch.episode_adv`` when it was computed with them
    (``StepBatch.episode_advantages``), env-faulted ones left out (A = 0)."""
    return batch.episode_advantages(norm_std=params.norm_std, eps=params.eps)


@register_estimator("grpo", params=GroupParams, label="GRPO", base_advantage=True)
def grpo(batch: StepBatch, cfg: GroupParams) -> CreditOutput:
    """Every generated token of a trajectory's rows gets its A_i (docs/method.md §1)."""
    base = episode_advantages(batch, cfg)[batch.traj_index]
    return CreditOutput(base[:, None] * batch.response_mask.float(), base)
