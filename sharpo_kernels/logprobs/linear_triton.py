"""Triton kernels for `linear_logprobs`: logits tile = hidden tile @ weight tile^T, never [N, V].

Only the non-ignored rows take part: the launcher gathers their indices (`rows`) once and
the kernels read hidden rows through them, so rows at ignore_index cost nothing.

Forward (`_linear_fwd_kernel`), grid (row tiles, vocabulary splits): each program walks its
share of the vocabulary in BLOCK_V tiles, computes the [BLOCK_N, BLOCK_V] logits with
`tl.dot` over BLOCK_H slices of H, and carries the online statistics per row
(m = raw max, s = sum exp(d), t = sum exp(d) d, d = (z - m) / T; see
token_triton.py). The label's logit is picked out of the tile that holds it. The
splits' partial (m, s, t) are merged in PyTorch (O(splits x N)); the splits give a GPU
enough programs when N is small.

Backward (`_linear_bwd_kernel`), grid (row tiles, vocabulary tiles): recompute the logits
tile from the saved (m, log s, H), form dL/dz = [g_logp (onehot - p) - g_H p (q + H)] / T,
then accumulate grad_hidden += dz @ W_tile and grad_weight_tile += dz^T @ h_tile in fp32
with atomic adds (and grad_bias += column sums of dz).

Precision: fp32 inputs use an IEEE fp32 `tl.dot` (no TF32); bf16/fp16 inputs multiply in
their own dtype with fp32 accumulation on a GPU (dz is rounded to the input dtype for the
two backward products); in the interpreter everything is converted to fp32 on load
(bf16 `tl.dot` is broken there, docs/toolchain.md).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._backend import triton_interpreting
from .grads import linear_grads
from .online_lse import online_lse_rescale
from .online_lse_triton import online_lse_rescale_triton

__all__ = ["linear_logprobs_triton", "linear_logprobs_triton_forward",
           "linear_logprobs_triton_backward", "LinearLogprobsTriton", "LinearTritonConfig"]


@triton.jit
def _logits_tile(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows, n_mask, cols, v_mask, H,
                 HAS_BIAS: tl.constexpr, DOT_FP32: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_V: tl.constexpr, BLOCK_H: tl.constexpr):
    """[BLOCK_N, BLOCK_V] fp32 logits of hidden rows `rows` against vocabulary `cols`."""
    acc = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        hk = h0 + tl.arange(0, BLOCK_H)
        k_mask = hk < H
        a = tl.load(h_ptr + rows[:, None] * stride_h + hk[None, :],
                    mask=n_mask[:, None] & k_mask[None, :], other=0.0)
        bt = tl.load(w_ptr + cols[None, :] * stride_w + hk[:, None],
                     mask=v_mask[None, :] & k_mask[:, None], other=0.0)
        if DOT_FP32:
            acc = tl.dot(a.to(tl.float32), bt.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, bt, acc)
    if HAS_BIAS:
        acc += tl.load(b_ptr + cols, mask=v_mask, other=0.0).to(tl.float32)[None, :]
    return acc


@triton.jit
def _linear_fwd_kernel(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows_ptr, lab_ptr,
                       part_m_ptr, part_s_ptr, part_t_ptr, xy_ptr,
                       NV, V, H, v_per_split, temperature,
                       HAS_BIAS: tl.constexpr, NEED_ENTROPY: tl.constexpr,
                       DOT_FP32: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr,
                       BLOCK_H: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < NV
    rows = tl.load(rows_ptr + offs_n, mask=n_mask, other=0)
    lab = tl.load(lab_ptr + offs_n, mask=n_mask, other=-1)
    v_lo = pid_s * v_per_split
    v_hi = tl.minimum(V, v_lo + v_per_split)
    m = tl.full((BLOCK_N,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_N,), tl.float32)
    t = tl.zeros((BLOCK_N,), tl.float32)
    for v0 in range(v_lo, v_hi, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        v_mask = cols < v_hi
        z = _logits_tile(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows, n_mask, cols, v_mask,
                         H, HAS_BIAS, DOT_FP32, BLOCK_N, BLOCK_V, BLOCK_H)
        z = tl.where(v_mask[None, :], z, float("-inf"))
        # the label's raw logit, from the one tile that holds it
        is_lab = cols[None, :] == lab[:, None]
        has_lab = tl.sum(is_lab.to(tl.int32), axis=1) > 0
        xy = tl.sum(tl.where(is_lab, z, 0.0), axis=1)
        tl.store(xy_ptr + offs_n, xy, mask=n_mask & has_lab)
        # online (m, s, t)
        m, m_ref, s, t = online_lse_rescale_triton(m, s, t, tl.max(z, axis=1), temperature,
                                                   NEED_ENTROPY)
        d = tl.maximum((z - m_ref[:, None]) / temperature, -1e30)
        e = tl.exp(d)
        s += tl.sum(e, axis=1)
        if NEED_ENTROPY:
            t += tl.sum(e * d, axis=1)
    out = pid_s * NV + offs_n
    tl.store(part_m_ptr + out, m, mask=n_mask)
    tl.store(part_s_ptr + out, s, mask=n_mask)
    if NEED_ENTROPY:
        tl.store(part_t_ptr + out, t, mask=n_mask)


@triton.jit
def _linear_bwd_kernel(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows_ptr, lab_ptr,
                       m_ptr, logs_ptr, ent_ptr, glp_ptr, gent_ptr,
                       gh_ptr, gw_ptr, gb_ptr, NV, V, H, temperature,
                       HAS_BIAS: tl.constexpr, NEED_ENTROPY: tl.constexpr,
                       NEED_H: tl.constexpr, NEED_W: tl.constexpr, NEED_B: tl.constexpr,
                       DOT_FP32: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr,
                       BLOCK_H: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_v = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < NV
    rows = tl.load(rows_ptr + offs_n, mask=n_mask, other=0)
    lab = tl.load(lab_ptr + offs_n, mask=n_mask, other=-1)
    m = tl.load(m_ptr + offs_n, mask=n_mask, other=0.0)
    logs = tl.load(logs_ptr + offs_n, mask=n_mask, other=0.0)
    g_lp = tl.load(glp_ptr + offs_n, mask=n_mask, other=0.0)
    cols = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)
    v_mask = cols < V
    z = _logits_tile(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows, n_mask, cols, v_mask, H,
                     HAS_BIAS, DOT_FP32, BLOCK_N, BLOCK_V, BLOCK_H)
    q = tl.maximum((z - m[:, None]) / temperature, -1e30) - logs[:, None]
    p = tl.exp(q)
    g = tl.where(cols[None, :] == lab[:, None], g_lp[:, None], 0.0) - g_lp[:, None] * p
    if NEED_ENTROPY:
        ent = tl.load(ent_ptr + offs_n, mask=n_mask, other=0.0)
        g_ent = tl.load(gent_ptr + offs_n, mask=n_mask, other=0.0)
        g -= g_ent[:, None] * p * (q + ent[:, None])
    g = tl.where(n_mask[:, None] & v_mask[None, :], g / temperature, 0.0)
    if NEED_B:
        tl.atomic_add(gb_ptr + cols, tl.sum(g, axis=0), mask=v_mask)
    if DOT_FP32:
        g_dot = g
    else:
        g_dot = g.to(w_ptr.dtype.element_ty)
    for h0 in range(0, H, BLOCK_H):
        hk = h0 + tl.arange(0, BLOCK_H)
        k_mask = hk < H
        if NEED_H:
            w = tl.load(w_ptr + cols[:, None] * stride_w + hk[None, :],
                        mask=v_mask[:, None] & k_mask[None, :], other=0.0)
            if DOT_FP32:
                part_h = tl.dot(g_dot, w.to(tl.float32), input_precision="ieee")
            else:
                part_h = tl.dot(g_dot, w)
            tl.atomic_add(gh_ptr + offs_n[:, None] * H + hk[None, :], part_h,
                          mask=n_mask[:, None] & k_mask[None, :])
        if NEED_W:
            a = tl.load(h_ptr + rows[:, None] * stride_h + hk[None, :],
                        mask=n_mask[:, None] & k_mask[None, :], other=0.0)
            if DOT_FP32:
                part_w = tl.dot(tl.trans(g_dot), a.to(tl.float32), input_precision="ieee")
            else:
                part_w = tl.dot(tl.trans(g_dot), a)
            tl.atomic_add(gw_ptr + cols[:, None] * H + hk[None, :], part_w,
                          mask=v_mask[:, None] & k_mask[None, :])


class LinearTritonConfig:
    """Block sizes and vocabulary splits; None picks a default for the device."""

    def __init__(self, block_n=None, block_v=None, block_h=None, splits=None, num_warps=None):
        for name, val in (("block_n", block_n), ("block_v", block_v), ("block_h", block_h)):
            if val is not None and (val < 16 or val & (val - 1)):
                raise ValueError(f"{name}: expected a power of two >= 16, got {val}")
        if splits is not None and splits < 1:
            raise ValueError(f"splits: expected >= 1, got {splits}")
        self.block_n, self.block_v, self.block_h = block_n, block_v, block_h
        self.splits, self.num_warps = splits, num_warps

    def resolve(self, nv: int, v: int, h: int, device: torch.device):
        gpu = device.type == "cuda"
        bn = self.block_n or max(16, min(64, triton.next_power_of_2(max(nv, 1))))
        bv = self.block_v or max(16, min(128 if gpu else 512, triton.next_power_of_2(v)))
        bh = self.block_h or max(16, min(64 if gpu else 256, triton.next_power_of_2(h)))
        n_tiles = triton.cdiv(max(nv, 1), bn)
        v_tiles = triton.cdiv(v, bv)
        if self.splits is not None:
            splits = self.splits
        elif gpu:
            sms = torch.cuda.get_device_properties(device).multi_processor_count
            splits = max(1, min(v_tiles, triton.cdiv(2 * sms, n_tiles)))
        else:
            splits = 1
        splits = min(splits, v_tiles)
        v_per_split = triton.cdiv(v_tiles, splits) * bv
        splits = triton.cdiv(v, v_per_split)
        return bn, bv, bh, splits, v_per_split, self.num_warps or (8 if gpu else 4)


def _dot_fp32(dtype: torch.dtype) -> bool:
    return dtype == torch.float32 or triton_interpreting()


def linear_logprobs_triton_forward(hidden, weight, bias, rows, lab, temperature: float,
                                   need_entropy: bool, config: LinearTritonConfig):
    """hidden [N, H], weight [V, H], bias [V]/None (unit last strides); rows, lab [NV] int64.

    Returns (logp [NV], entropy [NV] or None, m, logs, ent) over the compacted rows, fp32.
    """
    nv = rows.numel()
    v, h = weight.shape
    dev = hidden.device
    bn, bv, bh, splits, v_per_split, warps = config.resolve(nv, v, h, dev)
    f32 = dict(dtype=torch.float32, device=dev)
    part_m = torch.empty(splits, nv, **f32)
    part_s = torch.empty(splits, nv, **f32)
    part_t = torch.empty(splits, nv, **f32) if need_entropy else part_s
    xy = torch.empty(nv, **f32)
    if nv:
        grid = (triton.cdiv(nv, bn), splits)
        _linear_fwd_kernel[grid](
            hidden, hidden.stride(0), weight, weight.stride(0),
            bias if bias is not None else weight, rows, lab, part_m, part_s, part_t, xy,
            nv, v, h, v_per_split, float(temperature),
            HAS_BIAS=bias is not None, NEED_ENTROPY=need_entropy,
            DOT_FP32=_dot_fp32(hidden.dtype), BLOCK_N=bn, BLOCK_V=bv, BLOCK_H=bh,
            num_warps=warps)
    # merge the splits: rescale each partial (m, s, t) to the common max M, then add
    m = part_m.amax(0)
    _, _, s_parts, t_parts = online_lse_rescale(part_m, part_s,
                                                part_t if need_entropy else None, m,
                                                temperature)
    s = s_parts.sum(0)
    logs = s.log()
    logp = (xy - m) / temperature - logs
    ent = None
    if need_entropy:
        ent = logs - t_parts.sum(0) / s
    return logp, ent, m, logs, ent


def linear_logprobs_triton_backward(hidden, weight, bias, rows, lab, m, logs, ent, g_lp, g_ent,
                                    temperature: float, need_h: bool, need_w: bool,
                                    need_b: bool, config: LinearTritonConfig):
    """(grad_hidden [N, H], grad_weight [V, H], grad_bias [V]), None where not needed."""
    h = hidden.shape[1]
    v = weight.shape[0]
    nv = rows.numel()
    dev = hidden.device
    bn, bv, bh, _, _, warps = config.resolve(nv, v, h, dev)
    f32 = dict(dtype=torch.float32, device=dev)
    gh = torch.zeros(nv, h, **f32) if need_h else None
    gw = torch.zeros(v, h, **f32) if need_w else None
    gb = torch.zeros(v, **f32) if need_b else None
    need_entropy = g_ent is not None
    if nv and (need_h or need_w or need_b):
        g_lp = g_lp.to(torch.float32).contiguous()
        g_ent = g_ent.to(torch.float32).contiguous() if need_entropy else g_lp
        grid = (triton.cdiv(nv, bn), triton.cdiv(v, bv))
        dummy = m
        _linear_bwd_kernel[grid](
            hidden, hidden.stride(0), weight, weight.stride(0),
            bias if bias is not None else weight, rows, lab, m, logs,
            ent if need_entropy else m, g_lp, g_ent,
            gh if need_h else dummy, gw if need_w else dummy, gb if need_b else dummy,
            nv, v, h, float(temperature),
            HAS_BIAS=bias is not None, NEED_ENTROPY=need_entropy, NEED_H=need_h,
            NEED_W=need_w, NEED_B=need_b, DOT_FP32=_dot_fp32(hidden.dtype),
            BLOCK_N=bn, BLOCK_V=bv, BLOCK_H=bh, num_warps=warps)
    return linear_grads(hidden, weight, bias, rows, gh, gw, gb)


class LinearLogprobsTriton(torch.autograd.Function):
    """autograd.Function over (hidden [N, H], weight [V, H], bias [V] or None)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, temperature, ignore_index, need_entropy,
                config):
        n = hidden.shape[0]
        rows = (labels != ignore_index).nonzero().squeeze(1)
        lab = labels.index_select(0, rows).contiguous()
        lp_v, ent_v, m, logs, ent = linear_logprobs_triton_forward(
            hidden, weight, bias, rows, lab, temperature, need_entropy, config)
        logp = torch.zeros(n, dtype=torch.float32, device=hidden.device)
        logp.index_copy_(0, rows, lp_v)
        entropy = torch.zeros(n, dtype=torch.float32, device=hidden.device)
        if need_entropy:
            entropy.index_copy_(0, rows, ent_v)
        else:
            ctx.mark_non_differentiable(entropy)
        ctx.save_for_backward(hidden, weight, bias, rows, lab, m, logs, ent)
        ctx.args = (temperature, need_entropy, config)
        return logp, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_lp, g_ent):
        hidden, weight, bias, rows, lab, m, logs, ent = ctx.saved_tensors
        temperature, need_entropy, config = ctx.args
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        g_lp_v = g_lp.index_select(0, rows)
        g_ent_v = g_ent.index_select(0, rows) if need_entropy else None
        gh, gw, gb = linear_logprobs_triton_backward(
            hidden, weight, bias, rows, lab, m, logs, ent, g_lp_v, g_ent_v, temperature,
            need_h, need_w, need_b and bias is not None, config)
        return gh, gw, gb, None, None, None, None, None


