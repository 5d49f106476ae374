"""Chunked CPU implementation of `token_logprobs` and `linear_logprobs` (the `cpu` backend).

Memory-bounded: no [N, V] softmax (and, for the linear version, no [N, V] logits) is ever
held. Work is done on tiles of rows x vocabulary whose size comes from a byte budget
(`ChunkOptions`); each tile is a handful of in-place torch ops (MKL matmuls for the linear
version), so the extra memory is about two tiles plus O(N) statistics.

The math, per row with raw logits x (or z = h W^T + b), temperature T, label y:

    m    = max_v x_v                                  (raw units; T > 0 keeps the order)
    d_v  = (x_v - m) / T                              (<= 0; -inf lanes clamped to -1e4)
    s    = sum_v exp(d_v),  t = sum_v exp(d_v) d_v    (online over vocabulary tiles:
                                                       online_lse.py)
    logp = d_y - log s
    H    = log s - t / s                              (entropy of softmax(x / T))

Taking the difference x - m before dividing by T keeps log p accurate for |x| ~ 1e4. The
clamp (only where the entropy is wanted) makes exp(d) exactly 0 and every product with d
finite, so -inf logits give no 0 * inf in the entropy or its gradient. Backward recomputes
the tile from the saved (m, log s, H), with p = exp(d) / s and q = log p:

    dL/dq = g_logp (onehot_y - p) - g_H p (q + H)      (p (E_p[q] - q), E_p[q] = -H)
          = g_logp onehot_y - exp(d) (c1 + c2 d)        (c1, c2 per row: few passes)
    dL/dx = dL/dq / T

Each tile costs a few elementwise passes (sub, [div], exp, sum in forward; sub, [div],
exp, scale, scatter in backward, plus clamp/addcmul/mul with the entropy) beside its
matmuls: the linear version does 1 matmul per tile forward and 3 backward (recompute,
grad_hidden, grad_weight), against the naive path's 1 + 2 with N x V tensors in memory.
The recompute is skipped for the first vocabulary tiles when grad_weight is allocated in
forward and their logits are kept in the rows of it that backward writes last
(`_stash_views`, `ChunkOptions.stash_logits`): 37% of the tiles for the Qwen head at
N = 2048, all but one when N <= H, at no memory beyond the gradient itself.

Computation dtype: float64 for float64 inputs, float32 otherwise (bf16/fp16 are upcast
per tile). Outputs use the computation dtype; gradients come back in the input dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .grads import linear_grads
from .online_lse import online_lse_rescale

__all__ = ["ChunkOptions", "token_logprobs_cpu", "linear_logprobs_cpu",
           "token_logprobs_cpu_forward", "token_logprobs_cpu_backward",
           "linear_logprobs_cpu_forward", "linear_logprobs_cpu_backward"]

# Finite stand-in for -inf lanes, applied after the temperature: exp() of anything below
# about -104 (fp32) or -745 (fp64) is exactly 0, so exp(d) = 0 there and every product of d
# with a per-row factor stays finite (no 0 * inf).
_NEG_CLAMP = -1e4


@dataclass(frozen=True)
class ChunkOptions:
    """Tile sizing of the CPU path.

    tile_bytes: bytes of one [rows, vocab] tile of the linear version in the computation
        dtype; about two tiles are live at once (plus, for bf16/fp16 weights, an upcast
        weight slice). Large, for efficient matmuls.
    max_rows: most rows per tile of the linear version (the matmul's M); the vocabulary
        width of a tile then follows from tile_bytes.
    token_tile_bytes: the same for token_logprobs (whole rows, at least one). Cache-sized
        tiles (4 MiB) were 4x slower on the 2-core test machine under load: every torch op
        is a parallel region whose threads wait for each other, so fewer, larger tiles win.
    stash_logits: when the weight gradient will be needed (and is written directly, see
        `_writes_grad_weight_directly`), allocate it in forward and keep the logits of the
        first vocabulary tiles in the part of it that backward writes last, so backward
        skips their recompute matmul. No memory beyond the gradient itself, which backward needs
        anyway; but it is held from forward on, so several forwards awaiting one backward
        hold one [V, H] buffer each: turn it off for that pattern with a short N (where
        naive's [N, V] is smaller than [V, H]).
    """
    tile_bytes: int = 64 << 20
    max_rows: int = 4096
    token_tile_bytes: int = 64 << 20
    stash_logits: bool = True

    def __post_init__(self):
        if not isinstance(self.tile_bytes, int) or self.tile_bytes <= 0:
            raise ValueError(f"tile_bytes: expected a positive int, got {self.tile_bytes!r}")
        if not isinstance(self.max_rows, int) or self.max_rows <= 0:
            raise ValueError(f"max_rows: expected a positive int, got {self.max_rows!r}")
        if not isinstance(self.token_tile_bytes, int) or self.token_tile_bytes <= 0:
            raise ValueError(f"token_tile_bytes: expected a positive int, got "
                             f"{self.token_tile_bytes!r}")
        if not isinstance(self.stash_logits, bool):
            raise TypeError(f"stash_logits: expected a bool, got {self.stash_logits!r}")


DEFAULT_OPTIONS = ChunkOptions()


def _cdtype(*tensors: Optional[torch.Tensor]) -> torch.dtype:
    return torch.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) \
        else torch.float32


class _Workspace:
    """Reused flat buffers for tiles: a fresh 64 MiB tensor per tile would be mmap'd and
    page-faulted every time (glibc serves large blocks with mmap)."""

    def __init__(self, dtype: torch.dtype):
        self.dtype, self.bufs = dtype, {}

    def get(self, key: str, rows: int, cols: int) -> torch.Tensor:
        buf = self.bufs.get(key)
        if buf is None or buf.numel() < rows * cols:
            buf = self.bufs[key] = torch.empty(rows * cols, dtype=self.dtype)
        return buf[:rows * cols].view(rows, cols)


def _valid_rows(labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    return (labels != ignore_index).nonzero().squeeze(1)


# ----------------------------------------------------------------------------------------
# token_logprobs: logits given
# ----------------------------------------------------------------------------------------

def _shifted_rows(ws: _Workspace, x: torch.Tensor, m: torch.Tensor, dt: torch.dtype,
                  out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """x - m[:, None] in dt, into `out` or the workspace, in one pass when x is already dt."""
    z = out if out is not None else ws.get("z", x.shape[0], x.shape[1])
    if x.dtype == dt:
        return torch.sub(x, m.unsqueeze(1), out=z)
    return z.copy_(x).sub_(m.unsqueeze(1))


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


def _tile_sums_(d: torch.Tensor, temperature: float, need_entropy: bool, ws: _Workspace):
    """Clobbers d [R, C] (= logits - row reference m). Returns (sum_v exp(d), sum_v exp(d) d
    or None) per row, after d /= T."""
    if temperature != 1.0:
        d.div_(temperature)
    if not need_entropy:
        return d.exp_().sum(-1), None                   # exp(-inf) = 0: no clamp needed
    d.clamp_(min=_NEG_CLAMP)
    e = torch.exp(d, out=ws.get("e", *d.shape))
    s = e.sum(-1)
    return s, e.mul_(d).sum(-1)


def _tile_grad_(d: torch.Tensor, logs: torch.Tensor, ent: torch.Tensor,
                g_lp: torch.Tensor, g_ent: Optional[torch.Tensor], temperature: float,
                ws: _Workspace):
    """Clobbers d [R, C] (= logits - row max m) into dL/dz less the label term g_lp / T:

        dL/dz = [g_lp onehot - p (g_lp + g_H (d - E_p[d]))] / T,   p = exp(d) / s

    (the p (E_p[q] - q) form of the entropy gradient, with E_p[d] = log s - H), computed as
    exp(d) * (c1 + c2 d) with per-row c1, c2: finite for clamped lanes, where exp(d) = 0.
    """
    if temperature != 1.0:
        d.div_(temperature)
    scale = -torch.exp(-logs) / temperature             # -1 / (s T)
    if g_ent is None:
        return d.exp_().mul_((scale * g_lp).unsqueeze(1))
    d.clamp_(min=_NEG_CLAMP)
    e = torch.exp(d, out=ws.get("e", *d.shape))
    c1 = (scale * (g_lp - g_ent * (logs - ent))).unsqueeze(1)
    c2 = (scale * g_ent).unsqueeze(1)
    torch.addcmul(c1, d, c2, out=d)
    return d.mul_(e)


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


def _finish_forward(ctx, saved: tuple, logp, entropy, temperature: float, need_entropy: bool,
                    options: ChunkOptions):
    """The end of both autograd forwards: keep what backward reads; the entropy [N] is not
    differentiable when it was not asked for. -> (logp [N], entropy [N])."""
    ctx.save_for_backward(*saved)
    ctx.temperature, ctx.need_entropy, ctx.options = temperature, need_entropy, options
    if not need_entropy:
        ctx.mark_non_differentiable(entropy)
    return logp, entropy


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


# ----------------------------------------------------------------------------------------
# linear_logprobs: hidden states and lm_head weight given
# ----------------------------------------------------------------------------------------

def _logits_tile(ws: _Workspace, h: torch.Tensor, w: torch.Tensor,
                 b: Optional[torch.Tensor], out: Optional[torch.Tensor] = None) -> torch.Tensor:
    z = ws.get("z", h.shape[0], w.shape[0]) if out is None else out
    if b is None:
        return torch.mm(h, w.t(), out=z)
    return torch.addmm(b, h, w.t(), out=z)


def _linear_tiles(nv: int, v: int, dt: torch.dtype, options: ChunkOptions):
    rows = max(1, min(nv, options.max_rows))
    cols = max(1, min(v, options.tile_bytes // (rows * (torch.finfo(dt).bits // 8))))
    return rows, cols


def _writes_grad_weight_directly(weight: torch.Tensor, nv: int, dt: torch.dtype,
                                 options: ChunkOptions) -> bool:
    """One row tile and the weight in the computation dtype: backward writes each vocabulary
    slice of grad_weight once, straight from its matmul (no slice accumulator)."""
    rb, _ = _linear_tiles(max(nv, 1), weight.shape[0], dt, options)
    return weight.dtype == dt and rb >= nv > 0


def _stash_views(buf: torch.Tensor, nv: int, vb: int) -> list:
    """Views [nv, vb_j] of `buf` (the [V, H] grad_weight, not yet written) for the logits of
    vocabulary tiles j = 0 .. s-1, s as large as fits.

    Backward takes vocabulary tiles in order and writes grad_weight rows [v0_j, v1_j) at
    tile j, after reading tile j's kept logits. So tile j's logits may live anywhere in
    rows >= v1_j (flat elements from v1_j * H on): they are packed one after another, each
    starting no earlier than its own v1_j * H, until the next would pass the end. With
    nv > H that keeps about (V - vb) H / (nv V) of the vocabulary (37% of the tiles for
    the Qwen head at nv = 2048), with nv <= H every tile but the last.
    """
    flat = buf.view(-1)
    return [flat[a:b].view(nv, (b - a) // nv)
            for a, b in _stash_spans(buf.shape[0], buf.shape[1], nv, vb)]


def _stash_spans(v: int, h: int, nv: int, vb: int) -> list:
    """(start, end) flat offsets of `_stash_views`' tiles in a [v, h] buffer."""
    spans, end = [], 0
    for v0 in range(0, v, vb):
        v1 = min(v, v0 + vb)
        start = max(end, v1 * h)
        if start + nv * (v1 - v0) > v * h:
            break
        end = start + nv * (v1 - v0)
        spans.append((start, end))
    return spans


def _stash_buffer(weight: torch.Tensor, nv: int, dt: torch.dtype,
                  options: ChunkOptions) -> Optional[torch.Tensor]:
    """An unwritten grad_weight buffer for forward to keep logits in, or None when backward
    will not write grad_weight directly or not one tile would fit."""
    if not _writes_grad_weight_directly(weight, nv, dt, options):
        return None
    _, vb = _linear_tiles(nv, weight.shape[0], dt, options)
    if not _stash_spans(weight.shape[0], weight.shape[1], nv, vb):
        return None
    return torch.empty(weight.shape, dtype=weight.dtype)


def linear_logprobs_cpu_forward(hidden, weight, bias, labels, temperature: float,
                                ignore_index: int, need_entropy: bool,
                                options: ChunkOptions = DEFAULT_OPTIONS,
                                stash: Optional[torch.Tensor] = None):
    """hidden [N, H], weight [V, H], bias [V] or None, labels [N].

    Returns (logp [N], entropy [N], rows, m, logs, ent): rows = indices of the non-ignored
    rows (the only ones computed), m, logs, ent = their statistics for backward.
    Vocabulary tiles are the outer loop (each weight slice is upcast once), rows inner.
    stash: an unwritten [V, H] grad_weight buffer (only when backward writes it directly);
    the logits of the first vocabulary tiles are left in it for backward (`_stash_views`).
    """
    n = hidden.shape[0]
    v = weight.shape[0]
    dt = _cdtype(hidden, weight, bias)
    logp = torch.zeros(n, dtype=dt)
    entropy = torch.zeros(n, dtype=dt)
    rows = _valid_rows(labels, ignore_index)
    nv = rows.numel()
    m = torch.full((nv,), float("-inf"), dtype=dt)
    s = torch.zeros(nv, dtype=dt)
    t = torch.zeros(nv, dtype=dt)
    xy = torch.full((nv,), float("nan"), dtype=dt)
    if nv == 0:
        return logp, entropy, rows, m, s, t
    hv = hidden.index_select(0, rows).to(dt)
    lab = labels.index_select(0, rows)
    rb, vb = _linear_tiles(nv, v, dt, options)
    ws = _Workspace(dt)
    kept = [] if stash is None else _stash_views(stash, nv, vb)
    for v0 in range(0, v, vb):
        v1 = min(v, v0 + vb)
        wv = weight[v0:v1].to(dt)
        bv = None if bias is None else bias[v0:v1].to(dt)
        keep = kept[v0 // vb] if v0 // vb < len(kept) else None
        for r0 in range(0, nv, rb):
            r1 = min(nv, r0 + rb)
            z = _logits_tile(ws, hv[r0:r1], wv, bv, out=keep)
            # label logit (raw), when the label falls in this vocabulary tile
            ll = lab[r0:r1] - v0
            ok = (ll >= 0) & (ll < v1 - v0)
            got = z.gather(1, ll.clamp(0, v1 - v0 - 1).unsqueeze(1)).squeeze(1)
            xy[r0:r1] = torch.where(ok, got, xy[r0:r1])
            # online update of (m, s, t); m stays -inf while every logit seen is -inf
            m_new, m_ref, s_new, t_new = online_lse_rescale(m[r0:r1], s[r0:r1], t[r0:r1],
                                                            z.amax(-1), temperature)
            d = z.sub_(m_ref.unsqueeze(1)) if keep is None else \
                torch.sub(z, m_ref.unsqueeze(1), out=ws.get("z", *z.shape))
            s_blk, t_blk = _tile_sums_(d, temperature, need_entropy, ws)
            s_new += s_blk
            if need_entropy:
                t_new += t_blk
            m[r0:r1], s[r0:r1], t[r0:r1] = m_new, s_new, t_new
            del z, d
    logs = s.log()
    lp = (xy - m) / temperature - logs
    ent = logs - t / s if need_entropy else torch.zeros_like(logs)
    logp.index_copy_(0, rows, lp)
    if need_entropy:
        entropy.index_copy_(0, rows, ent)
    return logp, entropy, rows, m, logs, ent


def linear_logprobs_cpu_backward(hidden, weight, bias, labels, rows, m_all, logs_all, ent_all,
                                 g_lp, g_ent, temperature: float, need_hidden: bool,
                                 need_weight: bool, need_bias: bool,
                                 options: ChunkOptions = DEFAULT_OPTIONS,
                                 stash: Optional[torch.Tensor] = None):
    """(grad_hidden, grad_weight, grad_bias), each None when not needed, in input dtypes.

    grad_weight is written slice by slice (an fp32 slice accumulator only when the weight
    is bf16/fp16 or rows need several tiles); grad_hidden is accumulated in the computation
    dtype over the non-ignored rows ([N_valid, H]). stash: the buffer forward filled
    (`_stash_views`); it becomes grad_weight, and its kept logits tiles are not recomputed.
    """
    h = hidden.shape[1]
    v = weight.shape[0]
    dt = m_all.dtype
    nv = rows.numel()
    gh = torch.zeros(nv, h, dtype=dt) if need_hidden else None
    rb, vb = _linear_tiles(max(nv, 1), v, dt, options)
    direct = need_weight and _writes_grad_weight_directly(weight, nv, dt, options)
    gw, kept = None, []
    if stash is not None and direct:
        gw, kept = stash, _stash_views(stash, nv, vb)
    elif need_weight:  # written slice by slice when `direct`; zero only if never written
        gw = (torch.empty if direct else torch.zeros)(weight.shape, dtype=weight.dtype)
    gb = torch.zeros(v, dtype=dt) if need_bias else None
    if nv > 0 and (need_hidden or need_weight or need_bias):
        hv = hidden.index_select(0, rows).to(dt)
        lab = labels.index_select(0, rows)
        gl = g_lp.index_select(0, rows).to(dt)
        ge = None if g_ent is None else g_ent.index_select(0, rows).to(dt)
        ws = _Workspace(dt)
        for v0 in range(0, v, vb):
            v1 = min(v, v0 + vb)
            wv = weight[v0:v1].to(dt)
            bv = None if bias is None else bias[v0:v1].to(dt)
            gwv = None
            if need_weight and not direct:
                gwv = ws.get("gw", v1 - v0, h).zero_()
            for r0 in range(0, nv, rb):
                r1 = min(nv, r0 + rb)
                j = v0 // vb
                z = kept[j] if j < len(kept) else _logits_tile(ws, hv[r0:r1], wv, bv)
                gq = _tile_grad_(z.sub_(m_all[r0:r1].unsqueeze(1)), logs_all[r0:r1],
                                 ent_all[r0:r1], gl[r0:r1],
                                 None if ge is None else ge[r0:r1], temperature, ws)
                ll = lab[r0:r1] - v0
                ok = (ll >= 0) & (ll < v1 - v0)
                add = torch.where(ok, gl[r0:r1] / temperature, torch.zeros_like(gl[r0:r1]))
                gq.scatter_add_(1, ll.clamp(0, v1 - v0 - 1).unsqueeze(1), add.unsqueeze(1))
                if need_hidden:
                    gh[r0:r1].addmm_(gq, wv)
                if need_weight:
                    if direct:
                        torch.mm(gq.t(), hv[r0:r1], out=gw[v0:v1])
                    else:
                        gwv.addmm_(gq.t(), hv[r0:r1])
                if need_bias:
                    gb[v0:v1] += gq.sum(0)
                del z, gq
            if gwv is not None:
                gw[v0:v1].copy_(gwv)
    return linear_grads(hidden, weight, bias, rows, gh, gw, gb)


class LinearLogprobsCPU(torch.autograd.Function):
    """autograd.Function over (hidden [N, H], weight [V, H], bias [V] or None)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, temperature, ignore_index, need_entropy,
                options):
        stash = None
        if options.stash_logits and ctx.needs_input_grad[1]:
            stash = _stash_buffer(weight, int((labels != ignore_index).sum()),
                                  _cdtype(hidden, weight, bias), options)
        logp, entropy, rows, m, logs, ent = linear_logprobs_cpu_forward(
            hidden, weight, bias, labels, temperature, ignore_index, need_entropy, options,
            stash)
        ctx.stash = stash
        return _finish_forward(ctx, (hidden, weight, bias, labels, rows, m, logs, ent), logp,
                               entropy, temperature, need_entropy, options)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_lp, g_ent):
        hidden, weight, bias, labels, rows, m, logs, ent = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        # the stash is used up (it becomes grad_weight): a second backward (retain_graph)
        # recomputes every tile into a fresh buffer
        stash, ctx.stash = ctx.stash, None
        gh, gw, gb = linear_logprobs_cpu_backward(
            hidden, weight, bias, labels, rows, m, logs, ent, g_lp,
            g_ent if ctx.need_entropy else None, ctx.temperature,
            need_h, need_w, need_b and bias is not None, ctx.options,
            stash if need_w else None)
        return gh, gw, gb, None, None, None, None, None


def linear_logprobs_cpu(hidden, weight, labels, bias=None, temperature=1.0, ignore_index=-100,
                        return_entropy=False, options: ChunkOptions = DEFAULT_OPTIONS):
    """Unvalidated op: hidden [N, H], weight [V, H], labels [N] -> (logp [N], entropy [N])."""
    return LinearLogprobsCPU.apply(hidden, weight, bias, labels, float(temperature),
                                   int(ignore_index), bool(return_entropy), options)
