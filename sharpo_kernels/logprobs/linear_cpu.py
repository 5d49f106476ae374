"""The `cpu` backend of `linear_logprobs`: hidden states [N, H] and the lm_head weight
[V, H] given, the logits made tile by tile and never held whole (with the logits stash of
`ChunkOptions.stash_logits`); the math and the tile sizing: cpu_tiles.py."""
from __future__ import annotations

from typing import Optional

import torch

from .cpu_tiles import (DEFAULT_OPTIONS, ChunkOptions, _cdtype, _finish_forward, _tile_grad_,
                        _tile_sums_, _valid_rows, _Workspace)
from .grad_filter import kept_columns, row_thresholds
from .grads import linear_grads
from .linear_frozen import (frozen_head, frozen_head_backward, frozen_head_finish,
                            frozen_head_forward)
from .online_lse import online_lse_rescale

__all__ = ["linear_logprobs_cpu", "linear_logprobs_cpu_forward", "linear_logprobs_cpu_backward"]


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


def _outputs(hidden, weight, bias, labels, ignore_index: int):
    """-> (computation dtype, logp [N] zeros, entropy [N] zeros, the scored rows)."""
    dt = _cdtype(hidden, weight, bias)
    n = hidden.shape[0]
    return (dt, torch.zeros(n, dtype=dt), torch.zeros(n, dtype=dt),
            _valid_rows(labels, ignore_index))


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
    v = weight.shape[0]
    dt, logp, entropy, rows = _outputs(hidden, weight, bias, labels, ignore_index)
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
    lp = ((xy - m) / temperature - logs).clamp_(max=0.0)    # log p <= 0 (docs/api.md)
    ent = logs - t / s if need_entropy else torch.zeros_like(logs)
    logp.index_copy_(0, rows, lp)
    if need_entropy:
        entropy.index_copy_(0, rows, ent)
    return logp, entropy, rows, m, logs, ent


class _CPUHeadSlices:
    """linear_frozen.HeadSlices on the CPU: each weight slice upcast once to the computation
    dtype, MKL products into the workspace."""

    def __init__(self, weight, bias, dt: torch.dtype, ws: _Workspace):
        self.weight, self.bias, self.dtype, self.ws = weight, bias, dt, ws
        self.wv = self.bv = None

    def load(self, v0: int, v1: int) -> None:
        self.wv = self.weight[v0:v1].to(self.dtype)
        self.bv = None if self.bias is None else self.bias[v0:v1].to(self.dtype)

    def logits(self, h):
        return _logits_tile(self.ws, h, self.wv, self.bv)

    def accumulate(self, acc, e):
        acc.addmm_(e, self.wv)

    def scratch(self, rows: int, cols: int):
        return self.ws.get("e", rows, cols)


def frozen_rows_forward(hidden, weight, bias, rows, lab, temperature: float,
                        need_entropy: bool, options: ChunkOptions = DEFAULT_OPTIONS):
    """linear_frozen.py's forward on the CPU over the scored rows `rows` [NV] with their
    labels `lab` [NV]: -> (logp [NV], entropy [NV] or None, J [NV, H]), in the computation
    dtype. Shared by linear_logprobs' frozen path and linear_policy_loss's."""
    dt = _cdtype(hidden, weight, bias)
    hv = hidden.index_select(0, rows).to(dt)
    rb, vb = _linear_tiles(max(rows.numel(), 1), weight.shape[0], dt, options)
    stats = frozen_head_forward(hv, lab, weight.shape[0],
                                _CPUHeadSlices(weight, bias, dt, _Workspace(dt)), rb, vb,
                                temperature, need_entropy)
    lp, ent, _, j = frozen_head_finish(weight, lab, *stats, temperature, need_entropy)
    return lp, ent, j


def linear_logprobs_cpu_frozen_forward(hidden, weight, bias, labels, temperature: float,
                                       ignore_index: int, need_entropy: bool,
                                       options: ChunkOptions = DEFAULT_OPTIONS):
    """The frozen-head forward (linear_frozen.py): as linear_logprobs_cpu_forward, and the
    gradient direction J [N_valid, H] of each scored row's log-prob w.r.t. its hidden state.

    Returns (logp [N], entropy [N], rows, J)."""
    dt, logp, entropy, rows = _outputs(hidden, weight, bias, labels, ignore_index)
    lp, ent, j = frozen_rows_forward(hidden, weight, bias, rows,
                                     labels.index_select(0, rows), temperature, need_entropy,
                                     options)
    logp.index_copy_(0, rows, lp)
    if need_entropy:
        entropy.index_copy_(0, rows, ent)
    return logp, entropy, rows, j


