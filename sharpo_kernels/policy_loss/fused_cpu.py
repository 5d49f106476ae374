"""The `cpu` (and `torch`-device-agnostic) chunked path of `linear_policy_loss`: the loss and
its gradients in one pass over chunks of rows, 3 matrix products per chunk and no [N, V]
tensor (docs/api.md "linear_policy_loss"; the math of each tile: logprobs/cpu_tiles.py).

Per chunk of R scored rows (R from `FusedOptions.chunk_bytes`, the whole vocabulary at once:
the softmax of a row must be complete before its dL/dz exists):

    z     = h_c W^T (+ b)                          [R, V]   GEMM 1
    d     = (z - m) / T,  s = sum exp(d)  (t = sum exp(d) d with the entropy)
    logp  = d_y - log s,  H = log s - t / s
    g_lp, g_H = dL/dlogp, dL/dH                    [R]      token_terms.py
    dz    = g_lp onehot(y) / T - exp(d) (c1 + c2 d)         (cpu_tiles.py's form)
    grad_h[c]  = dz W                              [R, H]   GEMM 2 (skipped: hidden frozen)
    grad_W    += dz^T h_c                          [V, H]   GEMM 3 (skipped: head frozen)
    grad_b    += sum_rows dz

against the unfused path's forward GEMM, backward recompute and 2 backward GEMMs.

The statistics take one read of z for the row max and one pass over cache-sized column
blocks (`_row_stats_`). Without an entropy bonus c2 = 0, so dz is a row scale of exp(d)
plus the label's term: the tile keeps exp(d), the row scale goes onto the [R, H] operands
and the label's term is R rows gathered or added (`_products`), with no pass over the
tile beyond the products. With an entropy bonus dz is formed in place of d
(`_dlogits_`).

With a frozen head (only grad_h wanted) and no entropy bonus, dL/dh_i = g_lp_i J_i with
linear_logprobs' frozen-head direction J (logprobs/linear_frozen.py): its cache-sized
vocabulary tiles give 2 GEMMs (logits, exp(d) W) and never hold an [R, V] tile
(`_frozen_head_loss`). An entropy bonus has another direction: the chunked pass (2 GEMMs
too: logits, dz W).

Memory: one [R, V] tile in the computation dtype (and a 4 MiB block for the entropy's sums), the
[V, H] gradient the backward would allocate anyway, and for bf16/fp16 inputs an fp32 copy
of the weight.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import torch

from ..logprobs.cpu_tiles import _NEG_CLAMP, DEFAULT_OPTIONS, _cdtype
from ..logprobs.linear_cpu import frozen_rows_forward
from .token_terms import LossTerms, chunk_terms, token_terms

__all__ = ["FusedOptions", "DEFAULT_FUSED", "fused_policy_loss_chunked", "chunk_rows",
           "frozen_head_case", "frozen_head_terms"]


@dataclass(frozen=True)
class FusedOptions:
    """chunk_bytes: bytes of one [rows, V] tile in the computation dtype (fp32 logits on
    the GPU path); the rows per chunk follow from it (at least 1). None: 1 GiB on a GPU;
    on the CPU a quarter of the [N, V] logits naive torch would hold, between 256 MiB and
    1 GiB (N <= ~1770 at V = 151936 in fp32 gets 256 MiB, N >= ~7070 1 GiB): above the
    floor ~10% of naive torch's working memory (about 2.6 [N, V] logits: logits, softmax,
    dL/dz); below it the tile is at most the whole [N, V] logits. Every chunk adds its share into the fp32 [V, H] grad_weight (a read and a
    write of it), so larger chunks trade tile memory for less of that traffic: on the
    CPU a 1 GiB tile against 256 MiB saves ~6% of the call at N = 8192, H = 896 (results/
    policy_loss.md); on a GPU a chunk's products (2 R V H FLOPs each) only outlast the
    accumulator's 8 V H bytes beyond about 4 peak / bandwidth rows (~800 on an
    H100/H200)."""
    chunk_bytes: Optional[int] = None

    def __post_init__(self):
        if self.chunk_bytes is not None and (
                isinstance(self.chunk_bytes, bool) or not isinstance(self.chunk_bytes, int)
                or self.chunk_bytes <= 0):
            raise ValueError(f"chunk_bytes: expected a positive int or None, got "
                             f"{self.chunk_bytes!r}")

    def budget(self, device: torch.device, logits_bytes: int = 0) -> int:
        """The tile's bytes; logits_bytes: those of the whole [N, V] logits in the
        computation dtype (0: unknown, the CPU's floor of 256 MiB)."""
        if self.chunk_bytes is not None:
            return self.chunk_bytes
        if device.type == "cuda":
            return 1 << 30
        return min(1 << 30, max(256 << 20, logits_bytes // 4))


DEFAULT_FUSED = FusedOptions()


def chunk_rows(nv: int, v: int, elem_bytes: int, options: FusedOptions,
               device: torch.device) -> int:
    """Rows per chunk: as many [., V] rows as fit in the budget (FusedOptions.budget of the
    nv rows' logits), at least 1, at most nv."""
    row = max(1, v * elem_bytes)
    return max(1, min(max(nv, 1), options.budget(device, nv * row) // row))


_BLOCK_BYTES = 4 << 20      # column blocks of the entropy sums: a [R, cb] workspace, not [R, V]


def _column_blocks(rows: int, v: int, elem_bytes: int):
    cb = max(1, min(v, _BLOCK_BYTES // max(1, rows * elem_bytes)))
    return [(c0, min(v, c0 + cb)) for c0 in range(0, v, cb)], cb


def _row_stats_(z: torch.Tensor, lab: torch.Tensor, temperature: float, need_entropy: bool,
                keep_d: bool):
    """z [R, V] raw logits, clobbered. -> (logp, entropy or None, logs, e).

    One read for the row max, then one pass over column blocks of z (cache-sized, so each
    logit leaves memory once more and comes back once): d = (z - m) / T, s = sum exp(d)
    and, with the entropy, d clamped and t = sum exp(d) d through a small workspace. z ends
    as e = exp(d) (no entropy, or keep_d False: dL/dz needs exp(d) only) or as d (keep_d
    True: `_dlogits_` needs d and recomputes exp(d) block by block); e is None then."""
    xy = z.gather(1, lab.unsqueeze(1)).squeeze(1)
    m = z.amax(1)
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)   # an all -inf row: NaN logp
    mc = m.unsqueeze(1)
    blocks, cb = _column_blocks(*z.shape, z.element_size())
    s = torch.zeros(z.shape[0], dtype=z.dtype)
    t = torch.zeros_like(s) if need_entropy else None
    ws = torch.empty(z.shape[0] * cb, dtype=z.dtype) if need_entropy else None
    for c0, c1 in blocks:
        db = z[:, c0:c1].sub_(mc)
        if temperature != 1.0:
            db.div_(temperature)
        if not need_entropy:
            s += db.exp_().sum(1)
            continue
        db.clamp_(min=_NEG_CLAMP)                                 # exp = 0 there, e * d finite
        eb = torch.exp(db, out=ws[:db.numel()].view(db.shape))
        s += eb.sum(1)
        if keep_d:
            t += eb.mul_(db).sum(1)
        else:
            t += db.mul_(eb).sum(1)
            db.copy_(eb)                                          # z holds e from here on
    e = None if need_entropy and keep_d else z
    logs = s.log()
    logp = (xy - m) / temperature - logs
    ent = logs - t / s if need_entropy else None
    return logp, ent, logs, e


def _dlogits_(d: torch.Tensor, lab: torch.Tensor, logs: torch.Tensor, ent: torch.Tensor,
              g_lp: torch.Tensor, g_ent: torch.Tensor, temperature: float) -> torch.Tensor:
    """dL/dz [R, V] in place of d, with a differentiated entropy: cpu_tiles._tile_grad_'s
    exp(d) (c1 + c2 d) form (exp(d) recomputed block by block) plus the label's g_lp / T."""
    scale = -torch.exp(-logs) / temperature                       # -1 / (s T)
    c1 = (scale * (g_lp - g_ent * (logs - ent))).unsqueeze(1)
    c2 = (scale * g_ent).unsqueeze(1)
    blocks, cb = _column_blocks(*d.shape, d.element_size())
    ws = torch.empty(d.shape[0] * cb, dtype=d.dtype)
    for c0, c1_ in blocks:
        db = d[:, c0:c1_]
        eb = torch.exp(db, out=ws[:db.numel()].view(db.shape))
        db.mul_(c2).add_(c1).mul_(eb)
    return d.scatter_add_(1, lab.unsqueeze(1), (g_lp / temperature).unsqueeze(1))


def _products(dz, row_scale, lab, lab_coef, hc, wf, gh_c, gw, gb, first: bool):
    """The chunk's gradient products with dL/dz = row_scale[:, None] * dz + lab_coef at
    (row, lab): the row scale moves onto the [R, H] side (no pass over the [R, V] tile) and
    the label's term is a gather / index_add of R rows. row_scale, lab_coef None: dz is
    dL/dz as it is. gh_c [R, H] (or None) is written; gw [V, H] (or None) is written on
    the first chunk and accumulated after; gb [V] (or None) is accumulated."""
    if gh_c is not None:
        torch.mm(dz, wf, out=gh_c)
        if row_scale is not None:
            gh_c.mul_(row_scale.unsqueeze(1)).add_(wf.index_select(0, lab)
                                                   * lab_coef.unsqueeze(1))
    if gw is not None:
        hs = hc if row_scale is None else hc * row_scale.unsqueeze(1)
        if first:
            torch.mm(dz.t(), hs, out=gw)
        else:
            gw.addmm_(dz.t(), hs)
        if row_scale is not None:
            gw.index_add_(0, lab, hc * lab_coef.unsqueeze(1))
    if gb is not None:
        gb += dz.sum(0) if row_scale is None else torch.mv(dz.t(), row_scale)
        if row_scale is not None:
            gb.index_add_(0, lab, lab_coef)


def fused_policy_loss_chunked(hidden, weight, bias, rows, lab, old, adv, wts, ref,
                              terms: LossTerms, temperature: float, need_entropy: bool,
                              need_h: bool, need_w: bool, need_b: bool,
                              options: FusedOptions = DEFAULT_FUSED):
    """hidden [N, H], weight [V, H], bias [V] or None; rows [NV] (scored rows), lab, old,
    adv, wts, ref [NV] (ref None: no KL term).

    Returns (loss 0-dim, logp [NV], entropy [NV] or None, gh [NV, H] or None, gw [V, H]
    or None, gb [V] or None), all in the computation dtype (fp64 for fp64 inputs, else
    fp32); gh/gw/gb None where not needed.
    """
    if frozen_head_case(need_h, need_w, need_b, terms):
        return _frozen_head_loss(hidden, weight, bias, rows, lab, old, adv, wts, ref, terms,
                                 temperature, need_entropy, options)
    v, h = weight.shape
    dt = _cdtype(hidden, weight, bias)
    nv = rows.numel()
    wf = weight.to(dt)
    bf = None if bias is None else bias.to(dt)
    hv = hidden.index_select(0, rows).to(dt)
    old, adv, wts = old.to(dt), adv.to(dt), wts.to(dt)
    ref = None if ref is None else ref.to(dt)
    loss = torch.zeros((), dtype=dt)
    logp = torch.empty(nv, dtype=dt)
    ent_all = torch.empty(nv, dtype=dt) if need_entropy else None
    gh = torch.empty(nv, h, dtype=dt) if need_h else None
    gw = (torch.zeros if nv == 0 else torch.empty)(v, h, dtype=dt) if need_w else None
    gb = torch.zeros(v, dtype=dt) if need_b else None
    rc = chunk_rows(nv, v, torch.finfo(dt).bits // 8, options, hidden.device)
    z_buf = torch.empty(min(rc, nv) * v, dtype=dt)
    for r0 in range(0, nv, rc):
        r1 = min(nv, r0 + rc)
        hc, lc = hv[r0:r1], lab[r0:r1]
        z = z_buf[:(r1 - r0) * v].view(r1 - r0, v)
        if bf is None:
            torch.mm(hc, wf.t(), out=z)
        else:
            torch.addmm(bf, hc, wf.t(), out=z)
        lp, ent, logs, e = _row_stats_(z, lc, temperature, need_entropy,
                                       bool(terms.entropy_coef))
        part, g_lp, g_ent = chunk_terms(lp, ent, r0, r1, old, adv, wts, ref, terms, logp,
                                       ent_all if need_entropy else None)
        loss += part
        if not (need_h or need_w or need_b):
            continue
        gh_c = gh[r0:r1] if need_h else None
        if g_ent is None:        # dL/dz = -exp(d) g_lp / (s T) + (g_lp / T) onehot(y)
            _products(e, -torch.exp(-logs) * g_lp / temperature, lc, g_lp / temperature, hc,
                      wf, gh_c, gw, gb, r0 == 0)
        else:
            _products(_dlogits_(z, lc, logs, ent, g_lp, g_ent, temperature), None, lc, None,
                      hc, wf, gh_c, gw, gb, r0 == 0)
    return loss, logp, ent_all, gh, gw, gb


def _frozen_head_loss(hidden, weight, bias, rows, lab, old, adv, wts, ref, terms: LossTerms,
                      temperature: float, need_entropy: bool, options: FusedOptions):
    """The frozen-head case of fused_policy_loss_chunked (same arguments and returns; gw, gb
    None): linear_logprobs' frozen-head forward over its tiles (2 GEMMs; a tile of at most
    min(64 MiB, chunk_bytes)), then `frozen_head_terms`."""
    tiles = replace(DEFAULT_OPTIONS, tile_bytes=min(DEFAULT_OPTIONS.tile_bytes,
                                                    options.budget(hidden.device)))
    logp, ent, j = frozen_rows_forward(hidden, weight, bias, rows, lab, temperature,
                                       need_entropy, tiles)
    return frozen_head_terms(logp, ent, j, old, adv, wts, ref, terms)


def frozen_head_case(need_h: bool, need_w: bool, need_b: bool, terms: LossTerms) -> bool:
    """Only grad_hidden is wanted and the entropy has no bonus (the LoRA default): each
    backend then takes its linear_logprobs frozen-head forward and `frozen_head_terms`."""
    return need_h and not (need_w or need_b or terms.entropy_coef)


def frozen_head_terms(logp, ent, j, old, adv, wts, ref, terms: LossTerms):
    """Either backend's frozen-head case after its linear_logprobs frozen-head forward
    (logp, entropy or None [NV], the direction J [NV, H]): the loss's g_lp on every row at
    once, then grad_h = g_lp[:, None] * J written over J. -> the 6 results of
    fused_policy_loss_chunked (gw, gb None)."""
    dt = j.dtype
    loss, g_lp, _ = token_terms(logp, ent, old.to(dt), adv.to(dt), wts.to(dt),
                                None if ref is None else ref.to(dt), terms)
    return loss, logp, ent, j.mul_(g_lp.unsqueeze(1)), None, None
