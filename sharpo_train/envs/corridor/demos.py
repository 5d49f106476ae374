"""Demonstrations for a warm start, in the trainer's per-turn format (JSONL; the record
layout of `sharpo alfworld demos`, docs/training.md), one record per turn::

    {"task_id": "train-3", "episode": "train-3/0", "family": "corridor", "step": 2, "num_steps": 10, "won": false,
     "expert": "random", "action": "left", "observation_after": "...", "admissible": [...],
     "hint": "A successful attempt at this task:\\nturn 1: ...",
     "messages": [{"role": "user", "content": <prompts.render_turn_prompt(...)>},
                  {"role": "assistant", "content": "<think>a red lamp</think><action>left</action>"}]}

``agent``: "expert" (the right door at every lamp; only won episodes are written, which is
all of them), "random" (a format-only warm start: the reply format and the prompts, not
the lamp code; every episode is written) or "mixed" (one of each per task). ``hint`` is a *peer's* trajectory in the
teacher's layout (prompts.render_hint): another episode of the same task that took the same
door at every lamp and its own random doors elsewhere, so that an SFT run with
``sft.hint_fraction`` learns what a teacher needs: at a lamp, the hint's door of that turn
(sft.hinted_demos uses ``hint`` when a record has one). ``hint_informative`` is true at the
lamp turns only: the hint says nothing about the others (the peer's door there is its
own random one), so they get no hinted copy and every hinted example teaches the reading.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from ...checks import check_int
from ..base import Task
from ..demo_files import check_out_path, open_out, write_records
from .engine import TASK_TEXT, task_spec
from .agents import check_agent, lamp_doors, play_episode
from .prompts import DEFAULT_HISTORY_LENGTH, format_response, render_hint, render_turn_prompt, \
    turn_think


@dataclass
class DemoStats:
    episodes: int = 0
    won: int = 0
    turns: int = 0


def demo_records(task: Task, agent: str, rng: random.Random, *, episode: str = "",
                 history_length: int = DEFAULT_HISTORY_LENGTH) -> list[dict]:
    """The per-turn records of one episode of ``agent`` on ``task`` ([] for an expert
    episode that was not won)."""
    ep = play_episode(task, agent, rng)
    if agent == "expert" and not ep.won:
        return []
    peer = play_episode(task, "random", rng, fixed=lamp_doors(ep))
    spec = task_spec(task)
    steps = [(t.action, t.observation_after) for t in peer.turns]
    hint = render_hint(steps)
    history: list[tuple[str, str]] = []
    out = []
    for k, t in enumerate(ep.turns):
        prompt = render_turn_prompt(TASK_TEXT, history, t.observation, t.admissible,
                                    history_length)
        out.append({"task_id": task.id, "episode": episode or task.id,
                    "family": task.family, "step": k,
                    "num_steps": len(ep.turns), "won": ep.won, "expert": agent,
                    "action": t.action, "observation_after": t.observation_after,
                    "admissible": t.admissible, "hint": hint,
                    "hint_to_turn": render_hint(steps[:k + 1]),
                    "hint_informative": str(k + 1) in spec["decisive"],
                    "messages": [{"role": "user", "content": prompt},
                                 {"role": "assistant",
                                  "content": format_response(turn_think(t.observation),
                                                             t.action)}]})
        history.append((t.observation, t.action))
    return out


def write_demos(out_path: str, tasks: Sequence[Task], *, agent: str = "expert",
                passes: int = 1, seed: int = 0,
                history_length: int = DEFAULT_HISTORY_LENGTH,
                free_keep: float = 1.0) -> DemoStats:
    """``passes`` episodes of ``agent`` on each task, written to ``out_path`` (JSONL);
    ``agent="mixed"``: one expert and one random episode of each task per pass (a warm
    start that takes the right door at a lamp about 3/4 of the time). ``free_keep``: the
    share of the turns without a lamp that are written (each kept at random, drawn apart
    from the episodes, so 1 writes exactly what it always did); every lamp turn is
    written (the recipe's sized(): the same mix of lamp and free turns at every size)."""
    agents = ["expert", "random"] if agent == "mixed" else [check_agent(agent)]
    check_int(passes, "passes", 1)
    if (not isinstance(free_keep, (int, float)) or isinstance(free_keep, bool)
            or not 0 < free_keep <= 1):
        raise ValueError(f"free_keep: expected a number in (0, 1], got {free_keep!r}")
    check_out_path(out_path)
    rng, stats = random.Random(seed), DemoStats()
    keep = random.Random(f"corridor-free-turns-{seed}")
    with open_out(out_path) as f:
        for p in range(passes):
            for task in tasks:
                for who in agents:
                    records = demo_records(task, who, rng, episode=f"{task.id}/{p}/{who}",
                                           history_length=history_length)
                    if free_keep < 1:
                        records = [r for r in records if r["hint_informative"]
                                   or keep.random() < free_keep]
                    stats.episodes += 1
                    stats.won += bool(records and records[0]["won"])
                    stats.turns += write_records(f, records)
    return stats
