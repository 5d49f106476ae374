"""Test and benchmark helpers of `sharpo_kernels`: not part of the kernels' API.

    random_batch(B, L, ...)        random, realistic `segment_advantage` inputs (the tests,
                                   benchmarks/bench_segment_advantage.py and the
                                   `python -m sharpo_kernels` demo use it)
    segment_advantage_loop(...)    docs/method.md §4 written the straightforward way, Python
                                   loops in float64: the independent oracle of the tests and
                                   the "what a user writes first" baseline of the benchmark
    refusal(fn, *args, **kwargs)   the "TypeError: ..." / "ValueError: ..." a call raises, or
                                   "no error" (the tests compare messages across backends)

`random_batch`: each row is a padded rollout: a response of random length (response_mask 1)
then padding (mask 0, log-probs NaN: unused, so allowed). Inside the response, segments are
random disjoint spans (possibly adjacent, possibly one token), and about 5% of positions are
masked (observation-like tokens, or tokens inside a segment other than its first). Rows
without a teacher carry NaN teacher log-probs.

`segment_advantage_loop` is not a backend (no validation, slow); it follows the conventions
of sharpo_kernels/segment_advantage/api.py (mask, rows without a teacher, traj_index).
"""
from __future__ import annotations

import math
import random
from typing import Optional

import torch

from .segment_advantage.coefficients import SHARPO_DEFAULTS as D

__all__ = ["random_batch", "segment_advantage_loop", "refusal"]


def random_batch(B: int, L: int, *, segments: tuple[int, int] = (0, 6),
                 dtype: torch.dtype = torch.float32, seed: int = 0,
                 p_no_teacher: float = 0.2, p_zero_advantage: float = 0.1,
                 padded: bool = True, traj_groups: Optional[int] = None) -> dict:
    """Keyword arguments for `segment_advantage` (without the parameters).

    segments: (min, max) segments per row (capped by the response length).
    traj_groups: None, or the number of trajectories the rows are spread over (traj_index
    then holds arbitrary, non-contiguous integer labels).
    """
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((B, L), -1, dtype=torch.int64)
    mask = torch.zeros(B, L, dtype=torch.bool)
    for i in range(B):
        n = rng.randint(max(1, L // 2), L) if padded else L              # response length
        mask[i, :n] = True
        k = min(rng.randint(*segments), (n + 1) // 2)
        cuts = sorted(rng.sample(range(n + 1), 2 * k))                    # [start, end) pairs
        for s in range(k):
            ids[i, cuts[2 * s]:cuts[2 * s + 1]] = s
        if padded and n > 2:   # masked positions: observation-like, or inside a segment
            for j in rng.sample(range(n), max(1, n // 20)):   # (never a segment's first token)
                if ids[i, j] < 0 or (j > 0 and ids[i, j - 1] == ids[i, j]):
                    mask[i, j] = False
    student = -torch.rand(B, L, generator=gen) * 3.0
    teacher = student + torch.randn(B, L, generator=gen) * 0.7
    teacher = teacher.clamp(max=0.0)
    has_teacher = torch.rand(B, generator=gen) >= p_no_teacher
    advantages = torch.randn(B, generator=gen)
    advantages[torch.rand(B, generator=gen) < p_zero_advantage] = 0.0
    nan = float("nan")
    teacher[~mask] = nan
    student[~mask] = nan
    teacher[~has_teacher] = nan
    traj = None
    if traj_groups is not None:
        traj = torch.randint(0, traj_groups, (B,), generator=gen) * 7 + 100
    return dict(teacher_logp=teacher.to(dtype), student_logp=student.to(dtype), segment_ids=ids,
                advantages=advantages, has_teacher=has_teacher, response_mask=mask,
                traj_index=traj)



def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def segment_advantage_loop(teacher_logp, student_logp, segment_ids, advantages, *,
                           has_teacher=None, lam=D.lam, alpha=D.alpha, tau=D.tau,
                           rho_min=D.rho_min, rho_max=D.rho_max, response_mask=None,
                           traj_index: Optional[torch.Tensor] = None):
    """Returns (advantages [B, L], gap, weight, length_factor [B, Kmax], num_segments [B])."""
    B, L = segment_ids.shape
    t = teacher_logp.double()
    s = student_logp.double()
    mask = torch.ones(B, L, dtype=torch.bool) if response_mask is None else response_mask != 0
    teach = [True] * B if has_teacher is None else has_teacher.tolist()
    A = advantages.double().tolist()

    # Segments of each row: list of (id, positions with mask 1).
    segments = []
    for i in range(B):
        row = {}
        for j in range(L):
            k = int(segment_ids[i, j])
            if k >= 0:
                row.setdefault(k, [])
                if mask[i, j]:
                    row[k].append(j)
        segments.append([row[k] for k in sorted(row)])

    # mbar per row, over the row's trajectory.
    traj = list(range(B)) if traj_index is None else traj_index.tolist()
    tot_m, tot_k = {}, {}
    for i in range(B):
        tot_m[traj[i]] = tot_m.get(traj[i], 0) + sum(len(p) for p in segments[i])
        tot_k[traj[i]] = tot_k.get(traj[i], 0) + len(segments[i])

    kmax = max([len(r) for r in segments], default=0)
    nan = float("nan")
    gap = torch.full((B, kmax), nan, dtype=torch.float64)
    weight = torch.full((B, kmax), nan, dtype=torch.float64)
    rho = torch.full((B, kmax), nan, dtype=torch.float64)
    out = torch.zeros(B, L, dtype=torch.float64)
    for i in range(B):
        for j in range(L):
            if mask[i, j]:
                out[i, j] = A[i]
        mbar = tot_m[traj[i]] / tot_k[traj[i]] if tot_k[traj[i]] else 0.0
        sign = (A[i] > 0) - (A[i] < 0)
        for k, pos in enumerate(segments[i]):
            if not teach[i]:       # no teacher: plain A_i
                weight[i, k], rho[i, k] = 1.0, 1.0
                continue
            m = len(pos)
            g = sum(float(t[i, j] - s[i, j]) for j in pos) / m
            u = min(max(2.0 * _sigmoid(g / tau) - 1.0, -alpha), alpha)
            w = 1.0 + sign * u
            r = min(max(mbar / m, rho_min), rho_max)
            gap[i, k], weight[i, k], rho[i, k] = g, w, r
            for j in pos:
                out[i, j] = A[i] * ((1.0 - lam) + lam * r * w)
    num = torch.tensor([len(r) for r in segments], dtype=torch.int64)
    return out, gap, weight, rho, num


def refusal(fn, *args, **kwargs) -> str:
    """fn(*args, **kwargs)'s refusal as "<TypeError|ValueError>: <message>", or "no error"
    when it returns (any other exception propagates)."""
    try:
        fn(*args, **kwargs)
    except (TypeError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return "no error"
