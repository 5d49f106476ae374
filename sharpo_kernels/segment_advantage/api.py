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
The triton and cuda backends do the whole call, checks included, in one kernel pass per
row (single_pass.py); torch and cpp check on the host and in their pass.
Automatic order: "cpp", "cuda", "triton", "torch" (the first that runs on the inputs'
device); `backend=` overrides.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from .. import _backend
from .checks import (check_advantage_range, check_arguments, check_logp_range, check_params,
                     check_values)
from .coefficients import SHARPO_DEFAULTS as D
from .single_pass import SegmentCheck, run_single_pass

SEGMENT_ADVANTAGE_BACKENDS = _backend.OP_BACKENDS["segment_advantage"]   # automatic order


class SegmentAdvantage(NamedTuple):
    """Result of `segment_advantage` (docs/api.md)."""
    advantages: torch.Tensor     # [B, L] fp32: A~ for the policy loss (0 where masked)
    gap: torch.Tensor            # [B, Kmax] fp32: gap_{i,k} (NaN: no segment / no teacher)
    weight: torch.Tensor         # [B, Kmax] fp32: w_{i,k} (NaN where no segment)
    length_factor: torch.Tensor  # [B, Kmax] fp32: rho_{i,k} (NaN where no segment)
    num_segments: torch.Tensor   # [B] int64: K_i


CHECK_MODES = ("raise", "deferred")


def _check_max_segments(max_segments) -> Optional[int]:
    if max_segments is None:
        return None
    if isinstance(max_segments, bool) or not isinstance(max_segments, int):
        raise TypeError(f"max_segments: expected an int or None, got "
                        f"{type(max_segments).__name__}")
    if max_segments < 1:
        raise ValueError(f"max_segments: must be >= 1, got {max_segments}")
    return max_segments


def _pad_tables(res: SegmentAdvantage, max_segments: Optional[int]) -> SegmentAdvantage:
    """[B, Kmax] tables as [B, max_segments] (NaN columns added), for the backends that size
    them by Kmax; ValueError naming max_segments when a row has more segments."""
    if max_segments is None:
        return res
    kmax = res.gap.shape[1]
    if kmax > max_segments:
        r = int((res.num_segments > max_segments).nonzero()[0, 0])
        raise ValueError(f"max_segments: row {r} has {int(res.num_segments[r])} segments, "
                         f"more than max_segments={max_segments}")
    pad = lambda x: torch.nn.functional.pad(x, (0, max_segments - kmax), value=float("nan"))  # noqa: E731
    return res._replace(gap=pad(res.gap), weight=pad(res.weight), length_factor=pad(res.length_factor))


def segment_advantage(teacher_logp: torch.Tensor, student_logp: torch.Tensor,
                      segment_ids: torch.Tensor, advantages: torch.Tensor, *,
                      has_teacher: Optional[torch.Tensor] = None, lam: float = D.lam,
                      alpha: float = D.alpha, tau: float = D.tau, rho_min: float = D.rho_min,
                      rho_max: float = D.rho_max, response_mask: Optional[torch.Tensor] = None,
                      traj_index: Optional[torch.Tensor] = None,
                      max_segments: Optional[int] = None, check: str = "raise",
                      backend: Optional[str] = None):
    """SHARPO effective advantages (see the module docstring and docs/api.md).

    teacher_logp, student_logp: [B, L] fp32/bf16/fp16. segment_ids: [B, L] int, -1 = none.
    advantages: [B] float. has_teacher: [B] bool (default all True). response_mask: [B, L]
    0/1 (bool, int or float; default all ones). traj_index: [B] int or None.
    max_segments: None (tables [B, Kmax]) or a static cap: tables [B, max_segments], NaN
    past K_i; a row with more segments is a ValueError naming max_segments.
    check: "raise" (default) or "deferred" (triton and cuda backends): no host read; returns
    (SegmentAdvantage, SegmentCheck) and the caller calls `.raise_if_error()` later
    (docs/api.md "Graph capture").
    backend: None (automatic), "torch", "cpp", "triton" or "cuda".
    Raises TypeError/ValueError naming the argument on bad input; inputs are never modified.
    """
    check_arguments(teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                    response_mask, traj_index)
    lam, alpha, tau, rho_min, rho_max = check_params(lam, alpha, tau, rho_min, rho_max)
    max_segments = _check_max_segments(max_segments)
    if not isinstance(check, str) or check not in CHECK_MODES:
        raise ValueError(f"check: expected one of {CHECK_MODES}, got {check!r}")
    device = teacher_logp.device
    name = _backend.resolve_backend(backend, device, SEGMENT_ADVANTAGE_BACKENDS)
    params = (lam, alpha, tau, rho_min, rho_max)
    if check == "deferred" and name not in ("triton", "cuda"):
        raise ValueError(f"check: 'deferred' needs the triton or cuda backend (one kernel "
                         f"writes the error word), got backend {name!r}")

    if name in ("triton", "cuda"):   # validate inside their single pass
        if name == "triton":
            from .triton_kernels import launch
        else:
            from .native import launch_cuda as launch
        fields, chk = run_single_pass(launch, teacher_logp, student_logp, segment_ids,
                                      advantages, has_teacher, response_mask, traj_index,
                                      params, max_segments, check == "deferred")
        res = SegmentAdvantage(*fields)
        return (res, chk) if chk is not None else res

    if name == "cpp":   # validates the rules inside its single pass over the tokens
        from .native import segment_advantage_cpp
        return _pad_tables(SegmentAdvantage(*segment_advantage_cpp(
            teacher_logp, student_logp, segment_ids, advantages, has_teacher, response_mask,
            traj_index, *params)), max_segments)

    check_advantage_range(advantages, lam, alpha, rho_max)   # before the other rules
    check_logp_range(teacher_logp, student_logp, segment_ids, has_teacher, response_mask)
    B = teacher_logp.shape[0]
    num_segments, kmax = check_values(teacher_logp, student_logp, segment_ids, advantages,
                                      has_teacher, response_mask)
    adv = advantages.float()
    ht = has_teacher if has_teacher is not None else torch.ones(B, dtype=torch.bool, device=device)
    mask = None if response_mask is None else response_mask != 0
    args = (teacher_logp, student_logp, segment_ids, adv, ht, mask, traj_index, num_segments,
            kmax, *params)
    from .reference import segment_advantage_torch
    out, gap, w, rho = segment_advantage_torch(*args)
    return _pad_tables(SegmentAdvantage(out, gap, w, rho, num_segments), max_segments)
