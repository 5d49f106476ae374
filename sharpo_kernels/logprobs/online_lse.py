"""The online log-sum-exp step in torch, written once for the host side: the `cpu`
backend's vocabulary loop (linear_cpu.py) and the merge of the Triton launcher's
vocabulary splits (linear_triton.py) both rescale with it. Inside the Triton kernels the same step is
online_lse_triton.py (a Triton function cannot call torch); the two follow the same
formulas line for line, and every backend is tested against the float64 reference.

Running statistics per row over the vocabulary seen so far: m = raw max, s = sum exp(d),
t = sum exp(d) d with d = (x - m) / T (T the temperature). Moving the reference to
m' = max(m, block_max), with delta = (m' - m) / T, every old d becomes d - delta:

    s' = exp(-delta) s,    t' = exp(-delta) (t - delta s)

While every value seen is -inf (m = -inf) nothing has started: s = t = 0 and the reference
used for the new block's own terms is 0, not -inf, so no inf - inf appears.
"""
from __future__ import annotations

from typing import Optional

import torch

__all__ = ["online_lse_rescale"]


def online_lse_rescale(m: torch.Tensor, s: torch.Tensor, t: Optional[torch.Tensor],
                       block_max: torch.Tensor, temperature: float,
                       acc: Optional[torch.Tensor] = None):
    """Returns (m', m_ref, s', t'): m' = max(m, block_max) the new running max, m_ref the
    finite reference to subtract from the block (m', or 0 while m' is -inf), s' and t'
    rescaled to it (t' None when t is None: no entropy). Tensors of one shape (or
    broadcastable: the split merge passes [splits, N] statistics and an [N] block_max).

    acc: an optional running sum_v exp(d_v) W_v [N, H] (the frozen-head direction,
    linear_frozen.py), rescaled in place by the same exp(-delta) as s. It is 0 while
    nothing has started (every exp(d) so far was 0), so exp(-0) = 1 leaves it 0 there."""
    m_new = torch.maximum(m, block_max)
    m_ref = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
    started = m != float("-inf")
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    delta = torch.where(started, (m_ref - m) / temperature, zero)
    alpha = torch.exp(-delta)
    if t is not None:
        t = torch.where(started, alpha * (t - delta * s), zero)
    s = torch.where(started, alpha * s, zero)
    if acc is not None:
        acc.mul_(alpha.unsqueeze(-1))
    return m_new, m_ref, s, t
