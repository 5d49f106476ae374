"""Warm start: supervised fine-tuning of the policy on expert demonstrations.

Demonstrations are chat-format JSONL (written by `sharpo alfworld demos`): one record per
agent turn, ``{"messages": [{"role": "user", ...}, {"role": "assistant", ...}], ...}``.
The prompt is rendered with the tokenizer's chat template exactly as the rollout renders
it (generation prompt added), the assistant text follows, closed by the end-of-turn token;
the loss covers only the assistant tokens. The result is a Hugging Face checkpoint
directory that `model.path=DIR` loads.
"""
from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .train_config import ModelConfig
from ..envs.registry import DEFAULT_ENV, ENVS, env_names, get_spec
from ..errors import UsageError
from ..settings.loader import apply_overrides, in_range, parse_overrides, setting, validate_settings
from ..models.chat_template import render_chat
from ..models.optimizer import build_optimizer
from ..models.policy import build_policy
from .. import hint as H
from .demo_records import read_demo_records
from ..io import current_umask, umask_modes
from ..outputs import check_out_dir, install_dir, new_build_dir


@dataclass
class SFTConfig(H.HintKeys):
    """`sharpo sft` settings (``key=value``; ``model.<key>`` sets the policy's ModelConfig,
    the trainer's: sharpo_train/loops/train_config.py). Read by loader.load_settings. The ``hint_*``
    keys of the hinted copies (``hint_fraction``) are the trainer's ``teacher.hint_*``
    (hint.py ``HintKeys``: same defaults, same checks); set them as the RL run does."""

    epochs: float = setting(3.0, "passes over the demonstrations (fractions allowed)")
    max_steps: int = setting(0, "> 0: stop after this many optimizer steps")
    batch_size: int = setting(16, "examples per optimizer step")
    lr: float = setting(1e-3, "AdamW learning rate")
    min_lr_ratio: float = setting(0.1, "cosine decay to lr * min_lr_ratio")
    warmup_steps: int = setting(10, "linear learning-rate warmup, in optimizer steps")
    weight_decay: float = setting(0.0, "AdamW weight decay")
    max_length: int = setting(1024, "tokens per example; a longer one keeps its last "
                              "max_length tokens")
    grad_clip: float = setting(1.0, "clip the gradient's global norm to this (0: no clipping)")
    seed: int = setting(0, "seed of the shuffling and the model init")
    log_every: int = setting(10, "log the loss every N steps")
    threads: int = setting(0, "torch threads; 0 leaves torch's default")
    prompt_loss_weight: float = setting(0.0, "> 0: also a language-model loss on the prompt "
                                        "tokens, this much per token (helps a tiny model from "
                                        "scratch read its prompt); 0: assistant tokens only")
    model: ModelConfig = setting(help="the policy (build_policy)", factory=ModelConfig)
    hint_fraction: float = setting(0.0, "this fraction of demonstration episodes is also shown "
                                   "with its own trajectory as the teacher's hint, so reading "
                                   "a hint is in distribution (docs/training.md, \"Hint-aware "
                                   "warm start\")")
    hint_env: str = setting(DEFAULT_ENV, "the environment whose hint text and task line are "
                            "used (env.name of the RL run; the recipes set it to demo.env)")
    hint_every_turn: bool = setting(False, "deviation option (docs/training.md): hinted copies "
                                    "of the turns a hint says nothing about too, trained on "
                                    "their reasoning only")

    def validate(self) -> None:
        super().validate()
        in_range(self, "epochs", 0, 10000, lo_open=True)
        in_range(self, "max_steps", 0, 10 ** 7)
        in_range(self, "batch_size", 1, 65536)
        in_range(self, "lr", 0, 1, lo_open=True)
        in_range(self, "min_lr_ratio", 0, 1)
        in_range(self, "warmup_steps", 0, 10 ** 7)
        in_range(self, "weight_decay", 0, 10)
        in_range(self, "max_length", 2, 1 << 20)
        in_range(self, "grad_clip", 0, 1e6)     # 0: no clipping
        in_range(self, "seed", 0)
        in_range(self, "log_every", 1)
        in_range(self, "threads", 0, 1024)
        in_range(self, "prompt_loss_weight", 0, 100)
        in_range(self, "hint_fraction", 0, 1)
        if self.hint_env not in ENVS:
            raise UsageError(f"hint_env: expected one of {env_names()}, got {self.hint_env!r}")


