"""Triton kernels for `token_logprobs`: one program per row, online logsumexp over V blocks
(docs/method.md §3: log-probs at the sampling temperature; docs/gpu_kernels.md: the design).

Units: base 2. With c = log2(e) / T (computed once on the host), d = (x - m) c is the
log2-scaled logit relative to a reference m, so exp(d ln 2) = exp2(d): one multiply and one
MUFU.EX2 per element, no division and no separate log2(e) fold.

Forward (`_token_fwd_kernel`): a block is [ROWS, COLS] contiguous logits, COLS = 16 bytes of
the input dtype, so a thread owns whole block rows ("slots") and loads each with one 16-byte
load. Each slot carries its own running statistics across the vocabulary loop:
m = raw max, s = sum exp2(d), t = sum exp2(d) d with d = (x - m) c; the per-slot max and
sums are reductions inside one thread, so the loop has no shuffle and no barrier. The slots
are merged once after the loop (rescaled to the row max M, then summed), giving

    log p(label) = ((x_label - M) c - log2 S) ln 2,    H = (log2 S - T_ / S) ln 2

(S, T_ the merged sums). The loop runs unmasked over the whole blocks and handles the ragged
tail in one masked block after it. It writes log p, H and what backward needs: m = M and
logs = ln S (natural log, so that M + T logs is the row's logsumexp of x / T ... at T = 1,
M + logs = logsumexp(x)).

Backward (`_token_bwd_kernel`): recomputes a = (x - M) c - log2 S, p = exp2(a), and writes

    dL/dx = [g_logp (onehot - p) - g_H p (q + H)] / T,   q = log p = a ln 2

as p (A + B a) with per-row A = -(g_logp + g_H H) / T, B = -g_H ln 2 / T (A alone without
the entropy). The onehot term is added after the loop, by rewriting the label's element once
(after a block barrier, so the loop's store of that element is ordered before it).

-inf logits: exp2(-inf) = 0; where a product with d or a would meet -inf (the entropy
terms) d and a are clamped (d >= -1e30, a >= -256: exp2(-256) is 0 in fp32 already), and a
reference m = -inf (a slot or row with no finite logit yet) is replaced by 0 before it is
subtracted, so neither inf - inf nor 0 * inf reaches a sum. Every row is written, ignored
rows included (0, and a zero gradient), and inputs are only read. Arithmetic is fp32
whatever the logits' dtype: each load is converted right away (bf16 arithmetic is broken in
the interpreter, docs/toolchain.md).
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from .._backend import triton_interpreting

__all__ = ["token_logprobs_triton", "token_logprobs_triton_forward",
           "token_logprobs_triton_backward", "TokenLogprobsTriton", "token_config"]

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _slot_update(x, m, s, t, scale, NEED_ENTROPY: tl.constexpr):
    """One [ROWS, COLS] block x into per-slot (m, s, t) [ROWS] (docs/gpu_kernels.md).
    m' = max(m, max_j x), reference r = m' (0 while m' = -inf), old sums rescaled by
    alpha = exp2((m - r) c) (0 when m = -inf), t' = alpha (t + (m - r) c s)."""
    m_new = tl.maximum(m, tl.max(x, axis=1))
    ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    shift = tl.maximum((m - ref) * scale, -1e30)        # -inf (nothing seen yet) -> -1e30
    alpha = tl.exp2(shift)
    d = (x - ref[:, None]) * scale
    e = tl.exp2(d)
    if NEED_ENTROPY:
        t = (t + shift * s) * alpha + tl.sum(e * tl.maximum(d, -1e30), axis=1)
    s = s * alpha + tl.sum(e, axis=1)
    return m_new, s, t


@triton.jit
def _token_fwd_kernel(x_ptr, stride_x, labels_ptr, logp_ptr, ent_ptr, m_ptr, logs_ptr,
                      V, scale, ignore_index,
                      NEED_ENTROPY: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(labels_ptr + row)
    valid = label != ignore_index
    v_end = tl.where(valid, V, 0)                 # ignored rows skip the vocabulary loop
    x_row = x_ptr + row * stride_x
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    m = tl.full((ROWS,), float("-inf"), tl.float32)
    s = tl.zeros((ROWS,), tl.float32)
    t = tl.zeros((ROWS,), tl.float32)
    v_full = (v_end // (ROWS * COLS)) * (ROWS * COLS)
    for v0 in range(0, v_full, ROWS * COLS):      # whole blocks: no mask
        x = tl.load(x_row + v0 + offs).to(tl.float32)
        m, s, t = _slot_update(x, m, s, t, scale, NEED_ENTROPY)
    if v_full < v_end:                            # the ragged tail, masked
        cols = v_full + offs
        x = tl.load(x_row + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m, s, t = _slot_update(x, m, s, t, scale, NEED_ENTROPY)
    # merge the slots: rescale each to the row max M (reference 0 while M is -inf)
    big_m = tl.max(m, axis=0)
    ref = tl.where(big_m == float("-inf"), 0.0, big_m)
    shift = tl.where(m == float("-inf"), 0.0, (tl.where(m == float("-inf"), 0.0, m) - ref)
                     * scale)
    alpha = tl.where(m == float("-inf"), 0.0, tl.exp2(shift))
    # a slot holding the row max holds its exact 1 (exp2(0)): sum the rest, then add the
    # ones, so that S ~ 1 (p(label) ~ 1) carries one rounding at 1.0, not one per slot
    top = m == big_m
    s_all = tl.sum(tl.where(top, s - 1.0, s * alpha), axis=0) + tl.sum(top.to(tl.float32),
                                                                        axis=0)
    s_all = tl.where(valid, s_all, 1.0)           # ignored rows: no log(0), no 0 / 0
    log2s = tl.log2(s_all)
    safe = tl.where(valid, label, 0)
    x_y = tl.load(x_row + safe).to(tl.float32)
    logp = ((x_y - ref) * scale - log2s) * 0.6931471805599453
    tl.store(logp_ptr + row, tl.where(valid, logp, 0.0))
    tl.store(m_ptr + row, big_m)
    tl.store(logs_ptr + row, log2s)
    if NEED_ENTROPY:
        t_all = tl.sum((t + shift * s) * alpha, axis=0)
        ent = (log2s - t_all / s_all) * 0.6931471805599453
        tl.store(ent_ptr + row, tl.where(valid, ent, 0.0))


@triton.jit
def _softmax_grad(x, ref, scale, log2s, coef_a, coef_b, NEED_ENTROPY: tl.constexpr):
    """The backward's value at logits ``x`` (fp32, any shape), without the label's onehot
    term: p * (coef_a + coef_b * log2 p), p = exp2(a), a = (x - ref) * scale - log2s =
    log2 of the softmax (coef_b = 0 without entropy). Inlined: the same SASS as written out
    in each loop."""
    a = (x - ref) * scale - log2s
    if NEED_ENTROPY:
        a = tl.maximum(a, -256.0)                 # exp2 = 0 there in fp32; no 0 * -inf
        g = tl.exp2(a) * (coef_a + coef_b * a)
    else:
        g = tl.exp2(a) * coef_a
    return g


@triton.jit
def _token_bwd_kernel(x_ptr, stride_x, labels_ptr, m_ptr, logs_ptr, ent_ptr, glp_ptr, gent_ptr,
                      grad_ptr, stride_g, V, scale, inv_t, ignore_index,
                      NEED_ENTROPY: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(labels_ptr + row)
    valid = label != ignore_index
    x_row = x_ptr + row * stride_x
    g_row = grad_ptr + row * stride_g
    cols0 = tl.arange(0, BLOCK_V)
    v_full = (V // BLOCK_V) * BLOCK_V
    if valid:
        m = tl.load(m_ptr + row)
        ref = tl.where(m == float("-inf"), 0.0, m)
        log2s = tl.load(logs_ptr + row)
        g_lp = tl.load(glp_ptr + row)
        coef_a = -g_lp * inv_t
        coef_b = 0.0
        if NEED_ENTROPY:
            ent = tl.load(ent_ptr + row)
            g_ent = tl.load(gent_ptr + row)
            coef_a = -(g_lp + g_ent * ent) * inv_t
            coef_b = -g_ent * 0.6931471805599453 * inv_t
        for v0 in range(0, v_full, BLOCK_V):      # whole blocks: no mask
            x = tl.load(x_row + v0 + cols0).to(tl.float32)
            g = _softmax_grad(x, ref, scale, log2s, coef_a, coef_b, NEED_ENTROPY)
            tl.store(g_row + v0 + cols0, g.to(grad_ptr.dtype.element_ty))
        if v_full < V:                            # the ragged tail, masked
            cols = v_full + cols0
            x = tl.load(x_row + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
            g = _softmax_grad(x, ref, scale, log2s, coef_a, coef_b, NEED_ENTROPY)
            tl.store(g_row + cols, g.to(grad_ptr.dtype.element_ty), mask=cols < V)
        # the onehot term: the label's element once more, after every store of the loop
        tl.debug_barrier()
        x_y = tl.load(x_row + label).to(tl.float32)
        g_y = _softmax_grad(x_y, ref, scale, log2s, coef_a, coef_b, NEED_ENTROPY) + g_lp * inv_t
        tl.store(g_row + label, g_y.to(grad_ptr.dtype.element_ty))
    else:                                         # ignored row: a zero gradient
        zero = tl.zeros((BLOCK_V,), grad_ptr.dtype.element_ty)
        for v0 in range(0, V, BLOCK_V):
            cols = v0 + cols0
            tl.store(g_row + cols, zero, mask=cols < V)


def token_config(v: int, dtype: torch.dtype, arch: int | None):
    """(BLOCK_V, COLS, num_warps, num_stages) the launchers use for a vocabulary of `v`
    words of `dtype`; the forward splits a block into [BLOCK_V / COLS, COLS] slots.
    arch: the GPU's compute capability (major * 10 + minor); None in the interpreter, which
    gets one fixed config (it cannot autotune: docs/toolchain.md) with one-element slots
    (its sums are then exact to the last bit; the GPU's slot width is tested through an
    explicit block_v, which keeps COLS = 16 bytes)."""
    if arch is None:
        return max(16, min(1024, triton.next_power_of_2(v))), 1, 4, 1
    return (max(16, min(4096, triton.next_power_of_2(v))), _cols(dtype), 8 if v >= 8192 else 4,
            3)


def _cols(dtype: torch.dtype) -> int:
    """Elements of one 16-byte load: the forward's slot width on a GPU."""
    return 16 // dtype.itemsize


def _arch(device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return major * 10 + minor


def _grad_buffer_dtype(dtype: torch.dtype) -> torch.dtype:
    # the interpreter cannot convert to bf16 inside a kernel: write fp32, cast afterwards
    if dtype == torch.bfloat16 and triton_interpreting():
        return torch.float32
    return dtype


def _check_dtype(t: torch.Tensor, name: str) -> None:
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{name}: the triton backend takes float32/bfloat16/float16, got "
                        f"{t.dtype} (use backend='cpu' or 'torch' for float64)")


def _forward(logits, labels, temperature: float, ignore_index: int, need_entropy: bool,
             block_v: int | None):
    """(logp, ent or None, m, log2s) [N] fp32: log2s = log2 of the row's sum, base 2."""
    n, v = logits.shape
    dev = logits.device
    logp = torch.empty(n, dtype=torch.float32, device=dev)
    m = torch.empty(n, dtype=torch.float32, device=dev)
    log2s = torch.empty(n, dtype=torch.float32, device=dev)
    ent = torch.empty(n, dtype=torch.float32, device=dev) if need_entropy else None
    if n:
        bv, cols, warps, stages = token_config(v, logits.dtype, _arch(dev))
        if block_v:
            bv, cols = block_v, _cols(logits.dtype)
        _token_fwd_kernel[(n,)](
            logits, logits.stride(0), labels, logp, ent if need_entropy else logp, m, log2s,
            v, LOG2E / float(temperature), int(ignore_index),
            NEED_ENTROPY=need_entropy, ROWS=max(1, bv // cols), COLS=cols,
            num_warps=warps, num_stages=stages)
    return logp, ent, m, log2s


def token_logprobs_triton_forward(logits, labels, temperature: float, ignore_index: int,
                                  need_entropy: bool, block_v: int | None = None):
    """logits [N, V] (unit stride along V), labels [N] int64.

    Returns (logp [N], entropy [N] or None, m [N], logs [N], ent [N] or None), fp32, with
    m the row max and logs = ln sum exp((x - m) / T) (so m + logs = logsumexp(x) at T = 1).
    """
    logp, ent, m, log2s = _forward(logits, labels, temperature, ignore_index, need_entropy,
                                   block_v)
    return logp, ent, m, log2s * LN2, ent


def token_logprobs_triton_backward(logits, labels, m, log2s, ent, g_lp, g_ent,
                                   temperature: float, ignore_index: int,
                                   block_v: int | None = None):
    """Gradient w.r.t. logits [N, V] (logits' dtype), from the forward's m, log2s (base-2
    log of the row sum, `_forward`) and entropy. g_ent None: the entropy is unused."""
    n, v = logits.shape
    need_entropy = g_ent is not None
    grad = torch.empty((n, v), dtype=_grad_buffer_dtype(logits.dtype), device=logits.device)
    if n:
        g_lp = g_lp.to(torch.float32).contiguous()
        g_ent = g_ent.to(torch.float32).contiguous() if need_entropy else g_lp
        bv, _, warps, stages = token_config(v, logits.dtype, _arch(logits.device))
        t = float(temperature)
        _token_bwd_kernel[(n,)](
            logits, logits.stride(0), labels, m, log2s, ent if need_entropy else m, g_lp,
            g_ent, grad, grad.stride(0), v, LOG2E / t, 1.0 / t, int(ignore_index),
            NEED_ENTROPY=need_entropy, BLOCK_V=block_v or bv, num_warps=warps,
            num_stages=stages)
    return grad.to(logits.dtype)


class TokenLogprobsTriton(torch.autograd.Function):
    """autograd.Function over logits [N, V]; outputs (logp [N], entropy [N])."""

    @staticmethod
    def forward(ctx, logits, labels, temperature, ignore_index, need_entropy, block_v):
        logp, entropy, m, log2s = _forward(logits, labels, temperature, ignore_index,
                                           need_entropy, block_v)
        ent = entropy
        if entropy is None:
            entropy = torch.zeros_like(logp)
            ctx.mark_non_differentiable(entropy)
        ctx.save_for_backward(logits, labels, m, log2s, ent)
        ctx.args = (temperature, ignore_index, need_entropy, block_v)
        return logp, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_lp, g_ent):
        logits, labels, m, log2s, ent = ctx.saved_tensors
        temperature, ignore_index, need_entropy, block_v = ctx.args
        grad = None
        if ctx.needs_input_grad[0]:
            grad = token_logprobs_triton_backward(
                logits, labels, m, log2s, ent, g_lp, g_ent if need_entropy else None,
                temperature, ignore_index, block_v)
        return grad, None, None, None, None, None


def token_logprobs_triton(logits, labels, temperature=1.0, ignore_index=-100,
                          return_entropy=False, block_v: int | None = None):
    """Unvalidated op: logits [N, V], labels [N] -> (logp [N], entropy [N]) in fp32."""
    _check_dtype(logits, "logits")
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    labels = labels.to(torch.int64).contiguous()
    return TokenLogprobsTriton.apply(logits, labels, float(temperature), int(ignore_index),
                                     bool(return_entropy), block_v)


# ---------------------------------------------------------------------------------------
# Compile specs (sharpo_kernels/compiled): every variant the launchers above can pick on a
# GPU at the realistic shapes, from token_config.
# ---------------------------------------------------------------------------------------

def compile_specs(arch: int):
    """[KernelVariant] of _token_fwd_kernel / _token_bwd_kernel for sm_<arch>."""
    from ..compiled.variants import N_TOKENS, VOCABS, KernelVariant
    f32, i64 = torch.float32, torch.int64
    n = N_TOKENS
    out = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        dn = str(dtype).split(".")[-1]
        elt = dtype.itemsize
        for v in VOCABS:
            bv, cols, warps, stages = token_config(v, dtype, arch)
            trips = (triton.cdiv(v, bv),)
            for ent in (False, True):
                tag = f"{dn} N={n} V={v} entropy={ent:d}"
                out.append(KernelVariant(
                    _token_fwd_kernel,
                    (dtype, v, i64, f32, f32, f32, f32, v, LOG2E / 0.7, -100),
                    dict(NEED_ENTROPY=ent, ROWS=bv // cols, COLS=cols), warps, stages, (n,),
                    f"token_fwd {tag}", elements=n * v, bytes=n * v * elt,
                    mufu_per_element=1.0, loop_trips=trips, extra=dict(loop_elements=bv)))
                out.append(KernelVariant(
                    _token_bwd_kernel,
                    (dtype, v, i64, f32, f32, f32, f32, f32, dtype, v, v, LOG2E / 0.7,
                     1 / 0.7, -100),
                    dict(NEED_ENTROPY=ent, BLOCK_V=bv), warps, stages, (n,),
                    f"token_bwd {tag}", elements=n * v, bytes=2 * n * v * elt,
                    mufu_per_element=1.0, loop_trips=trips, extra=dict(loop_elements=bv)))
    return out