def linear_logprobs_triton(hidden, weight, labels, bias=None, temperature=1.0,
                           ignore_index=-100, return_entropy=False,
                           config: LinearTritonConfig | None = None):
    """Unvalidated op: hidden [N, H], weight [V, H], labels [N] -> (logp [N], entropy [N])."""
    for name, t in (("hidden", hidden), ("weight", weight), ("bias", bias)):
        if t is not None and t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"{name}: the triton backend takes float32/bfloat16/float16, got "
                            f"{t.dtype} (use backend='cpu' or 'torch' for float64)")
    hidden = hidden if hidden.stride(-1) == 1 else hidden.contiguous()
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    if bias is not None:
        bias = bias.contiguous()
    labels = labels.to(torch.int64).contiguous()
    return LinearLogprobsTriton.apply(hidden, weight, bias, labels, float(temperature),
                                      int(ignore_index), bool(return_entropy),
                                      config or LinearTritonConfig())


# ---------------------------------------------------------------------------------------
# Compile specs (sharpo_kernels/compiled): every variant the launchers above can pick at the
# realistic shapes, with the block sizes LinearTritonConfig().resolve chooses on a GPU.
# Keep in step with the launchers: change a launcher's arguments, change its spec here.
# ---------------------------------------------------------------------------------------