def parse_sft_overrides(overrides: list[str], cfg: SFTConfig | None = None,
                        prefix: str = "") -> SFTConfig:
    """``key=value`` overrides (``model.<key>=value`` for the model) applied to ``cfg``
    (default SFTConfig()) and validated; a bad key or value raises ConfigError naming it
    (after ``prefix``, e.g. "sft." where the overrides came as ``sft.<key>``)."""
    cfg = cfg or SFTConfig()
    apply_overrides(cfg, parse_overrides(overrides), prefix)
    return validate_settings(cfg, prefix)


def load_demos(path: str | Path) -> list[list[dict]]:
    """The message lists of a demonstrations file, checked (demo_records.py: a UsageError
    naming the file, line and key): each ends with an assistant turn."""
    return [r["messages"] for r in read_demo_records(path)]


THINK_END = "</think>"      # end of a reply's reasoning segment (step/segments.py)


def hinted_demos(path: str | Path, fraction: float, seed: int = 0,
                 settings: H.HintSettings = H.HINT_DEFAULTS, env: str = DEFAULT_ENV,
                 every_turn: bool = False) -> list[list[dict]]:
    """Hint-conditioned copies of the turns of ``fraction`` of the demonstration episodes:
    each turn's user message with a hint, laid out exactly as the trainer lays out a
    teacher prompt (step/teacher.py). The hint is the records' ``hint`` text when they carry
    one (the corridor's demos: a peer's trajectory in the environment's own hint layout),
    else the episode's own trajectory as a successful attempt (the env's render_hint), which
    needs the records' ``action`` and ``observation_after`` (written by `sharpo alfworld
    demos`); episodes with neither are skipped. Records are grouped into episodes by
    ``episode`` when present, else by ``task_id``; a record with ``hint_informative``
    false (a turn the hint says nothing about) gets no hinted copy unless ``every_turn``
    (sft.hint_every_turn): then its copy is trained on the reply's reasoning only (up to
    ``</think>``; ``train_chars``), not on its action. ``settings``: the hint's placement,
    scope and observation cut (hint.py); scope ``to_turn``: the turn's record's
    ``hint_to_turn`` text, else the trajectory up to and including that turn
    (``hint.scoped``). ``env``: the environment (its EnvSpec's ``prompts.render_hint`` and
    task line)."""

    spec = get_spec(env)
    to_turn = settings.scope == H.SCOPE_TO_TURN

    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"hint_fraction: expected a number in [0, 1], got {fraction!r}")
    episodes: dict[str, list[dict]] = {}
    for rec in read_demo_records(path):      # checked: types of every key read here
        if (isinstance(rec.get("hint"), str) or ("action" in rec and "observation_after" in rec)) \
                and (not to_turn or isinstance(rec.get("hint_to_turn"), str)
                     or ("action" in rec and "observation_after" in rec)):
            key = rec.get("episode", rec.get("task_id"))
            episodes.setdefault(str(key), []).append(rec)
    names = sorted(episodes)
    rng = random.Random(seed)
    chosen = rng.sample(names, round(fraction * len(names)))
    out = []
    for name in sorted(chosen):
        recs = sorted(episodes[name], key=lambda r: r.get("step", 0))
        render_hint = spec.prompts.render_hint
        steps = [(r.get("action"), r.get("observation_after")) for r in recs]
        hint = recs[0].get("hint")
        if not isinstance(hint, str):
            hint = render_hint(steps, max_observation_chars=settings.max_observation_chars)
        for k, r in enumerate(recs):
            if r.get("hint_informative") is False and not every_turn:   # a corridor free turn
                continue
            if to_turn:
                hint = r.get("hint_to_turn")
                if not isinstance(hint, str):
                    hint = render_hint(H.scoped(steps, settings.scope, k),
                                       max_observation_chars=settings.max_observation_chars)
            msgs = r["messages"]     # the hint goes into the last user message before the reply
            k = max((i for i, m in enumerate(msgs[:-1]) if m["role"] == "user"), default=None)
            if k is None:
                continue
            user, reply = msgs[k], dict(msgs[-1])
            if r.get("hint_informative") is False:
                # every_turn: the reasoning only (up to </think>), never the door the hint
                # says nothing about, so the copy does not teach to ignore the hint
                end = reply["content"].find(THINK_END)
                if end < 0:
                    continue
                reply["train_chars"] = end + len(THINK_END)
            out.append([*msgs[:k], {"role": "user", "content": H.place_hint(
                user["content"], hint, settings.placement, spec.task_line_prefix)},
                        *msgs[k + 1:-1], reply])
    return out


