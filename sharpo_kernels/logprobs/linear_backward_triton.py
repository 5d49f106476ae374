"""Backward of the Triton `linear_logprobs` (linear_triton.py): chunks of the vocabulary,
each gradient written once, no atomics (docs/gpu_kernels.md, "linear_logprobs backward").

For a chunk of Vc vocabulary columns [v0, v1) (dL/dz: docs/gpu_kernels.md, "linear_logprobs
backward"; flops, bytes and the comparison with Liger's and Cut Cross-Entropy's there too):

  1. `_linear_dlogits_kernel`, grid (row tiles, vocabulary tiles of the chunk): recomputes
     the [BLOCK_N, BLOCK_V] logits tile z = h W^T + b (fp32 accumulation, as the forward
     does) from the saved per-row (m, log s, entropy) and writes
         dz = [g_logp (onehot(y) - p) - g_ent p (q + entropy)] / T,   q = log p
     into the chunk buffer dz [NV, Vc] (the inputs' dtype on a GPU: fp32 for fp32, else
     bf16/fp16, the rounding the old fused kernel's products had; fp32 in the
     interpreter, `_dz_dtype`), and the tile's column sums of
     dz (fp32) into gbp [row tiles, Vc] for grad_bias.
  2. cuBLAS through torch (tensor cores; any GPU the torch build runs on):
         grad_W[v0:v1]  = dz^T @ h_valid       [Vc, H], written once, in the weight dtype
         grad_h        += dz @ W[v0:v1]        [NV, H], fp32 accumulator over the chunks
         grad_b[v0:v1]  = gbp.sum(0)
     bf16/fp16 products accumulate in fp32 inside cuBLAS; grad_h's per-chunk product is
     added in fp32 (torch.addmm(..., out_dtype=float32, out=grad_h), torch >= 2.8), so
     every gradient sees one rounding to the output dtype, as before.

Extra memory: the chunk buffer (NV x Vc elements, `LinearTritonConfig.chunk_bytes`), the
fp32 grad_h accumulator, the gathered valid hidden rows, gbp. No [N, V] tensor.
"""
from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from .._backend import triton_interpreting
from .grad_filter import block_columns
from .grads import linear_grads
from .linear_tiles import _logits_tile

__all__ = ["linear_logprobs_triton_backward"]


@triton.jit
def _linear_dlogits_kernel(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows_ptr, lab_ptr,
                           m_ptr, logs_ptr, ent_ptr, glp_ptr, gent_ptr, dz_ptr, stride_dz,
                           gbp_ptr, stride_gbp, NV, v_lo, v_hi, H, temperature,
                           keep_ptr, stride_keep, tau,
                           HAS_BIAS: tl.constexpr, NEED_ENTROPY: tl.constexpr,
                           NEED_B: tl.constexpr, DOT_FP32: tl.constexpr, TF32: tl.constexpr,
                           BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr,
                           BLOCK_H: tl.constexpr, FILTER: tl.constexpr = False,
                           EVEN_H: tl.constexpr = False):
    """dz [NV, Vc] (row stride stride_dz) for vocabulary columns [v_lo, v_hi); gbp [row
    tiles, Vc]: per row tile, the column sums of dz in fp32. Every element of
    dz[:NV, :v_hi - v_lo] and gbp[:, :v_hi - v_lo] is written exactly once; no atomics.
    FILTER (grad_filter.py): keep [row tiles, vocabulary tiles] int32 gets 1 where some
    |dz_iv| of the tile exceeds tau (|g_i| + |e_i|) / T, else 0."""
    pid_n = tl.program_id(0)
    pid_v = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < NV
    rows = tl.load(rows_ptr + offs_n, mask=n_mask, other=0)
    lab = tl.load(lab_ptr + offs_n, mask=n_mask, other=-1)
    # masked-out rows: m = +inf, so their (discarded) p is 0 whatever their logits
    m = tl.load(m_ptr + offs_n, mask=n_mask, other=float("inf"))
    logs = tl.load(logs_ptr + offs_n, mask=n_mask, other=0.0)
    g_lp = tl.load(glp_ptr + offs_n, mask=n_mask, other=0.0)
    local = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)          # column within the chunk
    cols = v_lo + local
    v_mask = cols < v_hi
    z = _logits_tile(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows, n_mask, cols, v_mask, H,
                     v_hi - 1, HAS_BIAS, DOT_FP32, TF32, BLOCK_N, BLOCK_V, BLOCK_H, EVEN_H)
    # q = log p = (z - m) / T - log s; clamped so -inf logits give p = 0, not NaN
    q = tl.maximum((z - m[:, None]) / temperature, -1e30) - logs[:, None]
    p = tl.exp(q)
    g = tl.where(cols[None, :] == lab[:, None], g_lp[:, None], 0.0) - g_lp[:, None] * p
    if NEED_ENTROPY:
        ent = tl.load(ent_ptr + offs_n, mask=n_mask, other=0.0)
        g_ent = tl.load(gent_ptr + offs_n, mask=n_mask, other=0.0)
        g -= g_ent[:, None] * p * (q + ent[:, None])
    tile_mask = n_mask[:, None] & v_mask[None, :]
    g = tl.where(tile_mask, g / temperature, 0.0)
    if FILTER:
        mag = tl.abs(g_lp)
        if NEED_ENTROPY:
            mag += tl.abs(g_ent)
        big = tl.abs(g) > (mag * (tau / temperature))[:, None]
        tl.store(keep_ptr + pid_n * stride_keep + pid_v, tl.max(big.to(tl.int32)))
    tl.store(dz_ptr + offs_n[:, None] * stride_dz + local[None, :],
             g.to(dz_ptr.dtype.element_ty), mask=tile_mask)
    if NEED_B:
        tl.store(gbp_ptr + pid_n * stride_gbp + local, tl.sum(g, axis=0), mask=v_mask)


