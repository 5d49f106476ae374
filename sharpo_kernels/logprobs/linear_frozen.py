"""The frozen-head path of `linear_logprobs` (docs/api.md, "Frozen head"): when the hidden
states need a gradient and the head (weight, bias) does not, the forward also forms each
row's gradient direction, and the backward is one elementwise product.

Each row's log-prob depends only on its own hidden state h_i, through z_i = W h_i + b:

    d logp_i / d h_i = (W[y_i] - sum_v p_iv W_v) / T  =:  J_i                [H]

so grad_h_i = g_i J_i for the upstream gradient g_i (docs/method.md's per-token loss
gradient). The sum sum_v p_iv W_v = A_i / s_i with A_i = sum_v exp(d_iv) W_v is formed
in the forward's single pass over the vocabulary, tile by tile (A += exp(d) @ W[v0:v1]),
rescaled with the same online step as s whenever the running max moves (online_lse.py,
the `acc` argument). Per tile: one logits matmul and one accumulate matmul, so the whole
op is 2 matmuls of N V H (naive torch with a frozen head: logits, then dz @ W; the
general path: logits, recomputed logits, dz @ W = 3). J is held in the computation
dtype, [N_valid, H] (fp32 for 16-bit inputs; 16 KiB a row at H = 4096).

The entropy's gradient has another direction (sum_v p_v (q_v + H) W_v): the path is
taken only when the entropy is not asked for or needs no gradient (api.py: return_entropy
with entropy_grad=False); otherwise the op keeps its general path.

`frozen_head_forward` is the loop, written once for the `cpu` backend (MKL products on
upcast weight slices, linear_cpu.py) and the `triton` backend (cuBLAS products with fp32
output on a GPU, linear_triton.py); a backend supplies the two products (`HeadSlices`).
"""
from __future__ import annotations

from typing import Optional, Protocol

import torch

from .cpu_tiles import _NEG_CLAMP
from .grads import linear_grads
from .online_lse import online_lse_rescale

__all__ = ["frozen_head", "frozen_head_forward", "frozen_head_finish", "frozen_head_backward",
           "HeadSlices"]


class HeadSlices(Protocol):
    """The two products of a backend, over one vocabulary slice at a time."""

    dtype: torch.dtype                              # the computation dtype (fp32 / fp64)

    def load(self, v0: int, v1: int) -> None:
        """Make vocabulary rows [v0, v1) of the head current."""

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """h [R, H] -> z [R, v1 - v0] in the computation dtype, a buffer the caller may
        overwrite."""

    def accumulate(self, acc: torch.Tensor, e: torch.Tensor) -> None:
        """acc [R, H] += e [R, v1 - v0] @ W[v0:v1], in the computation dtype."""

    def scratch(self, rows: int, cols: int) -> torch.Tensor:
        """A [rows, cols] buffer in the computation dtype (for exp(d) beside d)."""


def frozen_head(hidden, weight, bias, return_entropy: bool, entropy_grad: bool) -> bool:
    """The frozen-head path applies (linear_frozen.py): autograd is recording, hidden needs
    a gradient, the head does not, and the entropy is not asked for or needs no gradient."""
    return (torch.is_grad_enabled() and hidden.requires_grad and not weight.requires_grad
            and not (bias is not None and bias.requires_grad)
            and not (return_entropy and entropy_grad))


def frozen_head_forward(hv: torch.Tensor, lab: torch.Tensor, vocab: int, slices: HeadSlices,
                        row_tile: int, col_tile: int, temperature: float,
                        need_entropy: bool):
    """hv [NV, H] the scored hidden rows, lab [NV] their labels. Vocabulary tiles outer,
    row tiles inner (each head slice is loaded once).

    Returns (m, s, t, xy, acc): per row the raw max m, s = sum exp(d), t = sum exp(d) d
    (zeros without entropy), the raw label logit xy, and acc = sum_v exp(d_v) W_v [NV, H],
    all relative to the final m (cpu_tiles.py's notation, d = (z - m) / T)."""
    nv, h = hv.shape
    dt, dev = slices.dtype, hv.device
    m = torch.full((nv,), float("-inf"), dtype=dt, device=dev)
    s = torch.zeros(nv, dtype=dt, device=dev)
    t = torch.zeros(nv, dtype=dt, device=dev)
    xy = torch.full((nv,), float("nan"), dtype=dt, device=dev)
    acc = torch.zeros(nv, h, dtype=dt, device=dev)
    for v0 in range(0, vocab, col_tile):
        v1 = min(vocab, v0 + col_tile)
        slices.load(v0, v1)
        for r0 in range(0, nv, row_tile):
            r1 = min(nv, r0 + row_tile)
            z = slices.logits(hv[r0:r1])
            ll = lab[r0:r1] - v0
            ok = (ll >= 0) & (ll < v1 - v0)
            got = z.gather(1, ll.clamp(0, v1 - v0 - 1).unsqueeze(1)).squeeze(1)
            xy[r0:r1] = torch.where(ok, got, xy[r0:r1])
            m_new, m_ref, s_new, t_new = online_lse_rescale(
                m[r0:r1], s[r0:r1], t[r0:r1], z.amax(-1), temperature, acc=acc[r0:r1])
            d = z.sub_(m_ref.unsqueeze(1))
            if temperature != 1.0:
                d.div_(temperature)
            if need_entropy:
                d.clamp_(min=_NEG_CLAMP)        # exp = 0 there, and e * d stays finite
                e = torch.exp(d, out=slices.scratch(*d.shape))
                t_new += torch.mul(e, d, out=d).sum(-1)
            else:
                e = d.exp_()                    # exp(-inf) = 0: no clamp needed
            s_new += e.sum(-1)
            slices.accumulate(acc[r0:r1], e)
            m[r0:r1], s[r0:r1], t[r0:r1] = m_new, s_new, t_new
            del z, d, e
    return m, s, t, xy, acc


def frozen_head_finish(weight: torch.Tensor, lab: torch.Tensor, m, s, t, xy, acc,
                       temperature: float, need_entropy: bool):
    """-> (logp [NV] clamped to <= 0, entropy [NV] or None, logs [NV], J [NV, H]) from
    frozen_head_forward's statistics; J = (W[y] - acc / s) / T, in acc's dtype, written
    over acc."""
    logs = s.log()
    logp = ((xy - m) / temperature - logs).clamp_(max=0.0)
    ent = logs - t / s if need_entropy else None
    j = acc.div_(s.unsqueeze(1)).neg_().add_(weight.index_select(0, lab).to(acc.dtype))
    if temperature != 1.0:
        j.div_(temperature)
    return logp, ent, logs, j


def frozen_head_backward(saved: tuple,
                         g_lp: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """grad_hidden [N, H] in hidden's dtype: g_lp[rows, None] * J at the scored rows, 0 at
    the others (None when the log-prob had no upstream gradient). saved: the autograd
    Function's (hidden, rows, J)."""
    hidden, rows, j = saved
    if g_lp is None:
        return None
    gh = j * g_lp.index_select(0, rows).to(j.dtype).unsqueeze(1)
    return linear_grads(hidden, None, None, rows, gh, None, None)[0]
