"""The `cpu` backend of `token_logprobs`: logits [N, V] given, chunked over whole rows;
the math and the tile sizing: cpu_tiles.py."""
from __future__ import annotations

import torch

from .cpu_tiles import (DEFAULT_OPTIONS, ChunkOptions, _cdtype, _finish_forward, _shifted_rows,
                        _tile_grad_, _tile_sums_, _Workspace)

__all__ = ["token_logprobs_cpu", "token_logprobs_cpu_forward", "token_logprobs_cpu_backward"]


def token_logprobs_cpu_forward(logits: torch.Tensor, labels: torch.Tensor,
                               temperature: float, ignore_index: int, need_entropy: bool,
                               options: ChunkOptions = DEFAULT_OPTIONS):
    """logits [N, V], labels [N]. Returns (logp [N], entropy [N], valid, m, logs, ent).

    Tiles of whole rows, read in place (logits are never written). valid: labels !=
    ignore_index; m, logs, ent: per-row statistics for backward. entropy is all zeros
    when need_entropy is False. Ignored rows are computed with a stand-in label and
    zeroed (token_logprobs makes no promise that they cost nothing).
    """
    n, v = logits.shape
    dt = _cdtype(logits)
    valid = labels != ignore_index
    safe = torch.where(valid, labels, torch.zeros_like(labels)).unsqueeze(1)
    logp = torch.empty(n, dtype=dt)
    entropy = torch.zeros(n, dtype=dt)
    m_all = torch.empty(n, dtype=dt)
    logs_all = torch.empty(n, dtype=dt)
    ent_all = torch.zeros(n, dtype=dt)
    per = max(1, options.token_tile_bytes // (v * torch.finfo(dt).bits // 8))
    ws = _Workspace(dt)
    zero = torch.zeros((), dtype=dt)
    for r0 in range(0, n, per):
        r1 = min(n, r0 + per)
        x = logits[r0:r1]
        m = x.amax(-1).to(dt)
        dy = (x.gather(1, safe[r0:r1]).squeeze(1).to(dt) - m) / temperature
        s, t = _tile_sums_(_shifted_rows(ws, x, m, dt), temperature, need_entropy, ws)
        logs = s.log()
        ok = valid[r0:r1]
        logp[r0:r1] = torch.where(ok, dy - logs, zero)
        m_all[r0:r1] = m
        logs_all[r0:r1] = logs
        if need_entropy:
            ent = torch.where(ok, logs - t / s, zero)
            ent_all[r0:r1] = ent
            entropy[r0:r1] = ent
    return logp, entropy, valid, m_all, logs_all, ent_all


def token_logprobs_cpu_backward(logits, labels, valid, m_all, logs_all, ent_all,
                                g_lp, g_ent, temperature: float,
                                options: ChunkOptions = DEFAULT_OPTIONS):
    """Gradient w.r.t. logits [N, V] (logits' dtype), recomputed tile by tile; fp32/fp64
    logits have each tile computed in the gradient's own rows (no extra copy).

    g_lp, g_ent: [N] upstream gradients (g_ent None: entropy unused).
    """
    n, v = logits.shape
    dt = m_all.dtype
    grad = torch.empty((n, v), dtype=logits.dtype)
    per = max(1, options.token_tile_bytes // (v * torch.finfo(dt).bits // 8))
    ws = _Workspace(dt)
    zero = torch.zeros((), dtype=dt)
    gl_all = torch.where(valid, g_lp.to(dt), zero)
    ge_all = None if g_ent is None else torch.where(valid, g_ent.to(dt), zero)
    safe = torch.where(valid, labels, torch.zeros_like(labels)).unsqueeze(1)
    for r0 in range(0, n, per):
        r1 = min(n, r0 + per)
        x = logits[r0:r1]
        out = grad[r0:r1] if grad.dtype == dt else None
        d = _shifted_rows(ws, x, m_all[r0:r1], dt, out=out)
        gl = gl_all[r0:r1]
        gq = _tile_grad_(d, logs_all[r0:r1], ent_all[r0:r1], gl,
                         None if ge_all is None else ge_all[r0:r1], temperature, ws)
        gq.scatter_add_(1, safe[r0:r1], (gl / temperature).unsqueeze(1))
        ok = valid[r0:r1]
        if not bool(ok.all()):
            gq.masked_fill_(~ok.unsqueeze(1), 0)
        if out is None:
            grad[r0:r1].copy_(gq)
    return grad


class TokenLogprobsCPU(torch.autograd.Function):
    """autograd.Function over logits [N, V]; outputs (logp [N], entropy [N])."""

    @staticmethod
    def forward(ctx, logits, labels, temperature, ignore_index, need_entropy, options):
        logp, entropy, valid, m, logs, ent = token_logprobs_cpu_forward(
            logits, labels, temperature, ignore_index, need_entropy, options)
        return _finish_forward(ctx, (logits, labels, valid, m, logs, ent), logp, entropy,
                               temperature, need_entropy, options)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_lp, g_ent):
        logits, labels, valid, m, logs, ent = ctx.saved_tensors
        grad = None
        if ctx.needs_input_grad[0]:
            grad = token_logprobs_cpu_backward(
                logits, labels, valid, m, logs, ent, g_lp,
                g_ent if ctx.need_entropy else None, ctx.temperature, ctx.options)
        return grad, None, None, None, None, None


def token_logprobs_cpu(logits, labels, temperature=1.0, ignore_index=-100,
                       return_entropy=False, options: ChunkOptions = DEFAULT_OPTIONS):
    """Unvalidated op: logits [N, V], labels [N] -> (logp [N], entropy [N])."""
    return TokenLogprobsCPU.apply(logits, labels, float(temperature), int(ignore_index),
                                  bool(return_entropy), options)
