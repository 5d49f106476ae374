"""`triton` backend of segment_advantage (CUDA tensors; CPU tensors under TRITON_INTERPRET=1):
the whole op in one validating pass (issue 44), one program per row.

  _segment_advantage_kernel  grid (B,): every data rule of checks.py, the segment sums,
                             the coefficients of docs/method.md §4 and the token advantages.
  with traj_index, mbar spans rows, so the same work is split in two launches:
  _segment_scan_kernel       grid (B,): the rules, sums and counts of each row (phase A)
  _segment_finish_kernel     grid (B,): the trajectory's mbar, then phases B and C

Per row, in the program that owns it (docs/method.md §2, §4):
  A. the row in chunks of BLOCK tokens: the rules, and each segment's sum of teacher -
     student and count m by a segmented scan (segments are contiguous runs, so no atomics;
     a run that crosses a chunk boundary is carried); a segment's totals go to its slot
     k of the row's table when it ends.
  B. mbar, then gap, w, rho and coef = (1 - lam) + lam * rho * w for k < cap (NaN tables
     for k >= K_i), and the empty-segment rule.
  C. the row again: out = A * coef[id] in segments, A elsewhere, 0 where the mask is 0.
Errors: the smallest key (checks.py "error word": rule rank, row, position) of the row goes
into word[0] with one relaxed atomic max; K_i into word[1]. The host reads the two words
once, after the launch, and raises the message of checks.py (`error_word_message`), or the
caller reads them later (check="deferred").

Log-probs are converted to fp32 right after loading (bf16 arithmetic is unsupported in the
interpreter, docs/toolchain.md); advantages are range-checked in fp64 like the host check.
"""
from __future__ import annotations

import struct

import torch
import triton
import triton.language as tl

from .checks import (ERR_ADVANTAGE_NONFINITE, ERR_EMPTY_SEGMENT, ERR_ID_BELOW_MINUS_ONE,
                     ERR_ID_ORDER, ERR_MASK_VALUE, ERR_STUDENT_NONFINITE, ERR_TEACHER_NONFINITE,
                     KEY_NONE, KEY_SHIFT, RANK_ADVANTAGE_RANGE, RANK_OF_ERR,
                     RANK_STUDENT_RANGE, RANK_TEACHER_RANGE, RANK_TOO_MANY_SEGMENTS,
                     _FP32_HALF, logp_bound, max_coefficient)
from .single_pass import new_buffers

# Keys' rank parts (rank * 2**KEY_SHIFT), as compile-time constants of the kernels.
_K_ADV_RANGE = tl.constexpr(RANK_ADVANTAGE_RANGE << KEY_SHIFT)
_K_T_RANGE = tl.constexpr(RANK_TEACHER_RANGE << KEY_SHIFT)
_K_S_RANGE = tl.constexpr(RANK_STUDENT_RANGE << KEY_SHIFT)
_K_ID_BELOW = tl.constexpr(RANK_OF_ERR[ERR_ID_BELOW_MINUS_ONE] << KEY_SHIFT)
_K_ID_ORDER = tl.constexpr(RANK_OF_ERR[ERR_ID_ORDER] << KEY_SHIFT)
_K_MASK = tl.constexpr(RANK_OF_ERR[ERR_MASK_VALUE] << KEY_SHIFT)
_K_ADV = tl.constexpr(RANK_OF_ERR[ERR_ADVANTAGE_NONFINITE] << KEY_SHIFT)
_K_T_NONFINITE = tl.constexpr(RANK_OF_ERR[ERR_TEACHER_NONFINITE] << KEY_SHIFT)
_K_S_NONFINITE = tl.constexpr(RANK_OF_ERR[ERR_STUDENT_NONFINITE] << KEY_SHIFT)
_K_EMPTY = tl.constexpr(RANK_OF_ERR[ERR_EMPTY_SEGMENT] << KEY_SHIFT)
_K_TOO_MANY = tl.constexpr(RANK_TOO_MANY_SEGMENTS << KEY_SHIFT)
_K_NONE = tl.constexpr(KEY_NONE)
_FP32_HALF_C = tl.constexpr(_FP32_HALF)