def compile_specs(arch: int):
    """[KernelVariant] of _linear_fwd_kernel / _linear_bwd_kernel for sm_<arch>."""
    from ..compiled.variants import HIDDENS, N_TOKENS, VOCABS, KernelVariant
    f32 = torch.float32
    i64 = torch.int64
    out = []
    nv = N_TOKENS
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        dn = str(dtype).split(".")[-1]
        elt = dtype.itemsize
        for v in VOCABS:
            for h in HIDDENS:
                # splits only shape the grid (one split per row tile here), not the binary
                bn, bv, bh, splits, v_per_split, warps = LinearTritonConfig(splits=1).resolve(
                    nv, v, h, torch.device("cuda"))
                n_tiles, v_tiles = triton.cdiv(nv, bn), triton.cdiv(v, bv)
                shape = f"{dn} N={nv} V={v} H={h}"
                for bias in (False, True):
                    for ent in (False, True):
                        out.append(KernelVariant(
                            _linear_fwd_kernel,
                            (dtype, h, dtype, h, dtype, i64, i64, f32, f32, f32, f32,
                             nv, v, h, v_per_split, 0.7),
                            dict(HAS_BIAS=bias, NEED_ENTROPY=ent, DOT_FP32=dtype == f32,
                                 BLOCK_N=bn, BLOCK_V=bv, BLOCK_H=bh),
                            warps, 3, (n_tiles, splits),
                            f"linear_fwd {shape} bias={bias:d} entropy={ent:d}",
                            elements=nv * v, mma_flops=2 * nv * v * h,
                            bytes=(v * h + nv * h) * elt,        # minimal: W and hidden once
                            loop_trips=(triton.cdiv(v_per_split, bv),
                                        triton.cdiv(v_per_split, bv) * triton.cdiv(h, bh)),
                            mufu_per_element=1.0))
                        for need_h, need_w, need_b in ((1, 1, 0), (1, 0, 0), (0, 1, 0),
                                                       (1, 1, 1), (1, 0, 1), (0, 1, 1),
                                                       (0, 0, 1)):
                            if need_b and not bias:
                                continue
                            mma = 2 * nv * v * h * (1 + need_h + need_w)
                            atom = (v_tiles * nv * h * need_h + n_tiles * v * h * need_w
                                    + n_tiles * v * need_b)
                            out.append(KernelVariant(
                                _linear_bwd_kernel,
                                (dtype, h, dtype, h, dtype, i64, i64, f32, f32, f32, f32,
                                 f32, f32, f32, f32, nv, v, h, 0.7),
                                dict(HAS_BIAS=bias, NEED_ENTROPY=ent, NEED_H=bool(need_h),
                                     NEED_W=bool(need_w), NEED_B=bool(need_b),
                                     DOT_FP32=dtype == f32, BLOCK_N=bn, BLOCK_V=bv,
                                     BLOCK_H=bh),
                                warps, 3, (n_tiles, v_tiles),
                                f"linear_bwd {shape} bias={bias:d} entropy={ent:d} "
                                f"h={need_h} w={need_w} b={need_b}",
                                elements=nv * v, mma_flops=mma,
                                bytes=(v * h + nv * h) * elt          # minimal traffic
                                + 4 * (nv * h * need_h + v * h * need_w),
                                atomics=atom, mufu_per_element=1.0,
                                loop_trips=(triton.cdiv(h, bh),) * 2))
    return out
