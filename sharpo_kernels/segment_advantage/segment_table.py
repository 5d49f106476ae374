"""The [B, Kmax] segment-table math of docs/method.md §4 of the torch reference (the cpp
backend does the same math in C++, csrc/segment_advantage_cpu.cpp; the triton and cuda
backends inside their single pass, triton_kernels.py and csrc/segment_advantage_cuda.cu):

    group_rows            trajectory of every row (traj_index -> 0..T-1)
    segment_coefficients  gap, w, rho and coef = (1-lam) + lam*rho*w from per-segment sums

reference.py computes the per-segment sums of teacher - student and the counts with
index_add_, then calls `segment_coefficients`, then scatters coef back onto the tokens. All
math in fp32. `group_rows` also serves the cpp backend's traj_index.
"""
from __future__ import annotations

from typing import Optional

import torch

from .coefficients import effective_coefficient

__all__ = ["group_rows", "segment_coefficients"]


def group_rows(traj_index: Optional[torch.Tensor], B: int, device) -> tuple[torch.Tensor, int]:
    """Trajectory of every row: (group [B] int64 in 0..T-1, T). Without traj_index each row is
    its own trajectory."""
    if traj_index is None:
        return torch.arange(B, device=device), B
    uniq, inverse = torch.unique(traj_index, return_inverse=True)
    return inverse.long(), int(uniq.numel())


def segment_coefficients(sums: torch.Tensor, counts: torch.Tensor, num_segments: torch.Tensor,
                         advantages: torch.Tensor, has_teacher: torch.Tensor,
                         traj_index: Optional[torch.Tensor], lam: float, alpha: float,
                         tau: float, rho_min: float, rho_max: float):
    """docs/method.md §4 on the [B, Kmax] segment table.

    sums [B, Kmax] fp32, counts [B, Kmax] int, num_segments [B] int64, advantages [B] fp32,
    has_teacher [B] bool, traj_index [B] int or None.
    Returns gap, weight, length_factor (NaN where k >= K_i) and coef = (1-lam) + lam*rho*w
    (1 where k >= K_i), all [B, Kmax] fp32.
    """
    B, kmax = sums.shape
    dev = sums.device
    exists = torch.arange(kmax, device=dev)[None, :] < num_segments[:, None]       # [B, Kmax]
    m = counts.float()
    m_safe = m.clamp(min=1.0)
    gap = sums / m_safe                                                          # length-normalised
    # mbar over the row, or over the row's whole trajectory (traj_index).
    group, T = group_rows(traj_index, B, dev)
    tot_m = torch.zeros(T, device=dev).index_add_(0, group, m.sum(dim=1))
    tot_k = torch.zeros(T, device=dev).index_add_(0, group, num_segments.float())
    mbar = (tot_m / tot_k.clamp(min=1.0))[group]                                # [B]
    u = torch.tanh(gap / (2.0 * tau)).clamp(-alpha, alpha)                      # = clip(2 sig(z/tau) - 1)
    w = 1.0 + torch.sign(advantages)[:, None] * u
    rho = (mbar[:, None] / m_safe).clamp(rho_min, rho_max)
    teach = has_teacher[:, None]
    nan = torch.full((), float("nan"), device=dev)
    one = torch.ones((), device=dev)
    gap = torch.where(teach, gap, nan)
    w = torch.where(teach, w, one)
    rho = torch.where(teach, rho, one)
    coef = effective_coefficient(w, rho, lam)
    coef = torch.where(exists & teach, coef, one)      # no teacher: exactly A_i
    return (torch.where(exists, gap, nan), torch.where(exists, w, nan),
            torch.where(exists, rho, nan), coef)