@triton.jit
def _seg_combine(s1, c1, f1, s2, c2, f2):
    """Segmented sum: a flagged element starts a new segment."""
    keep = f2 != 0
    return tl.where(keep, s2, s1 + s2), tl.where(keep, c2, c1 + c2), f1 | f2


@triton.jit
def _keyed(cond, rank_part, base, pos):
    """Key of a broken rule where cond holds, KEY_NONE elsewhere (checks.py error word)."""
    return tl.where(cond, rank_part + base + pos, _K_NONE)


@triton.jit
def _scan_row(b, t_ptr, s_ptr, ids_ptr, mask_ptr, ht_ptr, adv_ptr, sum_ptr, cnt_ptr, L, LP,
              t_s0, t_s1, s_s0, s_s1, i_s0, i_s1, m_s0, m_s1, coef_bits, bound,
              CAP: tl.constexpr, HAS_MASK: tl.constexpr, CHECK_MASK: tl.constexpr,
              HAS_TEACHER: tl.constexpr, BLOCK: tl.constexpr):
    """Phase A of row b: returns (smallest error key, K_b, sum of m over the row). Writes
    each segment's sum of teacher - student to sum_ptr[k] and its m to cnt_ptr[k], k < CAP."""
    base = b * LP
    a64 = tl.load(adv_ptr + b).to(tl.float64)
    coef_max = coef_bits.to(tl.int64).to(tl.float64, bitcast=True)
    finite_a = tl.abs(a64) < float("inf")
    err = tl.where(finite_a, _K_NONE, _K_ADV + base)
    err = tl.minimum(err, tl.where(finite_a & (tl.abs(a64) * coef_max > _FP32_HALF_C),
                                   _K_ADV_RANGE + base, _K_NONE))
    if HAS_TEACHER:
        teach = tl.load(ht_ptr + b) != 0
    else:
        teach = True
    lane = tl.arange(0, BLOCK)
    runs = tl.zeros([], tl.int32)            # runs begun before the chunk
    carry_s = tl.zeros([], tl.float32)      # the open run's totals from earlier chunks
    carry_c = tl.zeros([], tl.int32)
    tot_m = tl.zeros([], tl.int32)
    for c0 in range(0, L, BLOCK):
        offs = (c0 + lane).to(tl.int64)
        inb = offs < L
        ids = tl.load(ids_ptr + b * i_s0 + offs * i_s1, mask=inb, other=-1).to(tl.int64)
        prev = tl.load(ids_ptr + b * i_s0 + (offs - 1) * i_s1, mask=inb & (offs > 0),
                       other=-1).to(tl.int64)
        nxt = tl.load(ids_ptr + b * i_s0 + (offs + 1) * i_s1, mask=(offs + 1) < L,
                      other=-1).to(tl.int64)
        if HAS_MASK:
            mk = tl.load(mask_ptr + b * m_s0 + offs * m_s1, mask=inb, other=0)
            on = mk != 0
            if CHECK_MASK:
                err = tl.minimum(err, tl.min(_keyed(inb & on & (mk != 1), _K_MASK, base, offs), 0))
        else:
            on = inb
        # segment_ids: >= -1, runs numbered 0, 1, ... in order (checks.check_values)
        start = (ids >= 0) & (ids != prev)
        runs_incl = runs + tl.cumsum(start.to(tl.int32), 0)
        err = tl.minimum(err, tl.min(_keyed(inb & (ids < -1), _K_ID_BELOW, base, offs), 0))
        err = tl.minimum(err, tl.min(_keyed(start & (ids != runs_incl - 1), _K_ID_ORDER, base,
                                            offs), 0))
        runs += tl.sum(start.to(tl.int32), 0)
        # log-probs where used: finite and within the range bound (checks.check_logp_range)
        in_seg = inb & (ids >= 0) & on
        used = in_seg & teach
        tv = tl.load(t_ptr + b * t_s0 + offs * t_s1, mask=used, other=0.0).to(tl.float32)
        sv = tl.load(s_ptr + b * s_s0 + offs * s_s1, mask=used, other=0.0).to(tl.float32)
        t_fin = tl.abs(tv) < float("inf")
        s_fin = tl.abs(sv) < float("inf")
        err = tl.minimum(err, tl.min(_keyed(used & ~t_fin, _K_T_NONFINITE, base, offs), 0))
        err = tl.minimum(err, tl.min(_keyed(used & ~s_fin, _K_S_NONFINITE, base, offs), 0))
        err = tl.minimum(err, tl.min(_keyed(used & t_fin & (tl.abs(tv) > bound), _K_T_RANGE,
                                            base, offs), 0))
        err = tl.minimum(err, tl.min(_keyed(used & s_fin & (tl.abs(sv) > bound), _K_S_RANGE,
                                            base, offs), 0))
        # segmented sums: a run ends where the next id differs
        delta = tl.where(used, tv - sv, 0.0)
        cnt = in_seg.to(tl.int32)
        change = (ids != prev).to(tl.int32)
        flag = change | (lane == 0).to(tl.int32)
        ssum, scnt, _ = tl.associative_scan((delta, cnt, flag), 0, _seg_combine)
        cont = tl.cumsum(change, 0) == 0            # still the run open before the chunk
        ssum = ssum + tl.where(cont, carry_s, 0.0)
        scnt = scnt + tl.where(cont, carry_c, 0)
        ends = inb & (ids >= 0) & (nxt != ids) & (ids < CAP)
        slot = tl.where(ends, ids, 0)
        tl.store(sum_ptr + slot, ssum, mask=ends)
        tl.store(cnt_ptr + slot, scnt.to(tl.float32), mask=ends)
        last = lane == BLOCK - 1
        carry_s = tl.sum(tl.where(last, ssum, 0.0), 0)
        carry_c = tl.sum(tl.where(last, scnt, 0), 0)
        tot_m += tl.sum(cnt, 0)
    err = tl.minimum(err, tl.where(runs > CAP, _K_TOO_MANY + base, _K_NONE))
    return err, runs, tot_m


