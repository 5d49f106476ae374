"""The per-token policy loss and its derivative in the token's log-prob, in closed form:
what the fused op (fused_cpu.py, fused_triton.py) turns into dL/dlogp and dL/dentropy for
each chunk of rows before it forms dL/dz (docs/training.md "The update"; the trainer's
unfused form is sharpo_train/step/losses.py, which the tests hold this against).

Per scored token i, with weight w_i (the trainer's aggregation: `token_weights`, summing
to 1 over a mini-batch), r_i = exp(logp_i - old_i) and A_i its effective advantage:

    pg_i  = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))           (PPO-clip)
    kl_i  = clip(exp(d) - d - 1, -10, 10),  d = clip(ref_i - logp_i, -20, 20)   (k3)
    L     = sum_i w_i (pg_i + kl_coef kl_i - entropy_coef H_i)

and the derivatives autograd takes through those torch expressions (so the fused gradient
is the unfused one, ties and clip boundaries included):

    dpg/dlogp = -A r   where -A r >= -A clip(r), else 0

(torch.maximum splits a tie's gradient, but the two sides tie only where r = clip(r),
i.e. lo <= r <= hi, where clip's derivative is 1 (bounds inclusive) and both sides give
-A r; where the clipped side is strictly larger, r is outside the range and clip's
derivative is 0)
    dkl/dlogp = -(exp(d) - 1) [-20 <= ref - logp <= 20] [-10 <= exp(d) - d - 1 <= 10]
    dL/dH     = -w entropy_coef
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["LossTerms", "chunk_terms", "token_terms"]


@dataclass(frozen=True)
class LossTerms:
    """The scalars of the loss: clip_low/clip_high (eps_low, eps_high), kl_coef (used only
    with a ref_logp), entropy_coef."""
    clip_low: float
    clip_high: float
    kl_coef: float
    entropy_coef: float


def token_terms(logp: torch.Tensor, entropy: Optional[torch.Tensor], old_logp: torch.Tensor,
                adv: torch.Tensor, weights: torch.Tensor, ref_logp: Optional[torch.Tensor],
                terms: LossTerms):
    """[R] each (the computation dtype; entropy None when entropy_coef is 0) -> (weighted
    loss sum of these rows (0-dim), g_logp [R] = dL/dlogp, g_ent [R] = dL/dH or None)."""
    ratio = torch.exp(logp - old_logp)
    lo, hi = 1.0 - terms.clip_low, 1.0 + terms.clip_high
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(lo, hi)
    pg = torch.maximum(unclipped, clipped)
    g = torch.where(unclipped >= clipped, unclipped, torch.zeros_like(pg))   # d(-A r) = -A r
    total = pg
    if ref_logp is not None and terms.kl_coef:
        raw = ref_logp - logp
        d = raw.clamp(-20.0, 20.0)
        k = torch.exp(d) - d - 1.0
        kl = k.clamp(-10.0, 10.0)
        inside = (raw >= -20.0) & (raw <= 20.0) & (k >= -10.0) & (k <= 10.0)
        g = g + terms.kl_coef * torch.where(inside, 1.0 - torch.exp(d), torch.zeros_like(d))
        total = total + terms.kl_coef * kl
    g_ent = None
    if terms.entropy_coef:
        total = total - terms.entropy_coef * entropy
        g_ent = -terms.entropy_coef * weights
    loss = (weights * total).sum()
    return loss, weights * g, g_ent


def chunk_terms(logp: torch.Tensor, entropy: Optional[torch.Tensor], r0: int, r1: int,
                old_logp: torch.Tensor, adv: torch.Tensor, weights: torch.Tensor,
                ref_logp: Optional[torch.Tensor], terms: LossTerms, logp_out: torch.Tensor,
                entropy_out: Optional[torch.Tensor]):
    """token_terms for rows [r0, r1) of a chunked pass (logp, entropy: that chunk's [R];
    old_logp, adv, weights, ref_logp: every row's [N]). Stores the chunk's log-probs (and
    entropies when entropy_out is given) into logp_out/entropy_out [N]; returns token_terms'
    (loss part, g_logp, g_ent)."""
    out = token_terms(logp, entropy, old_logp[r0:r1], adv[r0:r1], weights[r0:r1],
                      None if ref_logp is None else ref_logp[r0:r1], terms)
    logp_out[r0:r1] = logp
    if entropy_out is not None:
        entropy_out[r0:r1] = entropy
    return out
