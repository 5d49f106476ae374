"""Multi-turn rollouts: G episodes per task against an EnvPool, sampled with HF ``generate``.

Layout (verl-agent's per-turn rows). Every turn re-renders its prompt: the turn's USER
message holds the task, a window of recent (observation, action) pairs, the current
observation and the admissible actions (the environment's ``render_turn_prompt``). So turn
t's input is not a prefix of turn t+1's, and each turn becomes one training row
``prompt_ids | response_ids``: the chat-templated user message with the generation prompt,
then the exact sampled tokens (through the end-of-turn token when one was produced).
Rows of one episode share its trajectory index; observations never enter a row as trained
tokens, so the response mask is simply "the response part".

The policy writes ``<think>...</think><action>...</action>``; ``parse_action`` returns None
for a reply without a usable action tag, and the environment answers that as an invalid
action (never a crash). Episodes end when the environment says done, on an environment
fault (``info["error"]``, kept in ``Episode.error``), or at ``max_turns`` (a failure unless
already won). A faulted episode is not trained on and leaves its group's statistics
(batch.py); the metrics count it as an env fault.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from ..envs.base import EnvPool, Task
from ..models.chat_template import render_chat
from ..models.policy import stop_token_ids
from ..models.device import autocast
from .finite_logits import guarded_generate
from .segments import Span, find_spans


@dataclass
class Turn:
    user_text: str                  # the USER message of this turn
    prompt_ids: list[int]           # chat template of [user] + generation prompt
    response_ids: list[int]         # sampled tokens (ends with the stop token if produced)
    response_text: str              # decoded response (stop token removed)
    action: Optional[str]           # parsed action, None = invalid
    observation_after: str = ""     # the environment's reply
    spans: list[Span] = field(default_factory=list)
    sampled_logp: Optional[list[float]] = None  # per response token, from the rollout engine


@dataclass
class Episode:
    task: Task
    group: int                      # index of its group (task) within the step
    index: int                      # rollout index within the group (0..G-1)
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    success: bool = False
    error: Optional[str] = None
    score: Optional[float] = None   # the environment's task score (info["task_score"]: WebShop)
    truncated: bool = False         # cut at max_turns before the environment ended it


def chat_prompt_ids(tokenizer, user_text: str) -> list[int]:
    """Token ids of the chat template for one user message plus the assistant header."""
    enc = render_chat(tokenizer, [{"role": "user", "content": user_text}],
                      add_generation_prompt=True, tokenize=True)   # bounded: chat_template.py
    ids = enc["input_ids"] if hasattr(enc, "keys") else enc   # transformers 5: BatchEncoding
    return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def _cut_at_stop(row: list[int], stops: set[int]) -> list[int]:
    for k, t in enumerate(row):
        if t in stops:
            return row[:k + 1]
    return row


def sampling_kwargs(stops: list[int], pad: int, max_new_tokens: int, temperature: float,
                    top_p: float = 1.0) -> dict:
    """``generate`` arguments. Explicit arguments win over the checkpoint's
    generation_config (Qwen2.5-Instruct ships top_k 20, top_p 0.8, repetition_penalty 1.05),
    so what is sampled is exactly softmax(logits / T), the distribution the trainer scores."""
    kwargs = dict(max_new_tokens=max_new_tokens, eos_token_id=stops, pad_token_id=pad,
                  repetition_penalty=1.0, no_repeat_ngram_size=0)
    if temperature > 0:
        kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    return kwargs


def left_pad(prompts: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids [b, width] left-padded with ``pad``, attention mask [b, width])."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, width - len(p):] = torch.tensor(p)
        mask[b, width - len(p):] = 1
    return ids, mask


@torch.no_grad()
def generate(model, tokenizer, prompts: list[list[int]], *, max_new_tokens: int,
             temperature: float, top_p: float = 1.0, batch_size: int = 64,
             autocast_bf16: bool = True) -> list[list[int]]:
    """Sample one response per prompt (temperature 0: greedy), KV-cached ``generate``.
    Full-vocabulary sampling (top_k off) so the sampled distribution is the scored one."""
    device = next(model.parameters()).device
    stops = stop_token_ids(model, tokenizer)
    pad = tokenizer.pad_token_id
    out: list[list[int]] = []
    was_training = model.training
    model.eval()
    for lo in range(0, len(prompts), batch_size):
        chunk = prompts[lo:lo + batch_size]
        ids, mask = left_pad(chunk, pad)
        width = ids.shape[1]
        kwargs = sampling_kwargs(stops, pad, max_new_tokens, temperature, top_p)
        with autocast(device, autocast_bf16):
            seqs = guarded_generate(model, input_ids=ids.to(device),      # NaN/inf logits:
                                    attention_mask=mask.to(device), **kwargs)  # an error
        for row in seqs[:, width:].tolist():
            out.append(_cut_at_stop(row, set(stops)))
    model.train(was_training)
    return out


def fit_prompt(tokenizer, prompts, task_text, history, observation, admissible,
               history_length: int, max_tokens: int) -> tuple[str, list[int]]:
    """Render the turn prompt; when it is over ``max_tokens``, show fewer history pairs
    (the task and the current observation are never cut)."""
    for h in range(history_length, -1, -1):
        text = prompts.render_turn_prompt(task_text, history, observation, admissible,
                                          history_length=h)
        ids = chat_prompt_ids(tokenizer, text)
        if len(ids) <= max_tokens:
            break
    return text, ids


def collect_rollouts(model, tokenizer, pool: EnvPool, tasks: list[Task], group_size: int,
                     prompts, *, max_turns: int, max_new_tokens: int, temperature: float,
                     top_p: float = 1.0, history_length: int = 2, max_prompt_tokens: int = 2048,
                     generation_batch_size: int = 64, autocast_bf16: bool = True,
                     engine=None, seed: Optional[int] = None) -> list[Episode]:
    """Play ``group_size`` episodes of every task (slot g*G + i plays tasks[g], rollout i).
    ``engine`` (sharpo_train/generation): samples the turns instead of HF ``generate``
    and records each token's sampled log-prob (``Turn.sampled_logp``); turn k's requests
    are seeded ``seed + 100003 * k + row``."""
    episodes = [Episode(task, g, i) for g, task in enumerate(tasks) for i in range(group_size)]
    first = pool.reset([ep.task for ep in episodes])
    obs = [r.observation for r in first]
    history: list[list[tuple[str, str]]] = [[] for _ in episodes]
    done = [r.done for r in first]
    for ep, r in zip(episodes, first):
        if r.done:
            ep.error = r.info.get("error", "reset ended the episode")
    for turn_no in range(max_turns):
        active = [s for s in range(len(episodes)) if not done[s]]
        if not active:
            break
        texts, ids = [], []
        for s in active:
            o = obs[s]
            t, p = fit_prompt(tokenizer, prompts, o.task_text, history[s], o.text,
                              o.admissible_actions, history_length, max_prompt_tokens)
            texts.append(t)
            ids.append(p)
        sampled: list = [None] * len(ids)
        if engine is None:
            responses = generate(model, tokenizer, ids, max_new_tokens=max_new_tokens,
                                 temperature=temperature, top_p=top_p,
                                 batch_size=generation_batch_size, autocast_bf16=autocast_bf16)
        else:
            out = engine.generate(ids, max_new_tokens=max_new_tokens, temperature=temperature,
                                  top_p=top_p, stop_ids=stop_token_ids(model, tokenizer),
                                  seed=None if seed is None else seed + 100003 * turn_no)
            responses, sampled = out.token_ids, out.logprobs or sampled
        stops = set(stop_token_ids(model, tokenizer))
        actions: dict[int, Optional[str]] = {}
        turns: dict[int, Turn] = {}
        for s, text, p, resp, lp in zip(active, texts, ids, responses, sampled):
            body = resp[:-1] if resp and resp[-1] in stops else resp
            resp_text = tokenizer.decode(body, skip_special_tokens=False)
            action = prompts.parse_action(resp_text)
            actions[s] = action
            turns[s] = Turn(text, p, resp, resp_text, action, spans=find_spans(tokenizer, resp),
                            sampled_logp=lp)
        results = pool.step(actions)
        for s in active:
            r = results[s]
            turn = turns[s]
            turn.observation_after = r.observation.text
            ep = episodes[s]
            ep.turns.append(turn)
            history[s].append((obs[s].text, turn.action if turn.action is not None else "(invalid)"))
            obs[s] = r.observation
            ep.reward = float(r.reward)
            ep.success = bool(r.info.get("won", r.reward > 0))
            if r.info.get("task_score") is not None:
                ep.score = float(r.info["task_score"])
            if r.done:
                done[s] = True
                ep.error = r.info.get("error")
    for ep, finished in zip(episodes, done):
        ep.truncated = not finished
    return episodes