@triton.jit
def _finish_row(b, err, K, mbar, ids_ptr, mask_ptr, ht_ptr, adv_ptr, gap_ptr, w_ptr, rho_ptr,
                coef_ptr, out_ptr, L, LP, i_s0, i_s1, m_s0, m_s1, o_s0,
                one_minus_lam, lam, alpha, two_tau, rho_min, rho_max,
                CAP: tl.constexpr, HAS_MASK: tl.constexpr, HAS_TEACHER: tl.constexpr,
                BLOCK: tl.constexpr, KBLOCK: tl.constexpr):
    """Phases B and C of row b (the sums in gap_ptr and counts in coef_ptr from phase A).
    Returns the error key with the empty-segment rule added."""
    base = b * LP
    a = tl.load(adv_ptr + b).to(tl.float32)
    sgn = tl.where(a > 0, 1.0, tl.where(a < 0, -1.0, 0.0))
    if HAS_TEACHER:
        teach = tl.load(ht_ptr + b) != 0
    else:
        teach = True
    Kc = tl.minimum(K, CAP)
    for k0 in range(0, CAP, KBLOCK):
        kk = k0 + tl.arange(0, KBLOCK)
        inc = kk < CAP
        exists = kk < Kc
        ssum = tl.load(gap_ptr + kk, mask=exists, other=0.0)
        m = tl.load(coef_ptr + kk, mask=exists, other=0.0)
        err = tl.minimum(err, tl.min(_keyed(exists & (m <= 0), _K_EMPTY, base, kk.to(tl.int64)), 0))
        m_safe = tl.maximum(m, 1.0)
        gap = ssum / m_safe
        # tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|): no overflow for large |x|
        x = gap / two_tau
        e = tl.exp(-2.0 * tl.abs(x))
        th = (1.0 - e) / (1.0 + e)
        th = tl.where(x < 0, -th, th)
        u = tl.minimum(tl.maximum(th, -alpha), alpha)
        w = 1.0 + sgn * u
        rho = tl.minimum(tl.maximum(mbar / m_safe, rho_min), rho_max)
        coef = one_minus_lam + lam * rho * w
        nan = float("nan")
        gap = tl.where(exists & teach, gap, nan)
        w = tl.where(exists, tl.where(teach, w, 1.0), nan)
        rho = tl.where(exists, tl.where(teach, rho, 1.0), nan)
        coef = tl.where(exists & teach, coef, 1.0)
        tl.debug_barrier()         # every lane has read the phase-A values it overwrites
        tl.store(gap_ptr + kk, gap, mask=inc)
        tl.store(w_ptr + kk, w, mask=inc)
        tl.store(rho_ptr + kk, rho, mask=inc)
        tl.store(coef_ptr + kk, coef, mask=inc)
    tl.debug_barrier()             # the coefficients are visible to every lane
    lane = tl.arange(0, BLOCK)
    for c0 in range(0, L, BLOCK):
        offs = (c0 + lane).to(tl.int64)
        inb = offs < L
        ids = tl.load(ids_ptr + b * i_s0 + offs * i_s1, mask=inb, other=-1).to(tl.int64)
        seg = inb & (ids >= 0) & (ids < CAP)
        cf = tl.load(coef_ptr + tl.where(seg, ids, 0), mask=seg, other=1.0)
        v = a * cf
        if HAS_MASK:
            mk = tl.load(mask_ptr + b * m_s0 + offs * m_s1, mask=inb, other=0)
            v = tl.where(mk != 0, v, 0.0)
        tl.store(out_ptr + b * o_s0 + offs, v, mask=inb)
    return err


