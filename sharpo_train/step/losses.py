"""Policy loss pieces: pure functions on [B, L] tensors plus a 0/1 mask (verl style).

Policy losses are registered by name (``register_policy_loss``) and chosen by the config
key ``loss.policy_loss`` (default "ppo_clip"). A policy loss is
``fn(logp, old_logp, advantages, loss_cfg) -> (per-token loss [B, L], clipped [B, L] bool)``
(all [B, L]; ``loss_cfg`` is config.LossConfig); update.py aggregates it over the response
mask, so micro-batching stays exact.

- ``ppo_clip_loss``: PPO-clip per token, ratio = exp(logp - old_logp), clip range
  [1 - clip_low, 1 + clip_high] (clip-higher when clip_high > clip_low); returns the
  per-token loss max(-A r, -A clip(r)) and the clipped indicator.
- ``AUX_LOSSES`` (``register_aux_loss``): per-token loss terms an estimator hands the
  update (``CreditOutput.aux_loss``, e.g. SDAR's ``sdar_distill``); update.py adds
  ``coef * aggregate(term)`` to the policy loss (docs/estimators.md).
- ``kl_low_var``: k3 estimator of KL(pi || pi_ref) = exp(ref - logp) - (ref - logp) - 1,
  clamped to [-10, 10] as verl's "low_var_kl".
- ``token_weights`` + ``aggregate``: per-token weights of a whole mini-batch that sum to 1
  ("token-mean", "seq-mean-token-mean" or "traj-mean-token-mean"); a micro-batch's loss
  is ``sum(values * its rows' weights)``, so gradient accumulation gives exactly the
  gradient of the full mini-batch.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "traj-mean-token-mean")

POLICY_LOSSES: dict[str, Callable] = {}

# Extra per-token loss terms an estimator asks the update for (estimators.AuxLoss):
# ``fn(logp [b, L] with grad, **inputs [b, L], **params) -> per-token loss [b, L]``.
AUX_LOSSES: dict[str, Callable] = {}


def register_aux_loss(name: str):
    """Decorator: ``fn`` becomes the auxiliary loss term ``name`` (``AuxLoss.name``)."""
    def wrap(fn):
        AUX_LOSSES[name] = fn
        return fn
    return wrap


@register_aux_loss("sdar_distill")
def sdar_distill(logp: torch.Tensor, teacher_logp: torch.Tensor, weight: torch.Tensor,
                 beta: float = 5.0) -> torch.Tensor:
    """SDAR's gated distillation term (arXiv 2605.15155; docs/estimators.md), per token
    [b, L]: weight * sg(sigmoid(beta (log piT - sg log pi))) * (log piT - log pi).
    ``logp``: the current policy (the gradient flows through it only); ``teacher_logp``
    (detached) and ``weight`` (0/1: tokens of rows with a teacher) [b, L]."""
    if not (logp.shape == teacher_logp.shape == weight.shape):
        raise ValueError(f"teacher_logp/weight: expected the shape of logp {tuple(logp.shape)}, "
                         f"got {tuple(teacher_logp.shape)} / {tuple(weight.shape)}")
    t = teacher_logp.detach()
    gate = torch.sigmoid(beta * (t - logp.detach()))
    return weight * gate * (t - logp)


def register_policy_loss(name: str):
    """Decorator: ``fn(logp, old_logp, advantages, loss_cfg) -> (loss [B, L], clipped
    [B, L] bool)`` becomes the policy loss ``name`` (``loss.policy_loss``)."""
    def wrap(fn):
        POLICY_LOSSES[name] = fn
        return fn
    return wrap


def ppo_clip_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                  clip_low: float = 0.2, clip_high: Optional[float] = None,
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, L] each -> (per-token loss [B, L], clipped [B, L] bool)."""
    clip_high = clip_low if clip_high is None else clip_high
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(unclipped, clipped), clipped > unclipped


@register_policy_loss("ppo_clip")
def ppo_clip_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                         loss_cfg) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO-clip with ``loss.clip_ratio`` / ``loss.clip_ratio_high`` ([B, L] each)."""
    return ppo_clip_loss(logp, old_logp, advantages, loss_cfg.clip_ratio, loss_cfg.clip_ratio_high)


def kl_low_var(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """[B, L] -> [B, L] k3 KL estimate (non-negative, low variance)."""
    d = torch.clamp(ref_logp - logp, -20.0, 20.0)
    return torch.clamp(torch.exp(d) - d - 1.0, -10.0, 10.0)


def token_weights(mask: torch.Tensor, mode: str = "token-mean",
                  traj_index: Optional[torch.Tensor] = None) -> torch.Tensor:
    """[B, L] 0/1 mask of a whole mini-batch -> [B, L] loss weights that sum to 1 (0 off
    the mask), so ``(values * weights).sum()`` is the aggregated loss and any split of the
    rows into micro-batches adds up to exactly the full mini-batch's gradient.

    - "token-mean": every token counts the same (1 / tokens of the mini-batch).
    - "seq-mean-token-mean": mean over each row's tokens, then over rows.
    - "traj-mean-token-mean": mean over the tokens of each trajectory (all of its per-turn
      rows, ``traj_index`` [B]), then over trajectories. With per-turn rows a failed
      episode that runs to the turn limit has more tokens than a success that ends early;
      under "token-mean" the group's advantages (zero-sum per trajectory) then add up to a
      net push down on every sampled token. Weighting trajectories equally keeps the
      group's zero sum (docs/training.md, "Loss aggregation").
    """
    mask = mask.float()
    if mode == "token-mean":
        return mask / mask.sum().clamp(min=1.0)
    if mode == "seq-mean-token-mean":
        per_row = mask.sum(-1, keepdim=True)
        rows = (per_row > 0).sum().clamp(min=1)
        return mask / per_row.clamp(min=1.0) / rows
    if mode == "traj-mean-token-mean":
        if traj_index is None or traj_index.shape != mask.shape[:1]:
            raise ValueError("traj_index: traj-mean-token-mean needs one trajectory id per row "
                             f"([{mask.shape[0]}]), got "
                             f"{None if traj_index is None else list(traj_index.shape)}")
        _, inv = torch.unique(traj_index, return_inverse=True)
        per_traj = torch.zeros(int(inv.max()) + 1 if inv.numel() else 0).index_add_(
            0, inv, mask.sum(-1))
        trajs = (per_traj > 0).sum().clamp(min=1)
        return mask / per_traj[inv].clamp(min=1.0).unsqueeze(-1) / trajs
    raise ValueError(f"loss.agg: expected one of {AGGREGATIONS}, got {mode!r}")


def aggregate(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Scalar loss from [B, L] per-token values and ``token_weights`` rows [B, L]."""
    return (values * weights.to(values.dtype)).sum()
