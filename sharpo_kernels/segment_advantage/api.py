"""`segment_advantage`: SHARPO's segment-level effective advantage (docs/method.md §4,
docs/api.md): the public function, its result type and the dispatch to a backend.

For rollout (row) i with GRPO advantage A_i and segments k = 0..K_i-1 of m_{i,k} tokens:

    gap_{i,k}  = mean over the segment of (teacher_logp - student_logp)
    w_{i,k}    = 1 + sign(A_i) * clip(tanh(gap_{i,k} / (2 tau)), -alpha, alpha)
    rho_{i,k}  = clip(mbar_i / m_{i,k}, rho_min, rho_max),  mbar_i = mean_k m_{i,k}
    A~_{i,t}   = A_i * ((1 - lam) + lam * rho_{i,k} * w_{i,k})   for t in segment k
    A~_{i,t}   = A_i                                             for other generated tokens
    A~_{i,t}   = 0                                               where response_mask == 0

Choices the method leaves open (the same on every backend):
- A position belongs to segment k when segment_ids == k AND response_mask == 1; masked
  positions inside a run are ignored by it (not counted in m) and get 0.
- A row with has_teacher False keeps A_i: its gap is NaN, its weight and length_factor are 1.
- traj_index ([B] int, optional; the verl-agent layout): rows sharing a value are the
  per-turn rows of one trajectory. Segment ids stay numbered per row, gap, w and m stay per
  segment, but mbar is taken over the whole trajectory: mbar = (sum of m over every segment
  of every row of the trajectory) / (number of those segments). So rho balances the segment
  lengths of the whole trajectory, as if its rows were one rollout. A_i and has_teacher are
  read per row (in that layout they are equal across a trajectory's rows).
- Log-probs must be finite only where they are used (segment positions of rows with a
  teacher); see checks.py for every data rule.

Backends (chosen by sharpo_kernels/_backend.py), one module each in this folder:
    torch   reference.py       plain PyTorch, any device (also the fallback)
    cpp     native.py          C++ CPU kernel of `_sharpo_native`; default for CPU tensors
    triton  triton_kernels.py  Triton kernels; CUDA tensors (CPU under TRITON_INTERPRET=1)
    cuda    native.py          CUDA kernels of `_sharpo_native`; default for CUDA tensors
The torch, triton and cuda backends share the segment-table math of segment_table.py.
Automatic order: "cpp", "cuda", "triton", "torch" (the first that runs on the inputs'
device); `backend=` overrides.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from .. import _backend
from .checks import check_arguments, check_params, check_values
from .coefficients import SHARPO_DEFAULTS as D

SEGMENT_ADVANTAGE_BACKENDS = _backend.OP_BACKENDS["segment_advantage"]   # automatic order


class SegmentAdvantage(NamedTuple):
    """Result of `segment_advantage` (docs/api.md)."""
    advantages: torch.Tensor     # [B, L] fp32: A~ for the policy loss (0 where masked)
    gap: torch.Tensor            # [B, Kmax] fp32: gap_{i,k} (NaN: no segment / no teacher)
    weight: torch.Tensor         # [B, Kmax] fp32: w_{i,k} (NaN where no segment)
    length_factor: torch.Tensor  # [B, Kmax] fp32: rho_{i,k} (NaN where no segment)
    num_segments: torch.Tensor   # [B] int64: K_i


def segment_advantage(teacher_logp: torch.Tensor, student_logp: torch.Tensor,
                      segment_ids: torch.Tensor, advantages: torch.Tensor, *,
                      has_teacher: Optional[torch.Tensor] = None, lam: float = D.lam,
                      alpha: float = D.alpha, tau: float = D.tau, rho_min: float = D.rho_min,
                      rho_max: float = D.rho_max, response_mask: Optional[torch.Tensor] = None,
                      traj_index: Optional[torch.Tensor] = None,
                      backend: Optional[str] = None) -> SegmentAdvantage:
    """SHARPO effective advantages (see the module docstring and docs/api.md).

    teacher_logp, student_logp: [B, L] fp32/bf16/fp16. segment_ids: [B, L] int, -1 = none.
    advantages: [B] float. has_teacher: [B] bool (default all True). response_mask: [B, L]
    0/1 (bool, int or float; default all ones). traj_index: [B] int or None.
    backend: None (automatic), "torch", "cpp", "triton" or "cuda".
    Raises TypeError/ValueError naming the argument on bad input; inputs are never modified.
    """
    check_arguments(teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                    response_mask, traj_index)
    lam, alpha, tau, rho_min, rho_max = check_params(lam, alpha, tau, rho_min, rho_max)
    device = teacher_logp.device
    name = _backend.resolve_backend(backend, device, SEGMENT_ADVANTAGE_BACKENDS)
    params = (lam, alpha, tau, rho_min, rho_max)

    if name == "cpp":   # validates inside its single pass over the tokens
        from .native import segment_advantage_cpp
        return SegmentAdvantage(*segment_advantage_cpp(
            teacher_logp, student_logp, segment_ids, advantages, has_teacher, response_mask,
            traj_index, *params))

    B = teacher_logp.shape[0]
    num_segments, kmax = check_values(teacher_logp, student_logp, segment_ids, advantages,
                                      has_teacher, response_mask)
    adv = advantages.float()
    ht = has_teacher if has_teacher is not None else torch.ones(B, dtype=torch.bool, device=device)
    mask = None if response_mask is None else response_mask != 0
    args = (teacher_logp, student_logp, segment_ids, adv, ht, mask, traj_index, num_segments,
            kmax, *params)
    if name == "torch":
        from .reference import segment_advantage_torch as impl
    elif name == "triton":
        from .triton_kernels import segment_advantage_triton as impl
    else:  # "cuda"
        from .native import segment_advantage_cuda as impl
    out, gap, w, rho = impl(*args)
    return SegmentAdvantage(out, gap, w, rho, num_segments)