@triton.jit
def _segment_advantage_kernel(
        t_ptr, s_ptr, ids_ptr, mask_ptr, ht_ptr, adv_ptr, tab_ptr, out_ptr, num_ptr, word_ptr,
        B, L, LP, t_s0, t_s1, s_s0, s_s1, i_s0, i_s1, m_s0, m_s1, o_s0, coef_bits, bound,
        one_minus_lam, lam, alpha, two_tau, rho_min, rho_max,
        CAP: tl.constexpr, HAS_MASK: tl.constexpr, CHECK_MASK: tl.constexpr,
        HAS_TEACHER: tl.constexpr, BLOCK: tl.constexpr, KBLOCK: tl.constexpr):
    """One row per program, phases A, B, C (module docstring). tab: [4, B, CAP] fp32
    (gap, w, rho, coef). word: [2] int64 zeroed (error, Kmax)."""
    b = tl.program_id(0).to(tl.int64)
    row = b * CAP
    gap_ptr = tab_ptr + row
    coef_ptr = tab_ptr + 3 * B * CAP + row
    err, K, tot_m = _scan_row(b, t_ptr, s_ptr, ids_ptr, mask_ptr, ht_ptr, adv_ptr, gap_ptr,
                              coef_ptr, L, LP, t_s0, t_s1, s_s0, s_s1, i_s0, i_s1, m_s0, m_s1,
                              coef_bits, bound, CAP, HAS_MASK, CHECK_MASK, HAS_TEACHER, BLOCK)
    tl.store(num_ptr + b, K.to(tl.int64))
    mbar = tot_m.to(tl.float32) / tl.maximum(K, 1).to(tl.float32)
    tl.debug_barrier()             # phase A's table writes are visible to every lane
    err = _finish_row(b, err, K, mbar, ids_ptr, mask_ptr, ht_ptr, adv_ptr, gap_ptr,
                      tab_ptr + B * CAP + row, tab_ptr + 2 * B * CAP + row, coef_ptr, out_ptr,
                      L, LP, i_s0, i_s1, m_s0, m_s1, o_s0, one_minus_lam, lam, alpha, two_tau,
                      rho_min, rho_max, CAP, HAS_MASK, HAS_TEACHER, BLOCK, KBLOCK)
    tl.atomic_max(word_ptr, tl.where(err < _K_NONE, _K_NONE - err, 0), sem="relaxed")
    tl.atomic_max(word_ptr + 1, K.to(tl.int64), sem="relaxed")