def _dz_dtype(dtype: torch.dtype) -> torch.dtype:
    """dtype of the dL/dz chunk: the inputs' dtype on a GPU (tensor-core products); fp32
    in the interpreter, which computes everything in fp32 (linear_tiles.py)."""
    return torch.float32 if triton_interpreting() else dtype


_OUT_DTYPE_MM: dict[torch.device, bool] = {}


def _addmm_f32_(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """acc += a @ b with acc fp32 and a, b fp32/bf16/fp16. Half operands of one dtype on a
    GPU go through cuBLAS with fp32 output straight into acc (torch.addmm(...,
    out_dtype=float32), torch >= 2.8); a torch without it gets the tensor-core product
    rounded once to the half dtype, then added in fp32 (one extra rounding per chunk, at
    tensor-core speed). On the CPU the operands are upcast (the same products, in fp32)."""
    if a.dtype == b.dtype == torch.float32:
        acc.addmm_(a, b)
        return
    if a.is_cuda and a.dtype == b.dtype and _OUT_DTYPE_MM.get(a.device, True):
        try:
            torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)
            return
        except torch.cuda.OutOfMemoryError:
            raise
        except (TypeError, RuntimeError, NotImplementedError):
            _OUT_DTYPE_MM[a.device] = False       # this torch cannot
    if a.is_cuda and a.dtype == b.dtype:
        acc += torch.mm(a, b)
        return
    acc += torch.mm(a.float(), b.float())