def end_of_turn_ids(tokenizer) -> list[int]:
    """The tokens the chat template puts after an assistant message (e.g. <|im_end|>\\n),
    found by rendering a probe conversation; falls back to the EOS token."""
    probe = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "PROBE"}]
    try:
        text = render_chat(tokenizer, probe, tokenize=False)
        tail = text[text.rindex("PROBE") + len("PROBE"):]
        ids = tokenizer(tail, add_special_tokens=False)["input_ids"]
        if ids:
            return list(ids)
    except Exception:
        pass
    return [tokenizer.eos_token_id]


def encode_example(tokenizer, messages: list[dict], eot: list[int], max_length: int
                   ) -> tuple[list[int], list[int]]:
    """(input ids, labels) with labels = -100 except on the final assistant reply + end of turn.
    A reply with ``train_chars`` n (hinted_demos, every_turn) is trained on the tokens of its
    first n characters only (the tokens both tokenisations share, and the one that crosses
    the boundary), not on the rest."""
    prompt = render_chat(tokenizer, messages[:-1], tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    reply = messages[-1]
    reply_ids = tokenizer(reply["content"], add_special_tokens=False)["input_ids"] + eot
    ids = prompt_ids + reply_ids
    targets = list(reply_ids)
    if reply.get("train_chars") is not None:
        head = tokenizer(reply["content"][:reply["train_chars"]],
                         add_special_tokens=False)["input_ids"]
        k = 0
        while k < min(len(head), len(reply_ids)) and head[k] == reply_ids[k]:
            k += 1
        k += k < len(head)          # the token across the boundary (e.g. "><") too
        targets = reply_ids[:k] + [-100] * (len(reply_ids) - k)
    labels = [-100] * len(prompt_ids) + targets
    if len(ids) > max_length:  # keep the end: the reply and the most recent context
        ids, labels = ids[-max_length:], labels[-max_length:]
    return ids, labels


def _batches(examples, batch_size, rng):
    order = list(range(len(examples)))
    while True:
        rng.shuffle(order)
        for i in range(0, len(order), batch_size):
            yield [examples[j] for j in order[i:i + batch_size]]


def _collate(batch, pad_id):
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (ids, lab) in enumerate(batch):  # right padding
        input_ids[row, :len(ids)] = torch.tensor(ids)
        labels[row, :len(lab)] = torch.tensor(lab)
        attention[row, :len(ids)] = 1
    return input_ids, labels, attention


def sft_loss(logits, input_ids, labels, attention, prompt_loss_weight: float = 0.0):
    """Mean cross-entropy over the assistant tokens; with ``prompt_loss_weight`` > 0 the
    prompt tokens add their cross-entropy times that weight (normalised by the number of
    assistant tokens, so the reply's share of the loss is unchanged)."""
    ce = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(), input_ids[:, 1:].reshape(-1),
        reduction="none").view(input_ids.size(0), -1)
    reply = (labels[:, 1:] != -100).float()
    loss = (ce * reply).sum()
    if prompt_loss_weight > 0:
        prompt = attention[:, 1:].float() * (1 - reply)
        loss = loss + prompt_loss_weight * (ce * prompt).sum()
    return loss / reply.sum().clamp(min=1)


