"""TRL's log-prob passes through ``sharpo_kernels.linear_logprobs`` (docs/integrations.md,
"TRL: the fused log-prob path").

TRL 1.16's ``GRPOTrainer`` patches its policy's forward (``trl.trainer.utils.
add_fused_lm_head``): called with ``fused_lm_head=True`` and ``labels`` [b, S] it runs the
backbone and scores the next-token labels with a chunked head (``ChunkedLogProbFunction``,
[4096-token, 32768-vocabulary] fp32 tiles); on a CPU it scores every position, prompt and
padding included.
``add_linear_logprobs_head`` wraps that forward once more: the same call runs the backbone,
then ``linear_logprobs(hidden [b, S-1, H], lm_head.weight [V, H], labels [b, S-1],
bias=lm_head.bias)``: the [N, V] logits are never held, prompt and padding rows cost
nothing, and a head whose weight does not require grad (frozen, LoRA) gets the kernel's
frozen-head path. Every TRL pass goes through it: SHARPO's teacher pass, TRL's old
log-probs, its loss pass (with gradients) and the reference model's.

``head_refusal(model)`` says why a model cannot use it (None when it can); such a model
keeps TRL's head, with one log line naming the reason: logit soft-capping or a logit scale
in the config, an output head that is not a plain ``torch.nn.Linear`` (a custom or
quantised head, a LoRA adapter on the head), a sharded (DTensor) head, a vision-language
model. The same checks run on each call (FSDP and PEFT replace modules after the patch).
"""
from __future__ import annotations

import types
from typing import Callable, Optional

import torch

from sharpo_kernels import linear_logprobs

IGNORE = -100                                   # TRL's label for an unscored position


def _scale_refusal(text_config) -> Optional[str]:
    """The config fields TRL's head applies to the logits besides the linear layer."""
    cap = getattr(text_config, "final_logit_softcapping", None)
    if cap is not None:
        return f"its config sets final_logit_softcapping={cap} (logit soft-capping)"
    for name in ("logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling"):
        value = getattr(text_config, name, None)
        if value is not None and value != 1:
            return f"its config scales the logits ({name}={value})"
    return None


def head_refusal(model) -> Optional[str]:
    """Why ``model``'s log-probs cannot be ``linear_logprobs(hidden, lm_head.weight, ...)``
    (a sentence), or None when they can: the head must be a plain ``torch.nn.Linear`` with
    nothing applied to its logits."""
    config = model.config
    text_config = config.get_text_config()
    if text_config is not config:
        return "it is a vision-language model (only text-only causal LMs are covered)"
    reason = _scale_refusal(text_config)
    if reason:
        return reason
    head = model.get_output_embeddings()
    if head is None:
        return "it has no output embeddings (get_output_embeddings() is None)"
    if type(head).forward is not torch.nn.Linear.forward or not isinstance(head, torch.nn.Linear):
        return (f"its output head is a {type(head).__module__}.{type(head).__name__}, "
                f"not a plain torch.nn.Linear")
    if head._forward_hooks or head._forward_pre_hooks or "forward" in vars(head):
        return "its output head has forward hooks or a replaced forward"
    if type(head.weight).__name__ == "DTensor":
        return "its output head is sharded (DTensor: FSDP2)"
    if getattr(text_config, "output_router_logits", False):
        return "it returns router logits (MoE load-balancing loss)"
    return None


def add_linear_logprobs_head(model, temperature: float, cast_lm_head_to_fp32: bool,
                             want_entropy: Callable[[], bool], log: Callable[[str], None]) -> Optional[str]:
    """Wrap ``model.forward`` (already patched by TRL's ``add_fused_lm_head``) so that
    ``model(..., labels=labels, fused_lm_head=True)`` scores through ``linear_logprobs``.

    ``want_entropy()``: whether the current call needs the entropy (TRL's
    ``compute_entropy``). ``log(reason)``: called once, when a call falls back to TRL's head.
    -> the refusal reason at patch time (None: patched and in use), see ``head_refusal``.
    A call TRL makes with ``shift_labels`` (context parallelism) or asking for router
    logits goes to TRL's head.
    """
    reason = head_refusal(model)
    if reason is not None:
        log(reason)
        return reason
    trl_forward = model.forward
    logged = [False]

    def forward(self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None,
                **kwargs):
        why = None if fused_lm_head else "not a fused call"
        if why is None:
            why = ("shift_labels given (context parallelism)" if shift_labels is not None else
                   "router logits asked for" if kwargs.get("output_router_logits") else head_refusal(self))
        if why is not None:
            if fused_lm_head and not logged[0]:
                logged[0] = True
                log(why)
            return trl_forward(*args, fused_lm_head=fused_lm_head, labels=labels, shift_labels=shift_labels,
                               num_items_in_batch=num_items_in_batch, **kwargs)
        return _score(self, args, kwargs, labels, num_items_in_batch, temperature, cast_lm_head_to_fp32,
                      want_entropy())

    model.forward = types.MethodType(forward, model)
    return None


def _score(model, args, kwargs, labels, num_items_in_batch, temperature, cast_fp32, entropy):
    """The backbone, then ``linear_logprobs`` over positions [0, S-1) against labels [1, S):
    TRL's ``FusedCausalLMOutput`` (log_probs, entropy [b, S-1], 0 where the label is -100)."""
    from trl.trainer.utils import FusedCausalLMOutput

    kwargs["use_cache"] = False
    hidden = model.base_model(*args, **kwargs).last_hidden_state[:, :-1]      # [b, S-1, H]
    head = model.get_output_embeddings()
    weight, bias = head.weight, head.bias
    labels = labels[:, 1:].to(weight.device)                                   # [b, S-1]
    hidden = hidden.to(weight.device)
    if cast_fp32:                             # TRL's cast_lm_head_to_fp32: the head in fp32
        hidden, weight = hidden.float(), weight.float()
        bias = None if bias is None else bias.float()
    # linear_logprobs takes one dtype, the head's, and picks its own precision: autocast off
    # (fp32 weights under bf16 autocast: the head in fp32, where TRL's runs in bf16)
    hidden = hidden.to(weight.dtype)
    with torch.autocast(hidden.device.type, enabled=False):
        out = linear_logprobs(hidden, weight, labels, bias=bias, temperature=temperature,
                              ignore_index=IGNORE, return_entropy=entropy)
    logp, ent = out if entropy else (out, None)
    mask = labels != IGNORE
    count = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
    return FusedCausalLMOutput(loss=-logp.sum() / count, log_probs=logp, entropy=ent, label_mask=mask)
