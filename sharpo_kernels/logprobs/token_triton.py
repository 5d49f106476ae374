"""Triton kernels for `token_logprobs`: one program per row, online logsumexp over V blocks.

Forward (`_token_fwd_kernel`): streams the row once, carrying (m, s, t) with
m = running max of the raw logits, s = sum exp(d), t = sum exp(d) d, d = (x - m) / T, so
log p(label) = (x_label - m) / T - log s and the entropy H = log s - t / s come from the
same pass. It writes log p, H and the statistics backward needs (m, log s, H): O(N).
Backward (`_token_bwd_kernel`): recomputes q = log p per block from (m, log s) and writes

    dL/dx = [g_logp (onehot - p) - g_H p (q + H)] / T              (p (E_p[q] - q) form)

Lanes at -inf are clamped to d = -1e30 after the temperature is applied (exp is 0 and
every product with it finite), and padded lanes past V load as -inf, so neither 0 * inf
nor a stray lane reaches a sum. Every row is written, ignored rows included (0, and a zero
gradient), and inputs are only read. Arithmetic is fp32 whatever the logits' dtype: each
load is converted right away (bf16 arithmetic is broken in the interpreter, docs/toolchain.md).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._backend import triton_interpreting
from .online_lse_triton import online_lse_rescale_triton

__all__ = ["token_logprobs_triton", "token_logprobs_triton_forward",
           "token_logprobs_triton_backward", "TokenLogprobsTriton"]


@triton.jit
def _token_fwd_kernel(x_ptr, stride_x, labels_ptr, logp_ptr, ent_ptr, m_ptr, logs_ptr,
                      V, temperature, ignore_index,
                      NEED_ENTROPY: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(labels_ptr + row)
    valid = label != ignore_index
    v_end = tl.where(valid, V, 0)                 # ignored rows skip the vocabulary loop
    x_row = x_ptr + row * stride_x
    m = float("-inf")
    s = 0.0
    t = 0.0
    for v0 in range(0, v_end, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        x = tl.load(x_row + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m, m_ref, s, t = online_lse_rescale_triton(m, s, t, tl.max(x, axis=0), temperature,
                                                   NEED_ENTROPY)
        d = tl.maximum((x - m_ref) / temperature, -1e30)
        e = tl.exp(d)
        s += tl.sum(e, axis=0)
        if NEED_ENTROPY:
            t += tl.sum(e * d, axis=0)
    safe = tl.where(valid, label, 0)
    x_y = tl.load(x_row + safe).to(tl.float32)
    s = tl.where(valid, s, 1.0)                   # ignored rows: no log(0), no 0 / 0
    logs = tl.log(s)
    logp = (x_y - m) / temperature - logs
    tl.store(logp_ptr + row, tl.where(valid, logp, 0.0))
    tl.store(m_ptr + row, m)
    tl.store(logs_ptr + row, logs)
    if NEED_ENTROPY:
        ent = tl.where(valid, logs - t / s, 0.0)
        tl.store(ent_ptr + row, ent)


@triton.jit
def _token_bwd_kernel(x_ptr, stride_x, labels_ptr, m_ptr, logs_ptr, ent_ptr, glp_ptr, gent_ptr,
                      grad_ptr, stride_g, V, temperature, ignore_index,
                      NEED_ENTROPY: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(labels_ptr + row)
    valid = label != ignore_index
    m = tl.where(valid, tl.load(m_ptr + row), 0.0)
    logs = tl.where(valid, tl.load(logs_ptr + row), 0.0)
    g_lp = tl.where(valid, tl.load(glp_ptr + row), 0.0)
    if NEED_ENTROPY:
        ent = tl.where(valid, tl.load(ent_ptr + row), 0.0)
        g_ent = tl.where(valid, tl.load(gent_ptr + row), 0.0)
    x_row = x_ptr + row * stride_x
    g_row = grad_ptr + row * stride_g
    for v0 in range(0, V, BLOCK_V):
        cols = v0 + tl.arange(0, BLOCK_V)
        in_v = cols < V
        x = tl.load(x_row + cols, mask=in_v & valid, other=float("-inf")).to(tl.float32)
        q = tl.maximum((x - m) / temperature, -1e30) - logs
        p = tl.exp(q)
        g = tl.where(cols == label, g_lp, 0.0) - g_lp * p
        if NEED_ENTROPY:
            g -= g_ent * p * (q + ent)
        g = tl.where(valid, g / temperature, 0.0)
        tl.store(g_row + cols, g, mask=in_v)


def token_config(v: int, dtype: torch.dtype, arch: int | None):
    """(BLOCK_V, num_warps, num_stages) the launchers use for a vocabulary of `v` words.
    arch: the GPU's compute capability (major * 10 + minor), None in the interpreter (one
    fixed config there: docs/toolchain.md)."""
    if arch is None:
        return max(16, min(1024, triton.next_power_of_2(v))), 4, 1
    return max(16, min(4096, triton.next_power_of_2(v))), 8 if v >= 8192 else 4, 3


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


def token_logprobs_triton_forward(logits, labels, temperature: float, ignore_index: int,
                                  need_entropy: bool, block_v: int | None = None):
    """logits [N, V] (unit stride along V), labels [N] int64.

    Returns (logp [N], entropy [N] or None, m [N], logs [N], ent [N] or None), fp32.
    """
    n, v = logits.shape
    dev = logits.device
    logp = torch.empty(n, dtype=torch.float32, device=dev)
    m = torch.empty(n, dtype=torch.float32, device=dev)
    logs = torch.empty(n, dtype=torch.float32, device=dev)
    ent = torch.empty(n, dtype=torch.float32, device=dev) if need_entropy else None
    if n:
        bv, warps, stages = token_config(v, logits.dtype, _arch(dev))
        _token_fwd_kernel[(n,)](
            logits, logits.stride(0), labels, logp, ent if need_entropy else logp, m, logs,
            v, float(temperature), int(ignore_index),
            NEED_ENTROPY=need_entropy, BLOCK_V=block_v or bv, num_warps=warps,
            num_stages=stages)
    return logp, ent, m, logs, ent


def token_logprobs_triton_backward(logits, labels, m, logs, ent, g_lp, g_ent,
                                   temperature: float, ignore_index: int,
                                   block_v: int | None = None):
    """Gradient w.r.t. logits [N, V] (logits' dtype). g_ent None: the entropy is unused."""
    n, v = logits.shape
    need_entropy = g_ent is not None
    grad = torch.empty((n, v), dtype=_grad_buffer_dtype(logits.dtype), device=logits.device)
    if n:
        g_lp = g_lp.to(torch.float32).contiguous()
        g_ent = g_ent.to(torch.float32).contiguous() if need_entropy else g_lp
        bv, warps, stages = token_config(v, logits.dtype, _arch(logits.device))
        _token_bwd_kernel[(n,)](
            logits, logits.stride(0), labels, m, logs, ent if need_entropy else m, g_lp, g_ent,
            grad, grad.stride(0), v, float(temperature), int(ignore_index),
            NEED_ENTROPY=need_entropy, BLOCK_V=block_v or bv, num_warps=warps,
            num_stages=stages)
    return grad.to(logits.dtype)


class TokenLogprobsTriton(torch.autograd.Function):
    """autograd.Function over logits [N, V]; outputs (logp [N], entropy [N])."""

    @staticmethod
    def forward(ctx, logits, labels, temperature, ignore_index, need_entropy, block_v):
        logp, entropy, m, logs, ent = token_logprobs_triton_forward(
            logits, labels, temperature, ignore_index, need_entropy, block_v)
        if entropy is None:
            entropy = torch.zeros_like(logp)
            ctx.mark_non_differentiable(entropy)
        ctx.save_for_backward(logits, labels, m, logs, ent)
        ctx.args = (temperature, ignore_index, need_entropy, block_v)
        return logp, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_lp, g_ent):
        logits, labels, m, logs, ent = ctx.saved_tensors
        temperature, ignore_index, need_entropy, block_v = ctx.args
        grad = None
        if ctx.needs_input_grad[0]:
            grad = token_logprobs_triton_backward(
                logits, labels, m, logs, ent, g_lp, g_ent if need_entropy else None,
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
            bv, warps, stages = token_config(v, dtype, arch)
            trips = (triton.cdiv(v, bv),)
            for ent in (False, True):
                tag = f"{dn} N={n} V={v} entropy={ent:d}"
                out.append(KernelVariant(
                    _token_fwd_kernel,
                    (dtype, v, i64, f32, f32, f32, f32, v, 0.7, -100),
                    dict(NEED_ENTROPY=ent, BLOCK_V=bv), warps, stages, (n,),
                    f"token_fwd {tag}", elements=n * v, bytes=n * v * elt,
                    mufu_per_element=1.0, loop_trips=trips, extra=dict(loop_elements=bv)))
                out.append(KernelVariant(
                    _token_bwd_kernel,
                    (dtype, v, i64, f32, f32, f32, f32, f32, dtype, v, v, 0.7, -100),
                    dict(NEED_ENTROPY=ent, BLOCK_V=bv), warps, stages, (n,),
                    f"token_bwd {tag}", elements=n * v, bytes=2 * n * v * elt,
                    mufu_per_element=1.0, loop_trips=trips, extra=dict(loop_elements=bv)))
    return out