@contextlib.contextmanager
def _cublas_tf32(device: torch.device, allow: bool):
    """cuBLAS fp32 products in TF32 exactly when `allow` (the op's allow_tf32), whatever the
    process-wide torch.backends.cuda.matmul.allow_tf32 says; restored afterwards."""
    if device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def linear_logprobs_triton_backward(hidden, weight, bias, rows, lab, m, logs, ent, g_lp, g_ent,
                                    temperature: float, need_h: bool, need_w: bool,
                                    need_b: bool, config, tf32: bool = False,
                                    grad_filter: float = 0.0):
    """(grad_hidden [N, H], grad_weight [V, H], grad_bias [V]), None where not needed.

    rows, lab [NV]: the scored rows and their labels; m, logs, ent [NV] fp32 from the
    forward; g_lp, g_ent [NV] the incoming gradients (g_ent None without entropy).
    config: LinearTritonConfig (tiles, chunk budget); tf32: TF32 products for fp32 inputs.
    grad_filter > 0: vocabulary tiles (BLOCK_V columns) whose every |dz| is negligible for
    every row skip the grad_W and grad_h products (grad_filter.py).
    """
    h = hidden.shape[1]
    v = weight.shape[0]
    nv = rows.numel()
    dev = hidden.device
    bn, bv, bh, warps = config.tiles(nv, v, h, dev, hidden.dtype, tf32, phase="bwd")
    dz_dtype = _dz_dtype(hidden.dtype)
    vc = config.chunk_columns(nv, v, bv, dz_dtype.itemsize)
    f32 = dict(dtype=torch.float32, device=dev)
    gh = torch.zeros(nv, h, **f32) if need_h else None
    gw = torch.empty(v, h, dtype=weight.dtype, device=dev) if need_w else None
    gb = torch.empty(v, **f32) if need_b else None
    if nv == 0 or not (need_h or need_w or need_b):
        if gw is not None:
            gw.zero_()
        if gb is not None:
            gb.zero_()
        return linear_grads(hidden, weight, bias, rows, gh, gw, gb)
    need_entropy = g_ent is not None
    g_lp = g_lp.to(torch.float32).contiguous()
    g_ent = g_ent.to(torch.float32).contiguous() if need_entropy else g_lp
    n_tiles = triton.cdiv(nv, bn)
    dz = torch.empty(nv, vc, dtype=dz_dtype, device=dev)
    gbp = torch.empty(n_tiles, vc, **f32) if need_b else dz
    keep = (torch.empty(n_tiles, triton.cdiv(vc, bv), dtype=torch.int32, device=dev)
            if grad_filter else gbp)
    # the valid hidden rows, for grad_W = dz^T @ h_valid (no copy when every row is scored)
    hv = None
    if need_w:
        hv = hidden if nv == hidden.shape[0] else hidden.index_select(0, rows)
    dot_fp32 = hidden.dtype == torch.float32 or triton_interpreting()
    with _cublas_tf32(dev, tf32):
        for v0 in range(0, v, vc):
            v1 = min(v, v0 + vc)
            _linear_dlogits_kernel[(n_tiles, triton.cdiv(v1 - v0, bv))](
                hidden, hidden.stride(0), weight, weight.stride(0),
                bias if bias is not None else weight, rows, lab, m, logs,
                ent if need_entropy else m, g_lp, g_ent, dz, dz.stride(0), gbp, gbp.stride(0),
                nv, v0, v1, h, float(temperature), keep, keep.stride(0), float(grad_filter),
                HAS_BIAS=bias is not None, NEED_ENTROPY=need_entropy, NEED_B=need_b,
                DOT_FP32=dot_fp32, TF32=tf32, BLOCK_N=bn, BLOCK_V=bv, BLOCK_H=bh,
                FILTER=bool(grad_filter),
                EVEN_H=config.unmasked_h(h, bh, dev, phase="bwd"), num_warps=warps,
                **config.launch_options())
            if need_b:
                torch.sum(gbp[:, :v1 - v0], dim=0, out=gb[v0:v1])
            d = dz[:, :v1 - v0]
            cols = None
            if grad_filter:
                nvt = triton.cdiv(v1 - v0, bv)
                cols = block_columns(keep[:, :nvt].any(0), bv, v1 - v0)
            if cols is not None:            # some tiles negligible: products skip them
                _filtered_products(d, cols, weight[v0:v1], hv, gh, gw, v0, v1)
                continue
            if need_w and d.dtype == hv.dtype:
                torch.mm(d.t(), hv, out=gw[v0:v1])       # fp32 accumulate, one rounding
            elif need_w:                                 # interpreter: fp32 dz, half hv
                gw[v0:v1] = torch.mm(d.t(), hv.float())
            if need_h:
                _addmm_f32_(gh, d, weight[v0:v1])
    return linear_grads(hidden, weight, bias, rows, gh, gw, gb)


def _filtered_products(d, cols, wv, hv, gh, gw, v0: int, v1: int) -> None:
    """The chunk's products on its kept columns `cols` only (grad_filter.py): grad_W rows
    of skipped columns are 0; grad_h gets the kept columns' product."""
    dk = d.index_select(1, cols)
    if gw is not None:
        part = torch.mm(dk.t(), hv if dk.dtype == hv.dtype else hv.to(dk.dtype))
        gw[v0:v1].zero_().index_copy_(0, cols, part.to(gw.dtype))
    if gh is not None:
        _addmm_f32_(gh, dk, wv.index_select(0, cols))
