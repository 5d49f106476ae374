"""SHARPO's step statistics (docs/method.md §4): ``scored_segments`` (which segments carry a
teacher signal) and ``sharpo_step_stats`` / ``step_stats`` (the ``sharpo/*`` dashboard: one
definition, one set of denominators and NaN for nothing to average, in the trainer,
verl, verl-agent and TRL); ``lam_zero_stats``, the dashboard when no teacher is scored.
Tensors in, plain numbers out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from ..step.teacher_rule import covered_trajectories

__all__ = ["scored_segments", "StepStatInputs", "step_stats", "sharpo_step_stats",
           "lam_zero_stats"]

def scored_segments(gap: torch.Tensor, base: torch.Tensor, has_teacher: torch.Tensor
                    ) -> torch.Tensor:
    """[B, K] bool: the segments whose weight carries a teacher signal: a real segment
    (gap not NaN) of a row with a teacher and A_i != 0. gap [B, K] (``SegmentAdvantage``),
    base [B] A_i per row, has_teacher [B] bool."""
    return ~torch.isnan(gap) & has_teacher[:, None] & (base != 0)[:, None]


@dataclass
class StepStatInputs:
    """What the step statistics average, flat, so that engines that split a step over
    processes can concatenate them first (TRL): gaps and weights [S] of the scored
    segments, length factors [R] of every real segment, covered [N] bool per trajectory."""
    gaps: torch.Tensor
    weights: torch.Tensor
    length_factors: torch.Tensor
    covered: torch.Tensor

    @staticmethod
    def of(seg, base: torch.Tensor, has_teacher: torch.Tensor,
           traj_index: Optional[torch.Tensor] = None) -> "StepStatInputs":
        """From a ``SegmentAdvantage`` ``seg``, base [B] A_i per row, has_teacher [B] bool
        and traj_index [B] (None: one row per trajectory)."""
        valid = ~torch.isnan(seg.weight)
        scored = valid & scored_segments(seg.gap, base, has_teacher)
        return StepStatInputs(seg.gap[scored].float(), seg.weight[scored].float(),
                              seg.length_factor[valid].float(),
                              covered_trajectories(has_teacher, traj_index))

    @staticmethod
    def cat(parts: Sequence["StepStatInputs"]) -> "StepStatInputs":
        """The inputs of several processes' shares of one step, on the CPU."""
        return StepStatInputs(*(torch.cat([getattr(p, k).detach().cpu() for p in parts])
                                for k in ("gaps", "weights", "length_factors", "covered")))


def step_stats(x: StepStatInputs, *, alpha: float, tau: float) -> dict:
    """The ``sharpo/*`` dashboard of a step (docs/training.md, metrics; every engine shows
    these keys): ``teacher_coverage`` (share of trajectories with a teacher), gap
    mean/std and weight mean/min/max over the scored segments (a real segment of a row
    with a teacher and A_i != 0), the fraction whose squashed gap reaches the clip bound
    alpha, the length factor's range over every real segment, and the number scored.
    NaN where there is nothing to average (an empty batch, no scored segment)."""
    nan = float("nan")
    gaps, w, rho = x.gaps, x.weights, x.length_factors

    def pick(t, fn):
        return fn(t).item() if t.numel() else nan
    # u(gap) reaches +-alpha: the clip bound is active
    clipped = (torch.tanh(gaps / (2 * tau)).abs() >= alpha) if gaps.numel() else gaps
    return {
        "sharpo/teacher_coverage": pick(x.covered.float(), torch.mean),   # teacher_coverage
        "sharpo/gap_mean": pick(gaps, torch.mean),
        "sharpo/gap_std": pick(gaps, lambda t: t.std() if t.numel() > 1 else torch.tensor(0.)),
        "sharpo/weight_mean": pick(w, torch.mean),
        "sharpo/weight_min": pick(w, torch.min),
        "sharpo/weight_max": pick(w, torch.max),
        "sharpo/clipped_frac": pick(clipped.float(), torch.mean),
        "sharpo/length_factor_min": pick(rho, torch.min),
        "sharpo/length_factor_max": pick(rho, torch.max),
        "sharpo/segments_scored": int(gaps.numel()),
    }


def sharpo_step_stats(seg, base: torch.Tensor, has_teacher: torch.Tensor, *, alpha: float,
                      tau: float, traj_index: Optional[torch.Tensor] = None) -> dict:
    """``step_stats`` of one process's step (``StepStatInputs.of``; shapes there)."""
    return step_stats(StepStatInputs.of(seg, base, has_teacher, traj_index), alpha=alpha, tau=tau)


def lam_zero_stats() -> dict:
    """The ``sharpo/*`` dashboard at lam = 0, where SHARPO is its base exactly and no teacher
    is scored (docs/method.md §4: the multiplier (1 - lam) + lam * rho * w is 1): coverage 0,
    weights and length factors 1, gaps 0, nothing scored. The same keys as ``step_stats``
    in every engine (trainer, verl, verl-agent, TRL)."""
    return {"sharpo/teacher_coverage": 0.0, "sharpo/gap_mean": 0.0, "sharpo/gap_std": 0.0,
            "sharpo/weight_mean": 1.0, "sharpo/weight_min": 1.0, "sharpo/weight_max": 1.0,
            "sharpo/clipped_frac": 0.0, "sharpo/length_factor_min": 1.0,
            "sharpo/length_factor_max": 1.0, "sharpo/segments_scored": 0}
