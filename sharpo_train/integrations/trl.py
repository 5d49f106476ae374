"""SHARPO inside TRL 1.16's GRPOTrainer (extra ``[trl]``; docs/integrations.md).

TRL computes GRPO advantages inline in ``_generate_and_score_completions`` and its
``_compute_loss`` accepts token-level [B, T] advantages. ``SharpoGRPOTrainer`` keeps
everything TRL does and, after it, replaces the [B] advantages by SHARPO's [B, T] ones
(docs/method.md §3-§4):

1. success of a completion: its weighted total reward >= ``success_threshold``;
2. per group of ``num_generations`` completions, the peer rule of
   ``successful_peers`` (step/teacher_rule.py: the first other success in the group); the
   peer's completion (for a multi-turn episode its whole text, tool results included) is
   the hint;
3. one no-grad pass of the current (= old, before this step's update) policy scores each
   completion after ``prompt + hint`` (conversational prompts: the hint at the end of the
   last user message; plain-text prompts, with or without a chat template: the hint before
   the prompt text; at most ``max_hint_tokens``, cut with " ..."; the prompt is never
   cut); only completions with a teacher are scored, and nothing is scored at ``lam=0``
   (the advantage is then A_i on every token). The student log-probs are TRL's own: its
   old-log-prob pass when it runs one, else (its on-policy default) the log-probs of its
   loss pass, read in ``_compute_loss`` before the loss reads the advantages (the
   micro-batch's [b, T] advantages are made there); so SHARPO adds the teacher pass only;
4. segments (``segmenter="tags"``): the <think>/<action> spans of each model turn (a turn =
   a run of completion tokens with ``tool_mask`` 1); a completion with no tag anywhere is
   one segment; ``segmenter="completion"``: always one segment;
5. ``sharpo_kernels.segment_advantage`` with A_i = TRL's own GRPO advantage; a group
   with no success, or a completion that is its group's only success, keeps A_i.

Multi-turn (``tools=`` / ``environment_factory=``) with a ChatML tokenizer whose template
has no tool calling (SmolLM2-Instruct, the project's tokenizer): the constructor installs
sharpo's ChatML tool-calling template (``chat_templates.enable_tool_calling``) first.

Another registered estimator (``SharpoConfig.estimator``, its params ``estimator_params``;
trl_estimator.py): its ``needs_teacher`` decides whether steps 2-3 run, and its ``fn`` on the
step's ``StepBatch`` gives the [B, T] advantages in place of step 5, as `sharpo train` calls it.

Logged with TRL's metrics (``_metrics``, so every ``report_to`` backend receives them): ``sharpo/teacher_coverage`` (fraction of completions with a
teacher), ``sharpo/gap_mean`` and ``sharpo/weight_mean`` (over scored segments).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Any, Optional

from sharpo_train.integrations.trl_version import check_trl_version

check_trl_version()         # before TRL's trainer is imported: one line naming the range

import torch
from datasets import IterableDataset
from transformers import PreTrainedTokenizerBase
from transformers.utils import logging
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import supports_tool_calling
from trl.data_utils import is_conversational
from accelerate.utils import is_peft_model

from sharpo_kernels import SharpoCoefficients, segment_advantage, with_coefficients
from sharpo_train.step.teacher_rule import SUCCESS_THRESHOLD, successful_peers
from sharpo_train.estimators.sharpo_stats import StepStatInputs, lam_zero_stats, step_stats
from sharpo_train.integrations.chat_templates import enable_tool_calling
from sharpo_train.integrations.fused_head import add_linear_logprobs_head
from sharpo_train.errors import did_you_mean
from sharpo_train.hint import HINT_DEFAULTS
from sharpo_train.settings.loader import setting
from sharpo_train.integrations.common import (check_sharpo_settings, generation_suffix_ids,
                                              insert_hint, leading_special_count, left_pad, prepend_hint,
                                              response_segment_ids)
from sharpo_train.integrations.trl_estimator import SHARPO, estimator_and_params, trl_step_batch

logger = logging.get_logger(__name__)

SEGMENTERS = ("tags", "completion")


@dataclass
@with_coefficients
class SharpoConfig(GRPOConfig):
    """``GRPOConfig`` plus SHARPO's settings: the kernel's coefficients (lam, alpha, tau,
    rho_min, rho_max: ``sharpo_kernels.SharpoCoefficients``, their defaults and help; docs/
    method.md §4), then these (the hint's: sharpo_train/hint.py)."""
    success_threshold: float = setting(SUCCESS_THRESHOLD, "A completion succeeds when its reward >= this.")
    hint_template: str = setting(HINT_DEFAULTS.template, "Hint text; {hint} = the peer's completion.")
    max_hint_tokens: int = setting(HINT_DEFAULTS.max_hint_tokens, "Hint budget in tokens (the hint is cut).")
    segmenter: str = setting("tags", "'tags' (<think>/<action> per turn) or 'completion'.")
    fused_logprobs: bool = setting(True, (
        "Score every log-prob pass (SHARPO's teacher pass, TRL's old-log-prob, loss and reference passes) "
        "with sharpo_kernels.linear_logprobs from the backbone's last hidden states and the head's weight "
        "and bias, never holding the [b, T, V] logits. Used where the model's head is a plain linear layer; "
        "other models keep TRL's head with one log line saying why. False: TRL's head everywhere "
        "(lam=0 is then GRPOTrainer bit for bit)."))
    estimator: str = setting("sharpo", (
        "The registered estimator (sharpo_train.estimators) whose advantages TRL's loss reads: 'sharpo' "
        "reads the fields above; another one reads estimator_params and is asked whether a teacher pass "
        "runs (its needs_teacher), as `sharpo train` asks it."))
    estimator_params: dict[str, Any] | str | None = setting(None, (
        "That estimator's params when it is not 'sharpo', by name (a dict, or JSON text such as "
        "'{\"rlsd_lam\": 0.5}'); unset ones keep their defaults. A_i is TRL's own GRPO advantage "
        "(scale_rewards), so norm_std and eps are not among them."))

    # TrainingArguments.__post_init__ reads these fields' JSON text into a dict (the command line)
    _VALID_DICT_FIELDS = GRPOConfig._VALID_DICT_FIELDS + ["estimator_params"]

    def __post_init__(self):
        super().__post_init__()
        check_sharpo_settings(self)
        if self.segmenter not in SEGMENTERS:
            raise ValueError(f"segmenter: expected one of {SEGMENTERS}, got {self.segmenter!r}")
        estimator_and_params(self)            # a bad name or key now, not at the first step


def _naming_unknown(init):
    """The dataclass ``__init__`` with an unknown keyword named and the closest field
    suggested (``SharpoConfig(lamda=0.2)``: "... 'lamda' (did you mean 'lam'?)"), still the
    TypeError Python raises."""
    @functools.wraps(init)
    def checked(self, *args, **kwargs):
        known = sorted(f.name for f in dataclasses.fields(type(self)) if f.init)
        for key in kwargs:
            if key == "use_liger_loss" and key not in known:
                raise TypeError("SharpoConfig: unknown argument 'use_liger_loss': TRL 1.16's GRPOConfig has no "
                                "Liger GRPO loss; every log-prob pass already goes through a fused head "
                                "(fused_logprobs=True: sharpo_kernels.linear_logprobs; docs/integrations.md)")
            if key not in known:
                raise TypeError(f"SharpoConfig: unknown argument {key!r}"
                                f"{did_you_mean(key, known)}")
        init(self, *args, **kwargs)
    return checked


SharpoConfig.__init__ = _naming_unknown(SharpoConfig.__init__)


def completion_segment_ids(tokenizer, ids: list[int], turn_mask: list[int], segmenter: str = "tags") -> list[int]:
    """[len(ids)] segment ids of one completion (-1 outside segments).

    ``turn_mask[t]`` is 1 on model tokens, 0 on environment/tool tokens. "tags": each
    maximal run of model tokens is a turn and gives its <think>/<action> spans, numbered
    across the completion; no span anywhere -> the whole completion is segment 0.
    "completion": the whole completion is segment 0 (tool tokens in it are masked out by
    the loss mask, so the kernel ignores them).
    """
    n = len(ids)
    whole = [0] * n if n else []
    if segmenter == "completion":
        return whole
    out, k, t = [-1] * n, 0, 0
    while t < n:
        if not turn_mask[t]:
            t += 1
            continue
        end = t
        while end < n and turn_mask[end]:
            end += 1
        turn = response_segment_ids(tokenizer, ids[t:end])
        for j, s in enumerate(turn):
            if s >= 0:
                out[t + j] = k + s
        k += max(turn, default=-1) + 1
        t = end
    return out if k else whole


def peer_text(tokenizer, ids: list[int]) -> str:
    """A peer's completion [T] ids as hint text, its turn structure kept: special tokens stay
    as text (ChatML: ``</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>...``), the
    final end-of-turn and padding tokens dropped. The hint is encoded with special tokens
    read as plain text (hint.cut_hint_ids), so they never open a turn in the teacher prompt."""
    ends = {tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}
    ids = list(ids)
    while ids and ids[-1] in ends:
        ids.pop()
    return tokenizer.decode(ids, skip_special_tokens=False).strip()


class SharpoGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with SHARPO's token-level advantages (see the module docstring).

    Same constructor as ``GRPOTrainer``; ``args`` must be a ``SharpoConfig``. Every group
    of ``num_generations`` completions must be generated on one process:
    ``per_device_train_batch_size * steps_per_generation`` must be a multiple of
    ``num_generations``. ``self.sharpo_last`` holds the last step's SHARPO inputs and
    outputs (for inspection).
    """

    def __init__(self, *args, **kwargs):
        bound = inspect.signature(GRPOTrainer.__init__).bind(self, *args, **kwargs).arguments
        tok = bound.get("processing_class")
        multi_turn = bool(bound.get("tools") or bound.get("environment_factory"))
        if multi_turn and isinstance(tok, PreTrainedTokenizerBase) and not supports_tool_calling(tok):
            # e.g. SmolLM2-Instruct's plain ChatML template: give it tool calling (chat_templates.py)
            enable_tool_calling(tok)
            logger.warning("processing_class: its chat template had no tool calling; sharpo installed its "
                           "ChatML tool-calling template (sharpo_train/integrations/chat_templates.py)")
        if isinstance(tok, PreTrainedTokenizerBase) and tok.chat_template is None:
            data = bound.get("train_dataset")
            if data is not None and not isinstance(data, IterableDataset) and len(data) and \
                    is_conversational(data[0]):
                raise ValueError("processing_class: the tokenizer has no chat template, but train_dataset holds "
                                 "conversational prompts (lists of messages); set tokenizer.chat_template or use "
                                 "plain-text prompts")
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, SharpoConfig):
            raise TypeError(f"args: expected a SharpoConfig, got {type(self.args).__name__}")
        local = self.args.per_device_train_batch_size * self.args.steps_per_generation
        if local % self.num_generations:
            raise ValueError(
                f"per_device_train_batch_size * steps_per_generation ({local}) must be a multiple of "
                f"num_generations ({self.num_generations}): SHARPO picks peers inside a group on one process")
        # Conversational prompts: the hint goes before these ids (end of the last user message).
        # Plain-text prompts: after the tokenizer's leading special tokens (start of the prompt).
        self._sharpo_suffix = (generation_suffix_ids(self._tokenizer)
                               if self._tokenizer.chat_template is not None else None)
        self._sharpo_lead = leading_special_count(self._tokenizer)
        self._sharpo_conversational = True
        self._sharpo_rewards: Optional[torch.Tensor] = None
        self._sharpo_pending: Optional[dict[str, Any]] = None   # a generation batch waiting for its
        self._sharpo_batch: Optional[dict] = None                # loss passes (_compute_loss)
        self.sharpo_last: Optional[dict[str, Any]] = None
        self._sharpo_entropy = False                              # the current pass's compute_entropy
        self.sharpo_fused: dict[str, Optional[str]] = {}          # model -> None (fused) or why not
        # the estimator TRL's loss reads (SharpoConfig.estimator) and its params (trl_estimator.py)
        self._sharpo_estimator, self._sharpo_params = estimator_and_params(self.args)
        if self.args.fused_logprobs:
            self._sharpo_use_fused_head()

    def _sharpo_use_fused_head(self) -> None:
        """The policy's (and the reference model's) log-prob passes through linear_logprobs
        (fused_head.py); TRL patched both heads in its constructor, this wraps them."""
        models = {"policy": self.model.get_base_model() if is_peft_model(self.model) else self.model}
        if self.ref_model is not None:
            models["ref_model"] = self.ref_model
        for name, model in models.items():
            def log(reason, name=name):
                logger.warning(f"sharpo: fused_logprobs: the {name} keeps TRL's log-prob head: {reason}")
            self.sharpo_fused[name] = add_linear_logprobs_head(
                model, self.temperature, self.args.cast_lm_head_to_fp32, lambda: self._sharpo_entropy, log)

    def _tool_call_loop(self, prompts, prompt_ids, completion_ids, completions, *args, **kwargs):
        called = [bool(c and isinstance(c[0], dict) and c[0].get("tool_calls")) for c in completions]
        out = super()._tool_call_loop(prompts, prompt_ids, completion_ids, completions, *args, **kwargs)
        tool_mask = out[0]                    # [B][len] 0 on tool-result tokens
        callers = [i for i, c in enumerate(called) if c]
        if callers and self.max_tool_calling_iterations and all(min(tool_mask[i], default=1) for i in callers):
            # TRL drops a tool result that would pass max_completion_length, silently
            logger.warning(
                f"sharpo: none of this step's {len(callers)} tool-calling completions got its tool result: "
                f"with it each would pass max_completion_length={self.max_completion_length}, so TRL dropped "
                f"the result; raise max_completion_length (a SmolLM2 tool call and its result take about 160 "
                f"tokens; docs/integrations.md)")
        return out

    def log(self, logs: dict[str, float], start_time: Optional[float] = None) -> None:
        cover = self._metrics["train"].get("sharpo/teacher_coverage") if self.model.training else None
        if cover and self._sharpo_needs_teacher() and not any(cover) and self.accelerator.is_main_process:
            logger.warning(
                f"sharpo: no completion had a teacher in the last {len(cover)} step(s) (sharpo/teacher_coverage "
                f"0): no completion's reward reached success_threshold={self.args.success_threshold}, so "
                f"{self.args.estimator} had no teacher to read (SHARPO: plain GRPO advantages); check that "
                f"the reward function scores successes "
                f">= success_threshold")
        super().log(logs, start_time)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._sharpo_rewards = rewards        # [B_global, F], gathered over processes
        return rewards

    def _generate_and_score_completions(self, inputs):
        self._sharpo_conversational = is_conversational(inputs[0])
        out = super()._generate_and_score_completions(inputs)
        if not self.model.training:           # evaluation: TRL's advantages unchanged
            return out
        out["advantages"] = self._sharpo_advantages(out)
        return out

    # ------------------------------------------------------------------ SHARPO step
    def _sharpo_advantages(self, out: dict) -> torch.Tensor:
        a = self.args
        device = out["completion_ids"].device
        B, C = out["completion_ids"].shape
        base = out["advantages"].float()                                    # [B] TRL's GRPO A_i
        start = self.accelerator.process_index * B
        per_func = self._sharpo_rewards[start:start + B]
        rewards = (per_func * self.reward_weights.to(per_func.device)[None]).nansum(dim=1)
        scorable = ~torch.isnan(per_func).all(dim=1)
        success = (scorable & (rewards >= a.success_threshold)).tolist()
        groups = [i // self.num_generations for i in range(B)]
        peers = successful_peers(groups, success)

        cmask = out["completion_mask"]                                      # [B, C]
        tool = out.get("tool_mask")
        turn_mask = cmask if tool is None else cmask * tool
        loss_mask = turn_mask                                               # TRL's own loss mask
        comp = [out["completion_ids"][b][cmask[b].bool()].tolist() for b in range(B)]
        prompts = [out["prompt_ids"][b][out["prompt_mask"][b].bool()].tolist() for b in range(B)]
        tok = self._tokenizer
        teacher_prompts: list[Optional[list[int]]] = [None] * B
        needs = self._sharpo_needs_teacher()  # the estimator's rule (SHARPO: lam != 0, §4)
        if needs:                             # else: no teacher pass
            for b in range(B):
                if peers[b] is not None:
                    hint = peer_text(tok, comp[peers[b]])
                    teacher_prompts[b] = self._sharpo_teacher_prompt(prompts[b], hint)
        has_teacher = torch.tensor([t is not None for t in teacher_prompts], dtype=torch.bool, device=device)
        rows = [b for b in range(B) if teacher_prompts[b] is not None]

        student, entropy = out.get("old_per_token_logps"), None
        # TRL skips the old-log-prob pass when old == current policy (its on-policy default):
        # SHARPO then reads its loss pass's own, there (_compute_loss); another estimator
        # reads them at credit time, from one more pass (_sharpo_student_pass)
        sharpo = self.args.estimator == SHARPO
        defer = student is None and needs and sharpo
        if not sharpo and (student is None or self._sharpo_estimator.needs_entropy):
            own, entropy = self._sharpo_student_pass(out, self._sharpo_estimator.needs_entropy)
            student = own if student is None else student
        t_ids = t_attn = None
        with torch.no_grad():
            if student is None:               # lam = 0 or deferred: never read here
                student = torch.zeros(B, C, device=device)
            teacher = student.detach().clone().float()
            if rows:
                padded = left_pad([teacher_prompts[b] for b in rows], [comp[b] for b in rows], tok.pad_token_id)
                P = padded["prompts"].shape[1]
                t_ids = torch.cat([padded["prompts"], out["completion_ids"][rows].cpu()], dim=1).to(device)
                t_attn = torch.cat([padded["attention_mask"][:, :P], cmask[rows].cpu().long()], dim=1).to(device)
                t_lp, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, t_ids, t_attn, C, batch_size=self.args.per_device_train_batch_size)
                teacher[rows] = t_lp.float()
        student = student.float()

        seg = torch.full((B, C), -1, dtype=torch.long)
        for b in range(B):
            n = len(comp[b])
            s = completion_segment_ids(tok, comp[b], turn_mask[b][cmask[b].bool()].tolist(), a.segmenter)
            seg[b, :n] = torch.tensor(s, dtype=torch.long)
        seg = seg.to(device)
        last = {"teacher_logps": teacher, "student_logps": student, "segment_ids": seg, "base": base,
                "has_teacher": has_teacher, "loss_mask": loss_mask, "rewards": rewards,
                "peers": peers, "teacher_prompts": teacher_prompts, "prompts": prompts,
                "completions": comp, "teacher_input_ids": t_ids, "teacher_attention_mask": t_attn,
                "teacher_rows": rows, "entropy": entropy}
        if defer:
            # each row's [B, T] advantage is made in its loss pass (_sharpo_loss_rows); the
            # rows travel through TRL's shuffle and split with these fields
            out.update({"sharpo_teacher_logps": teacher, "sharpo_has_teacher": has_teacher,
                        "sharpo_segment_ids": seg, "sharpo_base": base,
                        "sharpo_row": torch.arange(B, device=device)})
            last["student_logps"] = torch.full((B, C), float("nan"), device=device)
            self._sharpo_pending = {"last": last, "left": B}
            return out["advantages"]          # TRL's [B] A_i until the loss pass
        return self._sharpo_finish(last)

    def _sharpo_needs_teacher(self) -> bool:
        """Whether this run scores teachers: the estimator's own rule at its params
        (``Estimator.needs_teacher``; SHARPO: lam != 0, docs/method.md §4)."""
        return self._sharpo_estimator.needs_teacher(self._sharpo_params)

    def _sharpo_student_pass(self, out: dict, entropy: bool):
        """([B, C] log-probs, [B, C] entropies or None) of the completions under the current
        (= old) policy, no grad, as TRL's old-log-prob pass scores them."""
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
        attn = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
        with torch.no_grad():
            lp, ent, _ = self._get_per_token_logps_and_entropies(
                self.model, ids, attn, out["completion_ids"].shape[1],
                batch_size=self.args.per_device_train_batch_size, compute_entropy=entropy)
        return lp.float(), ent

    def _sharpo_finish(self, last: dict) -> torch.Tensor:
        """The step's [B, T] advantages from ``last`` (the step's SHARPO inputs, student
        log-probs included), its dashboard, ``sharpo_last``; -> the advantages."""
        if self.args.estimator != SHARPO:
            return self._estimator_finish(last)
        res = segment_advantage(last["teacher_logps"], last["student_logps"], last["segment_ids"], last["base"],
                                has_teacher=last["has_teacher"], response_mask=last["loss_mask"],
                                **SharpoCoefficients.of(self.args).kwargs())
        self._sharpo_log(res, last["base"], last["has_teacher"])
        self.sharpo_last = {**last, "advantages": res.advantages, "segments": res}
        return res.advantages

    def _estimator_finish(self, last: dict) -> torch.Tensor:
        """Another registered estimator's [B, T] advantages: ``fn(batch, params)`` on the
        step's ``StepBatch`` (trl_estimator.trl_step_batch), its stats into TRL's metrics
        with ``sharpo/teacher_coverage``, ``sharpo_last``; -> the advantages."""
        est, params = self._sharpo_estimator, self._sharpo_params
        batch = trl_step_batch(
            params, rewards=last["rewards"], base=last["base"], group_size=self.num_generations,
            loss_mask=last["loss_mask"], segment_ids=last["segment_ids"], prompts=last["prompts"],
            completions=last["completions"], student=last["student_logps"],
            teacher=last["teacher_logps"], has_teacher=last["has_teacher"], entropy=last["entropy"],
            step=self.state.global_step + 1)
        credit = est.fn(batch, params)
        if credit.aux_loss is not None:
            raise ValueError(f"estimator: {self.args.estimator!r} adds a loss term "
                             f"({credit.aux_loss.name}), which TRL's loss does not take")
        m = self._metrics["train"]
        m["sharpo/teacher_coverage"].append(float(batch.has_teacher.float().mean()) if len(batch) else 0.0)
        for key, value in credit.stats.items():
            m[key].append(float(value))
        advantages = credit.advantages.float().to(last["loss_mask"].device)
        self.sharpo_last = {**last, "advantages": advantages, "segments": credit.segments, "batch": batch}
        return advantages

    def _compute_loss(self, model, inputs):
        if "sharpo_row" in inputs and inputs["advantages"].dim() == 1:   # deferred, first use
            self._sharpo_batch = inputs
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self._sharpo_batch = None
        return super()._compute_loss(model, inputs)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        # TRL's signature: (..., batch_size=None, compute_entropy=False, ...)
        self._sharpo_entropy = bool(kwargs.get("compute_entropy", args[1] if len(args) > 1 else False))
        out = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                         *args, **kwargs)
        inputs, self._sharpo_batch = self._sharpo_batch, None
        if inputs is not None:                # _compute_loss's first pass: the policy on these rows
            self._sharpo_loss_rows(inputs, out[0].detach())
        return out

    def _sharpo_loss_rows(self, inputs: dict, student: torch.Tensor) -> None:
        """A deferred micro-batch: its [b, T] SHARPO advantages from the loss pass's own
        log-probs ``student`` [b, T] (the old policy: TRL skipped old log-probs because no
        update happens within the generation batch), written into ``inputs["advantages"]``
        before TRL's loss reads them (rows are independent in the kernel: one completion =
        one trajectory). The generation batch's last micro-batch finishes the step."""
        cmask, tool = inputs["completion_mask"], inputs.get("tool_mask")
        loss_mask = cmask if tool is None else cmask * tool
        res = segment_advantage(inputs["sharpo_teacher_logps"], student.float(), inputs["sharpo_segment_ids"],
                                inputs["sharpo_base"], has_teacher=inputs["sharpo_has_teacher"],
                                response_mask=loss_mask, **SharpoCoefficients.of(self.args).kwargs())
        inputs["advantages"] = res.advantages
        pending = self._sharpo_pending
        rows = inputs["sharpo_row"]
        pending["last"]["student_logps"][rows] = student.float()
        pending["left"] -= len(rows)
        if pending["left"] == 0:
            self._sharpo_pending = None
            self._sharpo_finish(pending["last"])

    def _sharpo_teacher_prompt(self, prompt: list[int], hint: str) -> Optional[list[int]]:
        """Teacher prompt ids for one row: the hint at the end of the last user message
        (conversational prompts, rendered by the chat template) or before the prompt text
        (plain-text prompts); None when it does not fit (docs/integrations.md)."""
        a = self.args
        if self._sharpo_conversational:
            if self._sharpo_suffix is None:
                raise ValueError("processing_class: conversational prompts need a chat template")
            return insert_hint(self._tokenizer, prompt, hint, max_prompt_length=len(prompt) + a.max_hint_tokens,
                               max_hint_tokens=a.max_hint_tokens, suffix_ids=self._sharpo_suffix,
                               template=a.hint_template)
        return prepend_hint(self._tokenizer, prompt, hint, max_hint_tokens=a.max_hint_tokens,
                            lead=self._sharpo_lead, template=a.hint_template)

    def _sharpo_log(self, res, base: torch.Tensor, has_teacher: torch.Tensor) -> None:
        """The trainer's ``sharpo/*`` dashboard (``step_stats``, estimators/sharpo_stats.py; one completion = one
        trajectory) over every process's completions of the step, into TRL's metrics."""
        m = self._metrics["train"]
        if not self._sharpo_needs_teacher():  # SHARPO is GRPO exactly; nothing scored (§4)
            for key, value in lam_zero_stats().items():
                m[key].append(float(value))
            return
        parts = StepStatInputs.of(res, base, has_teacher)
        if self.accelerator.num_processes > 1:
            from accelerate.utils import gather_object
            parts = StepStatInputs.cat(gather_object([StepStatInputs.cat([parts])]))
        for key, value in step_stats(parts, alpha=self.args.alpha, tau=self.args.tau).items():
            m[key].append(float(value))
