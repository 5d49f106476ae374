"""`linear_policy_loss`: the trainer's clipped GRPO/SHARPO surrogate on top of the lm_head,
its value and gradients formed in one chunked pass (docs/api.md "linear_policy_loss").

    linear_policy_loss(hidden, weight, labels, advantages, old_logp, *, weights=None,
                       bias=None, clip_low=0.2, clip_high=None, ref_logp=None, kl_coef=0.0,
                       entropy_coef=0.0, temperature=1.0, ignore_index=-100,
                       return_entropy=False, backend=None, check_finite=None,
                       allow_tf32=False, options=None) -> PolicyLoss(loss, logp, entropy)

The forward computes the loss and, chunk by chunk over rows, every gradient it will need
(fused_cpu.py / fused_triton.py: 3 GEMMs with a trainable head, 2 with a frozen one, never
an [N, V] tensor); the backward only scales the stored gradients by the upstream scalar.
Backends: "cpu" (CPU tensors), "triton" (CUDA tensors; CPU tensors under
TRITON_INTERPRET=1), "torch" (linear_logprobs' float64-capable reference then the same
loss through autograd: holds [N, V]).
"""
from __future__ import annotations

import numbers
import math
from typing import NamedTuple, Optional

import torch

from .. import _backend
from ..logprobs.checks import (check_finite_linear, check_label_values, check_labels,
                               check_linear, check_scalars, resolve_check_finite)
from ..logprobs.grads import linear_grads
from ..logprobs.reference import linear_logprobs_reference
from .fused_cpu import DEFAULT_FUSED, FusedOptions, fused_policy_loss_chunked
from .token_terms import LossTerms, token_terms

__all__ = ["linear_policy_loss", "PolicyLoss", "LinearPolicyLoss"]


class PolicyLoss(NamedTuple):
    """loss: 0-dim, differentiable w.r.t. hidden, weight, bias. logp, entropy: [...] (the
    labels' shape), detached, 0 at ignore_index rows; entropy zeros unless asked for or
    entropy_coef != 0. fp32 (fp64 for fp64 inputs on the cpu/torch backends)."""
    loss: torch.Tensor
    logp: torch.Tensor
    entropy: torch.Tensor


