"""The `torch` backend of segment_advantage: the plain PyTorch reference (docs/method.md
§2 and §4), on any device.

Vectorised: per-segment sums are one `index_add_` over flattened (row, segment) slots, the
per-segment weights are [B, Kmax] tensor math (segment_table.py), and the token advantages are one `gather`. No Python loop over rows or
segments. All math in fp32. The tests compare every backend with it and with the float64
loop oracle (sharpo_kernels/testing.py).

Conventions shared by every backend (documented in sharpo_kernels/segment_advantage/api.py):
- a position t of row i is in segment k when segment_ids[i, t] == k and response_mask == 1;
- m_{i,k} counts those positions; K_i is the number of segments (runs) of row i;
- with traj_index, mbar_i = sum of m over all segments of all rows of i's trajectory,
  divided by their number (the per-turn rows of one trajectory share mbar);
- a row without a teacher keeps A_i on all its generated tokens: its gap is NaN and its
  weight and length_factor are 1 (so A~ = A * ((1-lam) + lam*rho*w) holds on every row).
"""
from __future__ import annotations

from typing import Optional

import torch

from .checks import check_nonempty_segments
from .segment_table import segment_coefficients

__all__ = ["segment_advantage_torch", "segment_sums", "token_advantages"]


def segment_sums(teacher_logp: torch.Tensor, student_logp: torch.Tensor,
                 segment_ids: torch.Tensor, in_segment: torch.Tensor,
                 has_teacher: torch.Tensor, kmax: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-segment sum of delta = teacher - student and count of positions.

    teacher_logp, student_logp: [B, L] float. segment_ids: [B, L] int (>= -1).
    in_segment: [B, L] bool (segment_ids >= 0 and response_mask == 1). has_teacher: [B] bool.
    Returns sums [B, Kmax] fp32 (0 for rows without a teacher) and counts [B, Kmax] int64.
    """
    B, L = segment_ids.shape
    dump = B * kmax                                     # slot for positions outside segments
    rows = torch.arange(B, device=segment_ids.device)[:, None]
    slot = torch.where(in_segment, rows * kmax + segment_ids.long(), dump).flatten()   # [B*L]
    use = in_segment & has_teacher[:, None]
    delta = teacher_logp.float() - student_logp.float()
    delta = torch.where(use, delta, torch.zeros((), device=delta.device))              # [B, L]
    sums = torch.zeros(dump + 1, dtype=torch.float32, device=delta.device)
    sums.index_add_(0, slot, delta.flatten())
    counts = torch.bincount(slot, minlength=dump + 1)
    return sums[:dump].view(B, kmax), counts[:dump].view(B, kmax)


def token_advantages(coef: torch.Tensor, segment_ids: torch.Tensor, in_segment: torch.Tensor,
                     mask: Optional[torch.Tensor], advantages: torch.Tensor) -> torch.Tensor:
    """A~[i, t] = A_i * coef[i, segment_ids[i, t]] in segments, A_i elsewhere, 0 where the
    response mask is 0. coef [B, Kmax]; returns [B, L] fp32."""
    B, L = segment_ids.shape
    out = advantages[:, None].expand(B, L).clone()
    if coef.shape[1] > 0 and L > 0:
        c = coef.gather(1, segment_ids.long().clamp(min=0))                      # [B, L]
        out = torch.where(in_segment, advantages[:, None] * c, out)
    if mask is not None:
        out = torch.where(mask, out, torch.zeros((), device=out.device))
    return out


def segment_advantage_torch(teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                            response_mask, traj_index, num_segments, kmax, lam, alpha, tau,
                            rho_min, rho_max):
    """The reference, on validated inputs (see api.py).

    response_mask: [B, L] bool or None; has_teacher: [B] bool; advantages: [B] fp32.
    Returns (advantages [B, L], gap, weight, length_factor [B, Kmax]) fp32.
    """
    in_segment = segment_ids >= 0
    if response_mask is not None:
        in_segment = in_segment & response_mask
    sums, counts = segment_sums(teacher_logp, student_logp, segment_ids, in_segment,
                                has_teacher, kmax)
    check_nonempty_segments(counts, num_segments)
    gap, w, rho, coef = segment_coefficients(sums, counts, num_segments, advantages, has_teacher,
                                             traj_index, lam, alpha, tau, rho_min, rho_max)
    out = token_advantages(coef, segment_ids, in_segment, response_mask, advantages)
    return out, gap, w, rho