@triton.jit
def _segment_scan_kernel(
        t_ptr, s_ptr, ids_ptr, mask_ptr, ht_ptr, adv_ptr, tab_ptr, rowm_ptr, num_ptr, word_ptr,
        B, L, LP, t_s0, t_s1, s_s0, s_s1, i_s0, i_s1, m_s0, m_s1, coef_bits, bound,
        CAP: tl.constexpr, HAS_MASK: tl.constexpr, CHECK_MASK: tl.constexpr,
        HAS_TEACHER: tl.constexpr, BLOCK: tl.constexpr):
    """traj_index, launch 1: phase A of each row; K_b to num, the row's sum of m to rowm."""
    b = tl.program_id(0).to(tl.int64)
    row = b * CAP
    err, K, tot_m = _scan_row(b, t_ptr, s_ptr, ids_ptr, mask_ptr, ht_ptr, adv_ptr,
                              tab_ptr + row, tab_ptr + 3 * B * CAP + row, L, LP, t_s0, t_s1,
                              s_s0, s_s1, i_s0, i_s1, m_s0, m_s1, coef_bits, bound, CAP,
                              HAS_MASK, CHECK_MASK, HAS_TEACHER, BLOCK)
    tl.store(num_ptr + b, K.to(tl.int64))
    tl.store(rowm_ptr + b, tot_m.to(tl.float32))
    tl.atomic_max(word_ptr, tl.where(err < _K_NONE, _K_NONE - err, 0), sem="relaxed")
    tl.atomic_max(word_ptr + 1, K.to(tl.int64), sem="relaxed")


