"""`triton` backend of segment_advantage (CUDA tensors; CPU tensors under TRITON_INTERPRET=1).

Two kernels around the [B, Kmax] coefficient step (docs/method.md §4, done in torch by
`segment_coefficients` of segment_table.py, shared with the torch and cuda backends):

  _segment_sums_kernel   grid (B, ceil(L / BLOCK)): sums[b, k] += teacher - student and
                         counts[b, k] += 1 over positions of segment k (atomics, fp32/int32).
  _segment_apply_kernel  grid (B, ceil(L / BLOCK)): out = A * coef[b, id] in segments, A on
                         other positions, 0 where response_mask is 0.

Log-probs are converted to fp32 right after loading (bf16 arithmetic is unsupported in the
interpreter, docs/toolchain.md). Inputs are validated by the caller.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .checks import check_nonempty_segments
from .segment_table import segment_coefficients


@triton.jit
def _segment_sums_kernel(t_ptr, s_ptr, ids_ptr, mask_ptr, ht_ptr, sums_ptr, counts_ptr,
                         L, t_stride, s_stride, ids_stride, mask_stride, kmax,
                         HAS_MASK: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inb = offs < L
    ids = tl.load(ids_ptr + b * ids_stride + offs, mask=inb, other=-1).to(tl.int64)
    on = inb & (ids >= 0)
    if HAS_MASK:
        mk = tl.load(mask_ptr + b * mask_stride + offs, mask=inb, other=0)
        on = on & (mk != 0)
    teach = tl.load(ht_ptr + b) != 0
    use = on & teach
    tv = tl.load(t_ptr + b * t_stride + offs, mask=use, other=0.0).to(tl.float32)
    sv = tl.load(s_ptr + b * s_stride + offs, mask=use, other=0.0).to(tl.float32)
    delta = tl.where(use, tv - sv, 0.0)
    slot = b * kmax + tl.where(on, ids, 0)
    tl.atomic_add(sums_ptr + slot, delta, mask=on)
    tl.atomic_add(counts_ptr + slot, tl.full([BLOCK], 1, tl.int32), mask=on)


@triton.jit
def _segment_apply_kernel(ids_ptr, mask_ptr, adv_ptr, coef_ptr, out_ptr, L, ids_stride,
                          mask_stride, out_stride, kmax,
                          HAS_MASK: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inb = offs < L
    ids = tl.load(ids_ptr + b * ids_stride + offs, mask=inb, other=-1).to(tl.int64)
    seg = inb & (ids >= 0)
    a = tl.load(adv_ptr + b)
    c = tl.load(coef_ptr + b * kmax + tl.where(seg, ids, 0), mask=seg, other=1.0)
    v = tl.where(seg, a * c, a)
    if HAS_MASK:
        mk = tl.load(mask_ptr + b * mask_stride + offs, mask=inb, other=0)
        v = tl.where(mk != 0, v, 0.0)
    tl.store(out_ptr + b * out_stride + offs, v, mask=inb)


def _block(L: int, device: torch.device) -> int:
    # Interpreter: per-program overhead dominates, so few large blocks; GPU: 1024 tokens.
    cap = 4096 if device.type == "cpu" else 1024
    return max(16, min(cap, triton.next_power_of_2(max(L, 1))))


def _new_output(B: int, L: int, device) -> torch.Tensor:
    """Allocation of the [B, L] fp32 result; tests replace it to poison the buffer."""
    return torch.empty(B, L, dtype=torch.float32, device=device)


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x if x.shape[1] <= 1 or x.stride(1) == 1 else x.contiguous()


def segment_advantage_triton(teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                             response_mask, traj_index, num_segments, kmax, lam, alpha, tau,
                             rho_min, rho_max):
    """Triton backend on validated inputs (response_mask bool [B, L] or None, has_teacher
    bool [B], advantages fp32 [B]). Returns (advantages [B, L], gap, weight, length_factor)."""
    device = teacher_logp.device
    B, L = teacher_logp.shape
    t, s, ids = _rows(teacher_logp), _rows(student_logp), _rows(segment_ids)
    mask = None if response_mask is None else _rows(response_mask).view(torch.uint8)
    ht = has_teacher.contiguous().view(torch.uint8)
    adv = advantages.contiguous()
    sums = torch.zeros(B, kmax, dtype=torch.float32, device=device)
    counts = torch.zeros(B, kmax, dtype=torch.int32, device=device)
    BLOCK = _block(L, device)
    grid = (B, triton.cdiv(L, BLOCK))
    has_mask = mask is not None
    mask_arg = mask if has_mask else ids          # unused pointer when HAS_MASK is False
    mask_stride = mask.stride(0) if has_mask else 0
    if B and L and kmax:
        _segment_sums_kernel[grid](t, s, ids, mask_arg, ht, sums, counts, L, t.stride(0),
                                   s.stride(0), ids.stride(0), mask_stride, kmax,
                                   HAS_MASK=has_mask, BLOCK=BLOCK)
    check_nonempty_segments(counts, num_segments)
    gap, w, rho, coef = segment_coefficients(sums, counts, num_segments, adv, has_teacher,
                                             traj_index, lam, alpha, tau, rho_min, rho_max)
    out = _new_output(B, L, device)
    if B and L:
        coef_arg = coef.contiguous() if kmax else torch.ones(1, device=device)
        _segment_apply_kernel[grid](ids, mask_arg, adv, coef_arg, out, L, ids.stride(0),
                                    mask_stride, out.stride(0), max(kmax, 1),
                                    HAS_MASK=has_mask, BLOCK=BLOCK)
    return out, gap, w, rho


# ---------------------------------------------------------------------------------------
# Compile specs (sharpo_kernels/compiled): the variants the launcher above can pick on a GPU
# at realistic batch shapes (B rollouts of L response tokens), with its own block size.
# ---------------------------------------------------------------------------------------

def compile_specs(arch: int):
    """[KernelVariant] of both kernels for sm_<arch>."""
    from ..compiled.variants import KernelVariant
    out = []
    B, L, kmax = 64, 8192, 32
    block = _block(L, torch.device("cuda"))
    grid = (B, triton.cdiv(L, block))
    for ldt in (torch.float32, torch.bfloat16, torch.float16):
        dn = str(ldt).split(".")[-1]
        for has_mask in (False, True):
            mask_b = 1 if has_mask else 0
            out.append(KernelVariant(
                _segment_sums_kernel,
                (ldt, ldt, torch.int64, torch.uint8 if has_mask else torch.int64,
                 torch.uint8, torch.float32, torch.int32, L, L, L, L, L if has_mask else 0,
                 kmax),
                dict(HAS_MASK=has_mask, BLOCK=block), 4, 3, grid,
                f"segment_sums {dn} B={B} L={L} mask={mask_b}",
                elements=B * L, bytes=B * L * (2 * ldt.itemsize + 8 + mask_b),
                atomics=2 * B * L))
    for has_mask in (False, True):
        mask_b = 1 if has_mask else 0
        out.append(KernelVariant(
            _segment_apply_kernel,
            (torch.int64, torch.uint8 if has_mask else torch.int64, torch.float32,
             torch.float32, torch.float32, L, L, L if has_mask else 0, L, kmax),
            dict(HAS_MASK=has_mask, BLOCK=block), 4, 3, grid,
            f"segment_apply B={B} L={L} mask={mask_b}",
            elements=B * L, bytes=B * L * (8 + 4 + mask_b)))
    return out
