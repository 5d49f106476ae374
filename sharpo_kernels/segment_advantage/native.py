"""`cpp` and `cuda` backends of segment_advantage: glue to the native module `_sharpo_native`
(csrc/segment_advantage_cpu.cpp, csrc/segment_advantage_cuda.cu).

    segment_advantage_cpp   CPU tensors: validation and all the math in one native call
    launch_cuda             CUDA tensors: the single validating pass (one launch, two with
                            traj_index); api.py reads its error word

Tensors cross as data_ptr() integers with dtype codes and row strides (csrc/segment_advantage.h:
SegInputs). Rows must have a unit inner stride; other layouts are copied first.
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import _backend
from .checks import (_FP32_HALF, ERR_MASK_VALUE, _first,
                     check_advantage_range, check_logp_range, check_values, error_message,
                     logp_bound, max_coefficient)
from .segment_table import group_rows
from .single_pass import new_buffers

# Codes of csrc/segment_advantage.h (LogpDtype, IdDtype, MaskDtype).
_LOGP_CODE = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
_ID_CODE = {torch.int32: 0, torch.int64: 1}
_MASK_NONE, _MASK_U8, _MASK_I64, _MASK_F32 = 0, 1, 2, 3


def _new_output(B: int, L: int, device) -> torch.Tensor:
    """Allocation of the [B, L] fp32 result; tests replace it to poison the buffer."""
    return torch.empty(B, L, dtype=torch.float32, device=device)


def _rows(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """x [B, L] with unit inner stride, and its row stride in elements."""
    if x.shape[1] > 1 and x.stride(1) != 1:
        x = x.contiguous()
    return x, x.stride(0)


def _ids(segment_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    ids = segment_ids if segment_ids.dtype in _ID_CODE else segment_ids.long()
    return ids, _ID_CODE[ids.dtype]


def _mask_cpu(mask: Optional[torch.Tensor], host_checks) -> tuple[Optional[torch.Tensor], int]:
    """Mask for the C++ kernel, which checks 0/1 values itself for u8/i64/f32. Other dtypes
    are checked here; on a bad value host_checks() runs first (rules ranked before it)."""
    if mask is None:
        return None, _MASK_NONE
    if mask.dtype == torch.bool:
        return mask.view(torch.uint8), _MASK_U8
    if mask.dtype == torch.uint8:
        return mask, _MASK_U8
    if mask.dtype == torch.int64:
        return mask, _MASK_I64
    if mask.dtype == torch.float32:
        return mask, _MASK_F32
    bad = (mask != 0) & (mask != 1)           # rarer dtypes: check here, pass as u8
    if bool(bad.any()):
        host_checks()
        r, p = _first(bad)
        raise ValueError(error_message(ERR_MASK_VALUE, r, p, mask[r, p].item(), 0))
    return (mask != 0).view(torch.uint8), _MASK_U8


def _inputs(t, s, ids, ids_code, mask, mask_code, adv, ht, group, num_groups):
    """The 17-tuple `make_inputs` of csrc/bindings.cpp reads. Callers keep the tensors alive."""
    t, ts = _rows(t)
    s, ss = _rows(s)
    B, L = t.shape
    ptr = lambda x: 0 if x is None else x.data_ptr()  # noqa: E731
    return (ptr(t), ptr(s), _LOGP_CODE[t.dtype], ts, ss, ptr(ids), ids_code, ids.stride(0),
            ptr(mask), mask_code, 0 if mask is None else mask.stride(0), ptr(adv), ptr(ht),
            ptr(group), num_groups, B, L), (t, s)


def segment_advantage_cpp(teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                          response_mask, traj_index, lam, alpha, tau, rho_min, rho_max):
    """C++ CPU backend: validates the data rules and computes in one native call. The
    advantages' range rule runs first, in the kernel; float64 advantages (whose float32 copy
    may round across the bound, or overflow) have it checked here instead.
    Returns (advantages [B, L], gap, weight, length_factor [B, Kmax], num_segments [B]), the
    field order of SegmentAdvantage (the native call itself returns err, num, gap, w, rho)."""
    native = _backend.native_module()
    B, L = teacher_logp.shape
    ids, ids_code = _ids(segment_ids)
    ids, _ = _rows(ids)
    def host_checks():   # the error path: the host checks in their order (checks.py)
        check_advantage_range(advantages, lam, alpha, rho_max)
        check_logp_range(teacher_logp, student_logp, segment_ids, has_teacher, response_mask)
        check_values(teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                     response_mask)

    mask, mask_code = _mask_cpu(response_mask, host_checks)
    if mask is not None:
        mask, _ = _rows(mask)
    coef = max_coefficient(lam, alpha, rho_max)
    if advantages.dtype == torch.float64:   # its float32 copy may round across the bound
        check_advantage_range(advantages, lam, alpha, rho_max)
        coef = 0.0                                # the kernel skips the rule
    adv = advantages.float().contiguous()
    ht = None if has_teacher is None else has_teacher.contiguous().view(torch.uint8)
    group, num_groups = (None, 0)
    if traj_index is not None:
        group, num_groups = group_rows(traj_index, B, teacher_logp.device)
        group = group.contiguous()
    inputs, keep = _inputs(teacher_logp, student_logp, ids, ids_code, mask, mask_code, adv, ht,
                           group, num_groups)
    out = _new_output(B, L, teacher_logp.device)
    err, num, gap, w, rho = native.segment_advantage_cpu(
        inputs, out.data_ptr(), out.stride(0), lam, alpha, tau, rho_min, rho_max,
        torch.get_num_threads(), logp_bound(max(L, 1)), coef, _FP32_HALF)
    del keep
    if err[0] != 0:
        # The kernel stops each row at its first error and reports the lowest row; the
        # rules' priority (checks.py: every row for one rule before the next rule) comes
        # from the host checks, which raise first unless only segments are empty, where
        # lowest row then lowest segment is the kernel's order too.
        host_checks()
        raise ValueError(error_message(*err))
    return (out, torch.from_numpy(gap), torch.from_numpy(w), torch.from_numpy(rho),
            torch.from_numpy(num))


_ADV_CODE = {torch.float32: 0, torch.float64: 1, torch.bfloat16: 2, torch.float16: 3}


def _mask_cuda(mask: Optional[torch.Tensor]) -> tuple[Optional[torch.Tensor], int, bool]:
    """(mask, MaskDtype code, whether the kernel checks 0/1 values). Dtypes the kernel does
    not read become uint8 0, 1 or 2 (2: neither 0 nor 1, NaN included) exactly."""
    if mask is None:
        return None, _MASK_NONE, False
    if mask.dtype == torch.bool:
        return mask.view(torch.uint8), _MASK_U8, False
    if mask.dtype in (torch.uint8, torch.int64, torch.float32):
        return mask, {torch.uint8: _MASK_U8, torch.int64: _MASK_I64}.get(mask.dtype, _MASK_F32), True
    coded = torch.where(mask == 0, 0, torch.where(mask == 1, 1, 2)).to(torch.uint8)
    return coded, _MASK_U8, True


def launch_cuda(teacher_logp, student_logp, segment_ids, advantages, has_teacher, response_mask,
                traj_index, cap, lam, alpha, tau, rho_min, rho_max):
    """CUDA backend: the single validating pass of csrc/segment_advantage_cuda.cu (one
    launch, two with traj_index) with a table of `cap` columns, plus a memset of the error
    word. Returns (out [B, L], gap, w, rho [B, cap] views, num_segments [B], word [2] int64);
    no host read (the caller reads `word`, api.py). The same contract as the Triton
    launcher (triton_kernels.launch)."""
    native = _backend.native_module()
    device = teacher_logp.device
    B, L = teacher_logp.shape
    tab, out, num, word = new_buffers(_new_output, B, L, cap, device)
    capp = tab.shape[2]
    if B:
        ids, ids_code = _ids(segment_ids)
        ids, _ = _rows(ids)
        mask, mask_code, mask_check = _mask_cuda(response_mask)
        if mask is not None:
            mask, _ = _rows(mask)
        # [B] vectors are read at b (no stride): contiguous (a no-op when they are)
        adv = (advantages if advantages.dtype in _ADV_CODE else advantages.double()).contiguous()
        ht = None if has_teacher is None else has_teacher.contiguous().view(torch.uint8)
        traj = None
        rowm = None
        if traj_index is not None:
            traj = traj_index.to(torch.int64).contiguous()
            rowm = torch.empty(B, dtype=torch.float32, device=device)
        inputs, keep = _inputs(teacher_logp, student_logp, ids, ids_code, mask, mask_code, adv,
                               ht, None, 0)
        ptr = lambda x: 0 if x is None else x.data_ptr()  # noqa: E731
        with torch.cuda.device(device):
            stream = torch.cuda.current_stream(device).cuda_stream
            code = native.segment_advantage_cuda(
                inputs, adv.data_ptr(), _ADV_CODE[adv.dtype], mask_check, capp, tab.data_ptr(),
                out.data_ptr(), out.stride(0), num.data_ptr(), ptr(rowm), word.data_ptr(),
                ptr(traj), max_coefficient(lam, alpha, rho_max), logp_bound(max(L, 1)),
                1.0 - lam, lam, alpha, 2.0 * tau, rho_min, rho_max, stream)
        del keep
        if code != 0:
            raise RuntimeError(f"segment_advantage: CUDA kernel launch failed (cudaError {code})")
    return out, tab[0, :, :cap], tab[1, :, :cap], tab[2, :, :cap], num, word
