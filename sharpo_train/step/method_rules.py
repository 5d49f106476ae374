"""The method's rules shared by the trainer (loops/trainer.py, teacher.py, estimators/) and the
engine integrations (integrations/verl.py, trl.py, common.py): plain values and tensors in,
plain values and tensors out, nothing read from a run, a config or an engine.

- teacher rule (docs/method.md §3): ``successful_peers`` picks each episode's successful
  peer in its group (success: reward >= ``SUCCESS_THRESHOLD``); the hint built from it
  is sharpo_train/hint.py's.
- group statistics (docs/method.md §1): ``grouped_normalise`` (value minus its group's mean,
  over the group's std) and ``group_advantages``, GRPO's A_i of every episode.
- step statistics of SHARPO's segments (docs/method.md §4): ``scored_segments`` (which
  segments carry a teacher signal), ``teacher_coverage`` and ``sharpo_step_stats`` /
  ``step_stats`` (the ``sharpo/*`` dashboard: one definition, one set of denominators and
  NaN for nothing to average, in the trainer, verl, verl-agent and TRL).
SHARPO's coefficients and their defaults live with the kernel
(``sharpo_kernels.SHARPO_DEFAULTS``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

__all__ = ["SUCCESS_THRESHOLD", "TEACHER_CHOICES", "successful_peers", "grouped_normalise", "group_advantages",
           "scored_segments", "covered_trajectories", "teacher_coverage", "StepStatInputs", "step_stats",
           "sharpo_step_stats"]

# ---------------------------------------------------------------------------- teacher rule

SUCCESS_THRESHOLD = 0.5      # success <=> reward >= threshold (1/0 rewards and verl-agent's 10/0)
TEACHER_CHOICES = ("random", "first")


def successful_peers(groups: Sequence, success: Sequence[bool], *, choice: str = "first",
                     rng: Optional[random.Random] = None,
                     valid: Optional[Sequence[bool]] = None) -> list[Optional[int]]:
    """peer[e] = index of the successful episode whose trajectory is e's hint, or None
    (docs/method.md §3). All sequences are [N], one entry per episode.

    In e's group (``groups[e]``, any hashable), the candidates are the successful episodes
    other than e: a failed episode may take any success of its group, a successful one a
    *different* success; the group's only success and every episode of a group without
    success get None. ``valid[e]`` False (e.g. an episode ended by an env fault) takes no
    part: it neither gets nor gives a hint. ``choice="first"`` takes the first candidate in
    batch order (deterministic; the integrations' rule); ``"random"`` draws one with ``rng``
    (the trainer's seeded RNG; groups in order of first appearance, episodes in order)."""
    if len(groups) != len(success):
        raise ValueError(f"success: expected {len(groups)} values, got {len(success)}")
    if valid is not None and len(valid) != len(groups):
        raise ValueError(f"valid: expected {len(groups)} values, got {len(valid)}")
    if choice not in TEACHER_CHOICES:
        raise ValueError(f"teacher.choice: expected random or first, got {choice!r}")
    rng = rng or random.Random(0)
    members: dict = {}
    for e, g in enumerate(groups):
        if valid is None or valid[e]:
            members.setdefault(g, []).append(e)
    peers: list[Optional[int]] = [None] * len(groups)
    for group in members.values():
        winners = [e for e in group if success[e]]
        for e in group:
            cands = [w for w in winners if w != e]
            if cands:
                peers[e] = cands[0] if choice == "first" else rng.choice(cands)
    return peers


# ---------------------------------------------------------------------------- group statistics

def grouped_normalise(values: torch.Tensor, keys: torch.Tensor, *, std: bool = True,
                      eps: float = 1e-6, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
    """[n] values, [n] int64 group keys -> [n]: value minus its group's mean, divided by
    (unbiased std + eps) when ``std``; a group of one gives 0. Computed in the values'
    dtype. ``valid`` [n] bool: only these entries form the groups; the others get 0 (so a
    group with fewer than 2 valid entries gives 0)."""
    if values.shape != keys.shape or values.dim() != 1:
        raise ValueError(f"keys: expected the shape of values {tuple(values.shape)}, got "
                         f"{tuple(keys.shape)}")
    if valid is not None:
        out = torch.zeros_like(values)
        if bool(valid.any()):
            out[valid] = grouped_normalise(values[valid], keys[valid], std=std, eps=eps)
        return out
    if values.numel() == 0:
        return values.clone()
    _, inv = torch.unique(keys, return_inverse=True)
    m = int(inv.max()) + 1
    n = torch.zeros(m, dtype=values.dtype).index_add_(0, inv, torch.ones_like(values))
    mean = torch.zeros(m, dtype=values.dtype).index_add_(0, inv, values) / n
    out = values - mean[inv]
    if std:
        ss = torch.zeros(m, dtype=values.dtype).index_add_(0, inv, out ** 2)
        out = out / (torch.sqrt(ss / (n - 1).clamp(min=1))[inv] + eps)
    return torch.where(n[inv] > 1, out, torch.zeros_like(out))


def group_advantages(rewards: torch.Tensor, group_of: torch.Tensor, *, norm_std: bool = True,
                     eps: float = 1e-6, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
    """docs/method.md §1: A_i = (r_i - mean_g r) / (std_g r + eps) over each group g
    ([N] -> [N] fp32; ``norm_std`` False: centred only, Dr. GRPO). std is the unbiased
    sample std (as torch.std); a group of one has A = 0. ``valid`` [N] bool: only these
    episodes form the groups; the others get A = 0."""
    return grouped_normalise(rewards.float(), group_of, std=norm_std, eps=eps, valid=valid)


# ---------------------------------------------------------------------------- step statistics

def scored_segments(gap: torch.Tensor, base: torch.Tensor, has_teacher: torch.Tensor
                    ) -> torch.Tensor:
    """[B, K] bool: the segments whose weight carries a teacher signal: a real segment
    (gap not NaN) of a row with a teacher and A_i != 0. gap [B, K] (``SegmentAdvantage``),
    base [B] A_i per row, has_teacher [B] bool."""
    return ~torch.isnan(gap) & has_teacher[:, None] & (base != 0)[:, None]


def covered_trajectories(has_teacher: torch.Tensor, traj_index: Optional[torch.Tensor] = None
                         ) -> torch.Tensor:
    """[N] bool: the trajectories with a teacher, i.e. with ``has_teacher`` on at least one
    of their rows (has_teacher [B] bool; traj_index [B] int64, the trajectory of each row,
    numbered as ``torch.unique`` orders them; None: one row per trajectory, e.g. TRL's
    completions)."""
    has_teacher = has_teacher.bool()
    if traj_index is None:
        return has_teacher
    _, inv = torch.unique(traj_index.to(has_teacher.device), return_inverse=True)
    covered = torch.zeros(int(inv.max()) + 1 if inv.numel() else 0, dtype=torch.bool,
                          device=has_teacher.device)
    covered[inv[has_teacher]] = True
    return covered


def teacher_coverage(has_teacher: torch.Tensor, traj_index: Optional[torch.Tensor] = None
                     ) -> float:
    """The share of trajectories with a teacher (``covered_trajectories``): the
    denominator is trajectories in every engine; NaN for an empty batch."""
    covered = covered_trajectories(has_teacher, traj_index)
    return float(covered.float().mean()) if covered.numel() else float("nan")


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