def linear_logprobs_cpu_backward(hidden, weight, bias, labels, rows, m_all, logs_all, ent_all,
                                 g_lp, g_ent, temperature: float, need_hidden: bool,
                                 need_weight: bool, need_bias: bool,
                                 options: ChunkOptions = DEFAULT_OPTIONS,
                                 stash: Optional[torch.Tensor] = None,
                                 grad_filter: float = 0.0):
    """(grad_hidden, grad_weight, grad_bias), each None when not needed, in input dtypes.
    grad_filter > 0: blocks of FILTER_BLOCK columns whose every |dL/dz| is negligible skip
    the grad_hidden and grad_weight products (grad_filter.py: the criterion and the bound).

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
        thr = row_thresholds(grad_filter, gl, ge, temperature) if grad_filter else None
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
                cols = None if thr is None else kept_columns(gq, thr[r0:r1])
                if cols is not None:            # some blocks negligible: products skip them
                    _filtered_products(gq, cols, wv, hv[r0:r1], gh, gw, gwv, gb, r0, r1,
                                       v0, v1, direct)
                    del z, gq
                    continue
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


def _filtered_products(gq, cols, wv, hv, gh, gw, gwv, gb, r0, r1, v0, v1, direct):
    """The backward's products of one tile on its kept columns `cols` only (grad_filter.py);
    grad_weight rows of skipped columns are 0 (written when direct, else not added to);
    grad_bias takes every column."""
    gk = gq.index_select(1, cols)
    if gh is not None:
        gh[r0:r1].addmm_(gk, wv.index_select(0, cols))
    if gw is not None:
        part = torch.mm(gk.t(), hv)
        if direct:
            gw[v0:v1].zero_().index_copy_(0, cols, part.to(gw.dtype))
        else:
            gwv.index_add_(0, cols, part)
    if gb is not None:
        gb[v0:v1] += gq.sum(0)


class LinearLogprobsCPU(torch.autograd.Function):
    """autograd.Function over (hidden [N, H], weight [V, H], bias [V] or None)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, temperature, ignore_index, need_entropy,
                options, frozen=False, grad_filter=0.0):
        # an output nobody uses gets None in backward, not zeros: no entropy backward then
        ctx.set_materialize_grads(False)
        ctx.frozen, ctx.grad_filter = frozen, grad_filter
        if frozen:                      # the head needs no gradient: 2 matmuls in all
            logp, entropy, rows, j = linear_logprobs_cpu_frozen_forward(
                hidden, weight, bias, labels, temperature, ignore_index, need_entropy,
                options)
            ctx.mark_non_differentiable(entropy)
            ctx.save_for_backward(hidden, rows, j)
            return logp, entropy
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
        if ctx.frozen:
            nones = (None,) * 9
            return (frozen_head_backward(ctx.saved_tensors, g_lp), *nones)
        hidden, weight, bias, labels, rows, m, logs, ent = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        if g_lp is None:                # only the entropy is used
            g_lp = torch.zeros(labels.shape, dtype=m.dtype)
        # the stash is used up (it becomes grad_weight): a second backward (retain_graph)
        # recomputes every tile into a fresh buffer
        stash, ctx.stash = ctx.stash, None
        gh, gw, gb = linear_logprobs_cpu_backward(
            hidden, weight, bias, labels, rows, m, logs, ent, g_lp,
            g_ent if ctx.need_entropy else None, ctx.temperature,
            need_h, need_w, need_b and bias is not None, ctx.options,
            stash if need_w else None, ctx.grad_filter)
        return gh, gw, gb, None, None, None, None, None, None, None


def linear_logprobs_cpu(hidden, weight, labels, bias=None, temperature=1.0, ignore_index=-100,
                        return_entropy=False, options: ChunkOptions = DEFAULT_OPTIONS,
                        entropy_grad: bool = True, grad_filter: float = 0.0):
    """Unvalidated op: hidden [N, H], weight [V, H], labels [N] -> (logp [N], entropy [N]).
    entropy_grad=False: the entropy comes back without a gradient (api.py); grad_filter:
    grad_filter.py (0: off)."""
    frozen = frozen_head(hidden, weight, bias, return_entropy, entropy_grad)
    logp, entropy = LinearLogprobsCPU.apply(hidden, weight, bias, labels, float(temperature),
                                            int(ignore_index), bool(return_entropy), options,
                                            frozen, float(grad_filter))
    if not entropy_grad:
        entropy = entropy.detach()
    return logp, entropy
