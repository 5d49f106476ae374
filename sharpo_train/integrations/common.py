"""Engine-independent pieces shared by the verl and TRL integrations.

- ``generation_suffix_ids`` / ``insert_hint``: where the hint goes in a chat prompt that is
  already token ids (the end of the last user message, before the assistant header), the
  hint cut to its budget (``hint.cut_hint_ids``: the hint is cut, never the task);
  ``prepend_hint``: a plain-text prompt (no chat template) gets the hint before its text.
  The hint's text, template and truncation are sharpo_train/hint.py's.
- ``response_segment_ids``: segment ids of one response from its <think>/<action> spans
  (sharpo_train.step.segments), numbered 0..K-1, -1 elsewhere (docs/method.md §2).
- ``left_pad``: left-padded prompt / right-padded response tensors with attention_mask
  and position_ids recomputed.
- ``check_sharpo_settings``: the range checks of SHARPO's settings (TRL's SharpoConfig).
- ``named_estimator``: the registered estimator an engine's setting names (TRL's
  ``SharpoConfig.estimator``, verl's ``algorithm.adv_estimator``), or a ValueError naming
  that setting with the closest name;
- ``teacher_pass``: whether a step scores a teacher, the named estimator's own rule
  (``Estimator.needs_teacher``, estimators/registry.py), asked by verl, verl-agent and TRL.
The teacher rule (``successful_peers``: a successful peer per group, docs/method.md §3) is
the trainer's too: sharpo_train/step/teacher_rule.py.
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Optional, Sequence

import torch

from sharpo_kernels import SharpoCoefficients
from sharpo_train.hint import (HINT_SEPARATOR, HINT_TEMPLATE, apply_template, check_max_hint_tokens,
                               check_template, cut_hint_ids)
from sharpo_train.errors import did_you_mean
from sharpo_train.estimators import ESTIMATORS, Estimator
from sharpo_train.step.segments import find_spans, segment_ids


def named_estimator(name, key: str) -> Estimator:
    """``ESTIMATORS[name]``; ValueError naming the setting ``key`` (e.g. ``estimator``,
    ``algorithm.adv_estimator``) with the registered names and the closest one otherwise."""
    if not isinstance(name, str) or name not in ESTIMATORS:
        raise ValueError(f"{key}: expected a registered estimator {sorted(ESTIMATORS)}, got "
                         f"{name!r}{did_you_mean(name, ESTIMATORS)}")
    return ESTIMATORS[name]


def teacher_pass(settings, method: str) -> bool:
    """Whether estimator ``method`` scores a teacher at ``settings`` (its params: TRL's
    SharpoConfig or the estimator's params dataclass, verl's ``algorithm.sharpo.*`` dict,
    SharpoCoefficients): the estimator's own answer (``Estimator.needs_teacher``; SHARPO:
    lam = 0 is the base exactly, docs/method.md §4)."""
    params = SimpleNamespace(**settings) if isinstance(settings, dict) else settings
    return named_estimator(method, "method").needs_teacher(params)


def generation_suffix_ids(tokenizer) -> list[int]:
    """Token ids the chat template puts after a user message's text when a generation
    prompt follows (ChatML: ``<|im_end|>\\n<|im_start|>assistant\\n``)."""
    mark = "\u2063SHARPO\u2063"
    text = tokenizer.apply_chat_template([{"role": "user", "content": mark}], tokenize=False,
                                         add_generation_prompt=True)
    if mark not in text:
        raise ValueError("tokenizer: its chat template does not render the user message text")
    suffix = text.split(mark, 1)[1]
    return list(tokenizer(suffix, add_special_tokens=False)["input_ids"])


def insert_hint(tokenizer, prompt_ids: Sequence[int], hint: str, *, max_prompt_length: int,
                max_hint_tokens: int, suffix_ids: Sequence[int],
                template: str = HINT_TEMPLATE) -> Optional[list[int]]:
    """Teacher prompt ids: ``prompt_ids`` with ``"\\n\\n" + template(hint)`` inserted at the
    end of the last user message (before ``suffix_ids``), or None when the prompt does not
    end with ``suffix_ids`` or fewer than MIN_HINT_TOKENS hint tokens fit.

    Budget: the hint gets min(max_hint_tokens, max_prompt_length - len(prompt_ids)) tokens;
    a longer hint keeps its head and ends with " ...". The prompt (task) is never cut.
    """
    n = len(suffix_ids)
    prompt_ids = list(prompt_ids)
    if n == 0 or len(prompt_ids) < n or prompt_ids[-n:] != list(suffix_ids):
        return None
    budget = min(int(max_hint_tokens), int(max_prompt_length) - len(prompt_ids))
    hint_ids = cut_hint_ids(tokenizer, HINT_SEPARATOR + apply_template(hint, template), budget)
    if hint_ids is None:
        return None
    return prompt_ids[:-n] + hint_ids + prompt_ids[-n:]


def prepend_hint(tokenizer, prompt_ids: Sequence[int], hint: str, *, max_hint_tokens: int, lead: int = 0,
                 template: str = HINT_TEMPLATE) -> Optional[list[int]]:
    """Teacher prompt ids for a plain-text prompt (no chat template, e.g. TRL's standard
    format): ``template(hint) + "\n\n"`` before the prompt text, after its first ``lead``
    ids (the special tokens the tokenizer puts first, e.g. BOS), so the prompt's own ending
    (where the completion starts) is unchanged. Same budget rule as ``insert_hint``; None
    when fewer than MIN_HINT_TOKENS hint tokens fit."""
    prompt_ids = list(prompt_ids)
    sep = list(tokenizer(HINT_SEPARATOR, add_special_tokens=False)["input_ids"])
    hint_ids = cut_hint_ids(tokenizer, apply_template(hint, template), int(max_hint_tokens) - len(sep))
    if hint_ids is None:
        return None
    return prompt_ids[:lead] + hint_ids + sep + prompt_ids[lead:]


def leading_special_count(tokenizer) -> int:
    """How many special tokens the tokenizer puts before a text (``tokenizer(text)``): 1 for
    a BOS-adding tokenizer (Llama), 0 for Qwen/ChatML ones."""
    plain = list(tokenizer("a b", add_special_tokens=False)["input_ids"])
    full = list(tokenizer("a b")["input_ids"])
    for k in range(len(full) - len(plain) + 1):
        if full[k:k + len(plain)] == plain:
            return k
    return 0


def response_segment_ids(tokenizer, response_ids: Sequence[int]) -> list[int]:
    """[len(response_ids)] ints: segment k on the k-th <think>/<action> span, -1 elsewhere."""

    ids = [int(t) for t in response_ids]
    return segment_ids(find_spans(tokenizer, ids), len(ids))


def left_pad(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
             pad_id: int, response_width: Optional[int] = None) -> dict[str, torch.Tensor]:
    """Padded tensors of ``prompt | response`` rows.

    prompts [B, P] left-padded, responses [B, R] right-padded, input_ids [B, P+R],
    attention_mask [B, P+R] (1 on real tokens), position_ids [B, P+R] = cumsum(mask) - 1
    clipped at 0 (the first real token is position 0), response_mask [B, R].
    R = the longest response, or ``response_width`` when given (e.g. the batch's width).
    """
    B = len(prompts)
    P = max((len(p) for p in prompts), default=0)
    R = max((len(r) for r in responses), default=0)
    if response_width is not None:
        if response_width < R:
            raise ValueError(f"response_width: {response_width} < longest response {R}")
        R = int(response_width)
    prompt_t = torch.full((B, P), pad_id, dtype=torch.long)
    resp_t = torch.full((B, R), pad_id, dtype=torch.long)
    pmask = torch.zeros(B, P, dtype=torch.long)
    rmask = torch.zeros(B, R, dtype=torch.long)
    for b, (p, r) in enumerate(zip(prompts, responses)):
        if len(p):
            prompt_t[b, P - len(p):] = torch.as_tensor(list(p), dtype=torch.long)
            pmask[b, P - len(p):] = 1
        if len(r):
            resp_t[b, :len(r)] = torch.as_tensor(list(r), dtype=torch.long)
            rmask[b, :len(r)] = 1
    attn = torch.cat([pmask, rmask], dim=1)
    return {
        "prompts": prompt_t, "responses": resp_t,
        "input_ids": torch.cat([prompt_t, resp_t], dim=1), "attention_mask": attn,
        "position_ids": (attn.cumsum(-1) - 1).clamp(min=0), "response_mask": rmask,
    }


def check_sharpo_settings(c) -> None:
    """ValueError/TypeError naming the field of ``c`` (TRL's SharpoConfig, or any object
    with these attributes) that is out of range: lam in [0, 1], alpha
    in (0, 1), tau > 0, 0 < rho_min <= rho_max, success_threshold (all finite real numbers,
    never a bool), max_hint_tokens an int >= MIN_HINT_TOKENS, hint_template a format string
    using only ``{hint}``. An infinite tau or rho_max or a NaN threshold would silently
    turn SHARPO into plain GRPO (docs/method.md §4)."""
    # the coefficients: the kernel's own check (sharpo_kernels.SharpoCoefficients.checked)
    SharpoCoefficients.of(c).checked()
    v = c.success_threshold
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"success_threshold: expected a real number, got {type(v).__name__} {v!r}")
    if not math.isfinite(v):
        raise ValueError(f"success_threshold: expected a finite number, got {v}")
    check_max_hint_tokens(c.max_hint_tokens)                 # hint.py's checks
    check_template(c.hint_template, "hint_template")
