"""The logits tile both linear_logprobs Triton kernels compute (linear_triton.py forward,
linear_backward_triton.py d-logits): z = h[rows] @ W[cols]^T (+ b[cols]), fp32, never [N, V].

Precision of the products (docs/api.md, "allow_tf32"):
    DOT_FP32 and not TF32   operands in fp32, IEEE products (`input_precision="ieee"`, FMA
                            units): fp32 inputs by default, and every dtype in the
                            interpreter (its bf16 `tl.dot` is broken, docs/toolchain.md)
    DOT_FP32 and TF32       fp32 operands on tensor cores in TF32 (allow_tf32=True, fp32)
    not DOT_FP32            bf16/fp16 operands on tensor cores, fp32 accumulation
"""
import triton
import triton.language as tl


@triton.jit
def _logits_tile(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows, n_mask, cols, v_mask, H, v_last,
                 HAS_BIAS: tl.constexpr, DOT_FP32: tl.constexpr, TF32: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_H: tl.constexpr,
                 EVEN_H: tl.constexpr):
    """[BLOCK_N, BLOCK_V] fp32 logits of hidden rows `rows` [BLOCK_N] against vocabulary
    `cols` [BLOCK_V], looping over H in BLOCK_H slices.

    EVEN_H (H a multiple of BLOCK_H, the launchers' shapes): the loop loads without masks.
    Masked-out rows must hold a valid row index (the kernels load `rows` with other=0) and
    masked-out columns read column v_last (a valid one): their logits are real numbers the
    caller discards (-inf / a masked store), not 0. Otherwise masked rows/columns read 0
    and the loop masks the H tail as well."""
    acc = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    if EVEN_H:
        cols = tl.minimum(cols, v_last)
    for h0 in range(0, H, BLOCK_H):
        hk = h0 + tl.arange(0, BLOCK_H)
        if EVEN_H:                      # no mask work in the loop (issue 45, item 3)
            a = tl.load(h_ptr + rows[:, None] * stride_h + hk[None, :])
            bt = tl.load(w_ptr + cols[None, :] * stride_w + hk[:, None])
        else:
            k_mask = hk < H
            a = tl.load(h_ptr + rows[:, None] * stride_h + hk[None, :],
                        mask=n_mask[:, None] & k_mask[None, :], other=0.0)
            bt = tl.load(w_ptr + cols[None, :] * stride_w + hk[:, None],
                         mask=v_mask[None, :] & k_mask[:, None], other=0.0)
        if DOT_FP32:
            if TF32:
                acc = tl.dot(a.to(tl.float32), bt.to(tl.float32), acc, input_precision="tf32")
            else:
                acc = tl.dot(a.to(tl.float32), bt.to(tl.float32), acc,
                             input_precision="ieee")
        else:
            acc = tl.dot(a, bt, acc)
    if HAS_BIAS:
        acc += tl.load(b_ptr + cols, mask=v_mask, other=0.0).to(tl.float32)[None, :]
    return acc


@triton.jit
def _logits_tile_desc(h_desc, w_desc, n0, v0, H, DOT_FP32: tl.constexpr, TF32: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_H: tl.constexpr):
    """[BLOCK_N, BLOCK_V] fp32 logits, bias not added, of rows n0.. of `h_desc` (a tensor
    descriptor over the scored hidden rows [NV, H], block [BLOCK_N, BLOCK_H]) against rows
    v0.. of `w_desc` (over W [V, H], block [BLOCK_V, BLOCK_H]): TMA loads on sm_90, which
    fill rows and columns past the end with 0 (no masks, no address arithmetic)."""
    acc = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        a = h_desc.load([n0, h0])
        w = w_desc.load([v0, h0])
        if DOT_FP32:
            if TF32:
                acc = tl.dot(a.to(tl.float32), w.to(tl.float32).T, acc, input_precision="tf32")
            else:
                acc = tl.dot(a.to(tl.float32), w.to(tl.float32).T, acc,
                             input_precision="ieee")
        else:
            acc = tl.dot(a, w.T, acc)
    return acc