def _real(name: str, x, lo: float = -math.inf, hi: float = math.inf,
          lo_open: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {type(x).__name__}")
    x = float(x)
    if not math.isfinite(x) or x < lo or x > hi or (lo_open and x == lo):
        raise ValueError(f"{name}: must be finite and in {'(' if lo_open else '['}{lo:g}, "
                         f"{hi:g}], got {x:g}")
    return x


def _per_token(name: str, t, labels: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name}: expected a floating tensor, got {t.dtype}")
    if tuple(t.shape) != tuple(labels.shape):
        raise ValueError(f"{name}: expected the labels' shape {tuple(labels.shape)}, got "
                         f"{tuple(t.shape)}")
    if t.device != labels.device:
        raise ValueError(f"{name}: expected device {labels.device}, got {t.device}")


class LinearPolicyLoss(torch.autograd.Function):
    """autograd.Function over (hidden [N, H], weight [V, H], bias [V] or None); the other
    tensors are constants (no gradient)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, old, adv, wts, ref, terms, temperature,
                ignore_index, need_entropy, backend, options, tf32):
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        need_b = need_b and bias is not None
        rows = (labels != ignore_index).nonzero().squeeze(1)
        lab, old, adv, wts = (t.index_select(0, rows) for t in (labels, old, adv, wts))
        ref = None if ref is None else ref.index_select(0, rows)
        args = (hidden, weight, bias, rows, lab, old, adv, wts, ref, terms, temperature,
                need_entropy, need_h, need_w, need_b, options)
        if backend == "triton":
            from .fused_triton import fused_policy_loss_triton
            loss, lp, ent, gh, gw, gb = fused_policy_loss_triton(*args, tf32=tf32)
        else:
            loss, lp, ent, gh, gw, gb = fused_policy_loss_chunked(*args)
        ctx.grads = linear_grads(hidden, weight, bias, rows, gh, gw, gb)
        logp = torch.zeros(labels.shape, dtype=lp.dtype, device=lp.device).index_copy_(
            0, rows, lp)
        entropy = torch.zeros_like(logp)
        if ent is not None:
            entropy.index_copy_(0, rows, ent)
        ctx.mark_non_differentiable(logp, entropy)
        return loss, logp, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g, _g_logp, _g_ent):
        grads, ctx.grads = ctx.grads, None
        if grads is None:
            raise RuntimeError("linear_policy_loss: backward ran twice; the gradients were "
                               "formed in the forward and are used up by the first backward "
                               "(retain_graph is not supported)")
        out = [None if t is None else t.mul_(g.to(t.dtype)) for t in grads]
        return (*out, *([None] * 12))


def linear_policy_loss(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
                       advantages: torch.Tensor, old_logp: torch.Tensor, *,
                       weights: Optional[torch.Tensor] = None,
                       bias: Optional[torch.Tensor] = None, clip_low: float = 0.2,
                       clip_high: Optional[float] = None,
                       ref_logp: Optional[torch.Tensor] = None, kl_coef: float = 0.0,
                       entropy_coef: float = 0.0, temperature: float = 1.0,
                       ignore_index: int = -100, return_entropy: bool = False,
                       backend: Optional[str] = None, check_finite: Optional[bool] = None,
                       allow_tf32: bool = False,
                       options: Optional[FusedOptions] = None) -> PolicyLoss:
    """The PPO-clip surrogate of linear_logprobs(hidden, weight, labels) with its KL and
    entropy terms, aggregated with per-token weights, without an [N, V] tensor:

        loss = sum_i w_i [max(-A_i r_i, -A_i clip(r_i, 1 - clip_low, 1 + clip_high))
                          + kl_coef k3(ref_i, logp_i) - entropy_coef H_i]

    r_i = exp(logp_i - old_i); k3 as the trainer's kl_low_var (sharpo_train/step/losses.py).

    Args:
        hidden [..., H], weight [V, H], labels [...], bias [V] or None: as linear_logprobs.
        advantages, old_logp: [...] float (the per-token effective advantages,
            segment_advantage's output, and the behaviour policy's log-probs).
        weights: [...] float, the aggregation (the trainer's token_weights); None:
            token-mean over the rows whose label is not ignore_index.
        clip_low: eps_low in (0, 1); clip_high: eps_high > 0 (None: clip_low).
        ref_logp: [...] float or None; kl_coef >= 0 needs it when nonzero.
        entropy_coef: the entropy bonus weight (any sign; the loss subtracts it).
        temperature, ignore_index, backend, check_finite, allow_tf32: as linear_logprobs.
        return_entropy: compute the entropy for the output even when entropy_coef is 0.
        options: FusedOptions (row chunk size), None for the default.

    Returns:
        PolicyLoss(loss, logp, entropy): see PolicyLoss. The gradient w.r.t. advantages,
        old_logp, weights and ref_logp is not formed (they are constants of the loss).
    """
    check_linear(hidden, weight, bias)
    temperature, ignore_index = check_scalars(temperature, ignore_index, return_entropy)
    check_labels(labels, hidden.shape[:-1], hidden.device)
    for name, t in (("advantages", advantages), ("old_logp", old_logp), ("weights", weights),
                    ("ref_logp", ref_logp)):
        if t is not None or name in ("advantages", "old_logp"):
            _per_token(name, t, labels)
    clip_low = _real("clip_low", clip_low, 0.0, 1.0, lo_open=True)
    if clip_low >= 1.0:
        raise ValueError(f"clip_low: must be below 1 (the ratio's lower bound 1 - clip_low "
                         f"> 0), got {clip_low:g}")
    clip_high = clip_low if clip_high is None else _real("clip_high", clip_high, 0.0,
                                                         lo_open=True)
    kl_coef = _real("kl_coef", kl_coef, 0.0)
    entropy_coef = _real("entropy_coef", entropy_coef)
    if kl_coef and ref_logp is None:
        raise ValueError(f"ref_logp: kl_coef={kl_coef:g} needs the reference log-probs")
    if not isinstance(allow_tf32, bool):
        raise TypeError(f"allow_tf32: expected a bool, got {type(allow_tf32).__name__}")
    if options is not None and not isinstance(options, FusedOptions):
        raise TypeError(f"options: expected a FusedOptions, got {type(options).__name__}")
    check_finite = resolve_check_finite(check_finite, hidden.device)
    name = _backend.resolve_backend(backend, hidden.device,
                                    _backend.OP_BACKENDS["linear_policy_loss"])
    if name == "triton" and hidden.dtype == torch.float64:   # weight, bias: hidden's dtype
        raise TypeError("hidden: the triton backend takes float32/bfloat16/float16, got "
                        "torch.float64 (use backend='cpu' or 'torch')")
    lead = labels.shape
    hidden2 = hidden.reshape(-1, hidden.shape[-1])
    labels2 = labels.reshape(-1).long()
    flat = [None if t is None else t.reshape(-1)
            for t in (advantages, old_logp, weights, ref_logp)]
    terms = LossTerms(clip_low, clip_high, kl_coef if ref_logp is not None else 0.0,
                      entropy_coef)
    loss, logp, entropy = _dispatch(name, hidden2, weight, bias, labels2, *flat, terms,
                                    temperature, ignore_index,
                                    return_entropy or bool(entropy_coef), check_finite,
                                    allow_tf32, options or DEFAULT_FUSED)
    return PolicyLoss(loss, logp.reshape(lead), entropy.reshape(lead))


@torch.compiler.disable
def _dispatch(backend, hidden, weight, bias, labels, adv, old, wts, ref, terms, temperature,
              ignore_index, need_entropy, check_finite, tf32, options):
    check_label_values(labels, weight.shape[0], ignore_index)
    if check_finite:
        check_finite_linear(hidden, weight, bias, labels, ignore_index, temperature)
    scored = labels != ignore_index
    if wts is None:
        wts = scored.to(torch.float32) / scored.sum().clamp(min=1)
    if backend == "torch":
        return _reference(hidden, weight, bias, labels, adv, old, wts, ref, terms, temperature,
                          ignore_index, need_entropy, scored)
    return LinearPolicyLoss.apply(hidden, weight, bias, labels, old, adv, wts, ref, terms,
                                  temperature, ignore_index, need_entropy, backend, options,
                                  tf32)


def _reference(hidden, weight, bias, labels, adv, old, wts, ref, terms, temperature,
               ignore_index, need_entropy, scored):
    """The `torch` backend: linear_logprobs' reference ([N, V] in memory), then the same
    per-token loss through autograd (token_terms' value; its closed-form gradients unused)."""
    lp, ent = linear_logprobs_reference(hidden, weight, labels, bias=bias,
                                        temperature=temperature, ignore_index=ignore_index,
                                        return_entropy=True)
    rows = scored.nonzero().squeeze(1)
    dt = lp.dtype
    pick = [None if t is None else t.index_select(0, rows).to(dt)
            for t in (old, adv, wts, ref)]
    loss, _, _ = token_terms(lp.index_select(0, rows), ent.index_select(0, rows), *pick[:3],
                             pick[3], terms)
    entropy = ent.detach() if need_entropy else torch.zeros_like(lp.detach())
    return loss, lp.detach(), entropy