@triton.jit
def _segment_finish_kernel(
        ids_ptr, mask_ptr, ht_ptr, adv_ptr, traj_ptr, tab_ptr, rowm_ptr, out_ptr, num_ptr,
        word_ptr, B, L, LP, i_s0, i_s1, m_s0, m_s1, o_s0, traj_s0,
        one_minus_lam, lam, alpha, two_tau, rho_min, rho_max,
        CAP: tl.constexpr, HAS_MASK: tl.constexpr, HAS_TEACHER: tl.constexpr,
        BLOCK: tl.constexpr, KBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    """traj_index, launch 2: mbar over the rows of b's trajectory (api.py: sum of m over all
    their segments / their number of segments), then phases B and C."""
    b = tl.program_id(0).to(tl.int64)
    row = b * CAP
    me = tl.load(traj_ptr + b * traj_s0)
    tot_m = tl.zeros([], tl.float32)
    tot_k = tl.zeros([], tl.float32)
    for r0 in range(0, B, RBLOCK):
        r = r0 + tl.arange(0, RBLOCK)
        inr = r < B
        same = inr & (tl.load(traj_ptr + r * traj_s0, mask=inr, other=0) == me)
        tot_m += tl.sum(tl.where(same, tl.load(rowm_ptr + r, mask=inr, other=0.0), 0.0), 0)
        tot_k += tl.sum(tl.where(same, tl.load(num_ptr + r, mask=inr, other=0).to(tl.float32),
                                 0.0), 0)
    mbar = tot_m / tl.maximum(tot_k, 1.0)
    K = tl.load(num_ptr + b)
    err = _finish_row(b, tl.full([], _K_NONE, tl.int64), K, mbar, ids_ptr, mask_ptr, ht_ptr,
                      adv_ptr, tab_ptr + row, tab_ptr + B * CAP + row,
                      tab_ptr + 2 * B * CAP + row, tab_ptr + 3 * B * CAP + row, out_ptr, L, LP,
                      i_s0, i_s1, m_s0, m_s1, o_s0, one_minus_lam, lam, alpha, two_tau,
                      rho_min, rho_max, CAP, HAS_MASK, HAS_TEACHER, BLOCK, KBLOCK)
    tl.atomic_max(word_ptr, tl.where(err < _K_NONE, _K_NONE - err, 0), sem="relaxed")


def _block(L: int, device: torch.device) -> int:
    # Interpreter: per-chunk overhead dominates, so few large chunks; GPU: 1024 tokens.
    cap = 4096 if device.type == "cpu" else 1024
    return max(16, min(cap, triton.next_power_of_2(max(L, 1))))


def _new_output(B: int, L: int, device) -> torch.Tensor:
    """Allocation of the [B, L] fp32 result and of the [4 B, cap] tables; tests replace it
    to poison the buffers."""
    return torch.empty(B, L, dtype=torch.float32, device=device)


def _f64_bits(x: float) -> int:
    """The bits of a float64, as the int64 the kernel bitcasts back (scalar float arguments
    of Triton kernels are fp32)."""
    return struct.unpack("<q", struct.pack("<d", x))[0]


def launch(teacher_logp, student_logp, segment_ids, advantages, has_teacher, response_mask,
           traj_index, cap, lam, alpha, tau, rho_min, rho_max):
    """Launch the single pass (two launches with traj_index) with a table of `cap` columns.
    Returns (out [B, L], gap, w, rho [B, cap] views, num_segments [B], word [2] int64); no
    host read. Inputs are checked for type and shape (checks.check_arguments) only."""
    device = teacher_logp.device
    B, L = teacher_logp.shape
    tab, out, num, word = new_buffers(_new_output, B, L, cap, device)
    capp = tab.shape[2]
    if B:
        mask = response_mask
        if mask is not None and mask.dtype == torch.bool:
            mask = mask.view(torch.uint8)
        has_mask = mask is not None
        mask_arg = mask if has_mask else segment_ids    # unused pointer without a mask
        ms = (mask.stride(0), mask.stride(1)) if has_mask else (0, 0)
        has_teacher_arg = has_teacher is not None
        # [B] vectors are read at b (no stride): contiguous (a no-op when they are)
        ht = has_teacher.contiguous().view(torch.uint8) if has_teacher_arg else segment_ids
        advantages = advantages.contiguous()
        t, s, ids = teacher_logp, student_logp, segment_ids
        common = (L, max(L, 1), t.stride(0), t.stride(1), s.stride(0), s.stride(1),
                  ids.stride(0), ids.stride(1), *ms)
        checks = (_f64_bits(max_coefficient(lam, alpha, rho_max)), logp_bound(max(L, 1)))
        coefs = (1.0 - lam, lam, alpha, 2.0 * tau, rho_min, rho_max)
        BLOCK = _block(L, device)
        KBLOCK = min(1024, triton.next_power_of_2(capp))
        flags = dict(CAP=capp, HAS_MASK=has_mask,
                     CHECK_MASK=has_mask and response_mask.dtype != torch.bool,
                     HAS_TEACHER=has_teacher_arg, BLOCK=BLOCK)
        warps = 4 if device.type == "cpu" else 8
        if traj_index is None:
            _segment_advantage_kernel[(B,)](t, s, ids, mask_arg, ht, advantages, tab, out, num,
                                            word, B, *common, out.stride(0), *checks, *coefs,
                                            KBLOCK=KBLOCK, num_warps=warps, **flags)
        else:
            rowm = torch.empty(B, dtype=torch.float32, device=device)
            _segment_scan_kernel[(B,)](t, s, ids, mask_arg, ht, advantages, tab, rowm, num,
                                       word, B, *common, *checks, num_warps=warps, **flags)
            flags.pop("CHECK_MASK")
            _segment_finish_kernel[(B,)](ids, mask_arg, ht, advantages, traj_index, tab, rowm,
                                         out, num, word, B, L, max(L, 1), ids.stride(0),
                                         ids.stride(1), *ms, out.stride(0),
                                         traj_index.stride(0), *coefs, KBLOCK=KBLOCK,
                                         RBLOCK=min(1024, triton.next_power_of_2(B)),
                                         num_warps=warps, **flags)
    return out, tab[0, :, :cap], tab[1, :, :cap], tab[2, :, :cap], num, word


# ---------------------------------------------------------------------------------------
# Compile specs (sharpo_kernels/compiled): the variants the launcher above can pick on a GPU
# at realistic batch shapes (B rollouts of L response tokens), with its own block size.
# ---------------------------------------------------------------------------------------

def compile_specs(arch: int):
    """[KernelVariant] of the single-pass kernel for sm_<arch>."""
    from ..compiled.variants import KernelVariant
    out = []
    B, L, cap = 256, 4096, 64
    block = _block(L, torch.device("cuda"))
    for ldt in (torch.float32, torch.bfloat16, torch.float16):
        dn = str(ldt).split(".")[-1]
        for has_mask in (False, True):
            mask_b = 1 if has_mask else 0
            out.append(KernelVariant(
                _segment_advantage_kernel,
                (ldt, ldt, torch.int64, torch.uint8 if has_mask else torch.int64, torch.uint8,
                 torch.float32, torch.float32, torch.float32, torch.int64, torch.int64,
                 B, L, L, L, 1, L, 1, L, 1, L if has_mask else 0, 1 if has_mask else 0, L,
                 _f64_bits(3.0), 1.0, 0.8, 0.2, 0.5, 2.0, 0.25, 4.0),
                dict(CAP=cap, HAS_MASK=has_mask, CHECK_MASK=False, HAS_TEACHER=True,
                     BLOCK=block, KBLOCK=cap), 8, 3, (B,),
                f"segment_advantage {dn} B={B} L={L} mask={mask_b}",
                elements=B * L, bytes=B * L * (2 * ldt.itemsize + 8 + mask_b + 4)))
    # traj_index: phase A, then mbar over the trajectory and phases B, C (bf16, mask)
    ldt = torch.bfloat16
    out.append(KernelVariant(
        _segment_scan_kernel,
        (ldt, ldt, torch.int64, torch.uint8, torch.uint8, torch.float32, torch.float32,
         torch.float32, torch.int64, torch.int64, B, L, L, L, 1, L, 1, L, 1, L, 1,
         _f64_bits(3.0), 1.0),
        dict(CAP=cap, HAS_MASK=True, CHECK_MASK=False, HAS_TEACHER=True, BLOCK=block), 8, 3,
        (B,), f"segment_scan bfloat16 B={B} L={L} mask=1",
        elements=B * L, bytes=B * L * (2 * ldt.itemsize + 8 + 1)))
    out.append(KernelVariant(
        _segment_finish_kernel,
        (torch.int64, torch.uint8, torch.uint8, torch.float32, torch.int64, torch.float32,
         torch.float32, torch.float32, torch.int64, torch.int64, B, L, L, L, 1, L, 1, L, 1,
         0.8, 0.2, 0.5, 2.0, 0.25, 4.0),
        dict(CAP=cap, HAS_MASK=True, HAS_TEACHER=True, BLOCK=block, KBLOCK=cap,
             RBLOCK=min(1024, triton.next_power_of_2(B))), 8, 3, (B,),
        f"segment_finish B={B} L={L} mask=1",
        elements=B * L, bytes=B * L * (8 + 1 + 4)))
    return out
