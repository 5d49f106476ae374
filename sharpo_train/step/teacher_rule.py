"""The teacher rule (docs/method.md §3), shared by the trainer (step/teacher.py) and the engine
integrations (integrations/verl.py, trl.py): ``successful_peers`` picks each episode's
successful peer in its group (success: reward >= ``SUCCESS_THRESHOLD``; the hint built from
it is sharpo_train/hint.py's); ``covered_trajectories`` / ``teacher_coverage``: which
trajectories got one (the metrics' ``sharpo/teacher_coverage`` in every engine). Plain
values and tensors in and out: nothing read from a run, a config or an engine.
"""
from __future__ import annotations

import random
from typing import Optional, Sequence

import torch

__all__ = ["SUCCESS_THRESHOLD", "TEACHER_CHOICES", "successful_peers", "covered_trajectories",
           "teacher_coverage"]

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