def run_sft(demos_path: str | Path, out_dir: str | Path, cfg: SFTConfig | None = None,
            log=print, force: bool = False) -> dict:
    """Fine-tune and save to out_dir (built in a new temp folder beside it, then moved in:
    outputs.install_dir; an existing out_dir must be an earlier sft output, or ``force``).
    Returns the summary also saved as out_dir/sft.json."""
    cfg = validate_settings(cfg or SFTConfig())
    out_dir = check_out_dir(out_dir, "--out", force)      # before anything is trained
    messages = load_demos(demos_path)
    if cfg.hint_fraction > 0:
        messages += hinted_demos(demos_path, cfg.hint_fraction, cfg.seed,
                                 cfg.hint_settings(), cfg.hint_env, cfg.hint_every_turn)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model, tokenizer = build_policy(cfg.model)
    eot = end_of_turn_ids(tokenizer)
    examples = [encode_example(tokenizer, m, eot, cfg.max_length) for m in messages]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eot[0]
    steps_per_epoch = math.ceil(len(examples) / cfg.batch_size)
    total = cfg.max_steps if cfg.max_steps > 0 else max(1, round(cfg.epochs * steps_per_epoch))
    # fp32 master weights when the policy is held in bf16/fp16 (model.build_optimizer)
    optim = build_optimizer(model, {"lr": cfg.lr, "weight_decay": cfg.weight_decay})

    def lr_at(step):
        if step < cfg.warmup_steps:
            return cfg.lr * (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
        return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))

    model.train()
    rng = random.Random(cfg.seed)
    batches = _batches(examples, cfg.batch_size, rng)
    start, losses, history = time.time(), [], []
    for step in range(total):
        input_ids, labels, attention = _collate(next(batches), pad_id)
        logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
        loss = sft_loss(logits, input_ids, labels, attention, cfg.prompt_loss_weight)
        for group in optim.param_groups:
            group["lr"] = lr_at(step)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optim.step()
        losses.append(loss.item())
        if (step + 1) % cfg.log_every == 0 or step + 1 == total:
            mean = sum(losses[-cfg.log_every:]) / len(losses[-cfg.log_every:])
            history.append({"step": step + 1, "loss": mean})
            log(f"sft step {step + 1}/{total} loss {mean:.4f} ({time.time() - start:.0f}s)")
    model.eval()
    summary = {"demos": str(demos_path), "examples": len(examples), "steps": total,
               "final_loss": sum(losses[-cfg.log_every:]) / len(losses[-cfg.log_every:]),
               "seconds": round(time.time() - start, 1), "loss_history": history,
               "config": asdict(cfg)}
    check_out_dir(out_dir, "--out", force)      # still fine after training
    tmp = new_build_dir(out_dir)
    try:
        with umask_modes(tmp):     # the umask's modes, not mkdtemp's 0700 / transformers' 0600
            model.save_pretrained(tmp)
            if cfg.model.path:
                # a pretrained checkpoint's own tokenizer travels with it; the shipped
                # tokenizer is not copied: build_policy then loads the shipped one (a saved
                # copy reloads as a different tokenizer class in transformers 5 and
                # tokenizes differently)
                tokenizer.save_pretrained(tmp)
            (tmp / "sft.json").write_text(json.dumps(summary, indent=1))
        os.chmod(tmp, 0o777 & ~current_umask())
    except BaseException:       # a full disk, a signal: the half-built folder is ours
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    install_dir(tmp, out_dir, "sharpo sft")
    return summary
