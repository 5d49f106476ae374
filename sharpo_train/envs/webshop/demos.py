"""Expert demonstrations for a supervised warm start, in the trainer's per-turn format.

Same JSONL layout as `sharpo alfworld demos` (envs/alfworld/demos.py): one record per
agent turn of an episode the expert wins (WebShop score 1)::

    {"task_id": "train/1517", "family": "beauty", "step": 0, "num_steps": 4, "won": true,
     "expert": "webshop", "score": 1.0,
     "messages": [{"role": "user", "content": <prompts.render_turn_prompt(...)>},
                  {"role": "assistant", "content": "<think>...</think><action>...</action>"}]}

The <think> text is the expert's one-line reason for its action (agents.ExpertAgent).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..base import Task
from ..demo_files import check_out_path, open_out, write_records
from .agents import ExpertAgent
from .engine import DEFAULT_MAX_STEPS, WebShopEnv, get_world
from .prompts import DEFAULT_HISTORY_LENGTH, format_response, render_turn_prompt


@dataclass
class DemoStats:
    episodes: int = 0
    won: int = 0
    turns: int = 0


def demo_episode(env: WebShopEnv, task: Task, *,
                 history_length: int = DEFAULT_HISTORY_LENGTH) -> list[dict]:
    """The per-turn records of one expert episode ([] when it does not reach score 1)."""
    obs = env.reset(task)
    expert = ExpertAgent(env)
    history: list[tuple[str, str]] = []
    turns, res = [], None
    while res is None or not res.done:
        action, why = expert.act()
        prompt = render_turn_prompt(obs.task_text, history, obs.text, obs.admissible_actions,
                                    history_length)
        turns.append((prompt, format_response(why, action)))
        res = env.step(action)
        history.append((obs.text, action))
        obs = res.observation
    if not res.info.get("won"):
        return []
    return [{"task_id": task.id, "family": task.family, "step": i, "num_steps": len(turns),
             "won": True, "expert": "webshop", "score": res.info["task_score"],
             "messages": [{"role": "user", "content": p}, {"role": "assistant", "content": r}]}
            for i, (p, r) in enumerate(turns)]


def write_demos(out_path: str, *, split: str = "train", limit: Optional[int] = None,
                data_dir=None, max_steps: int = DEFAULT_MAX_STEPS,
                history_length: int = DEFAULT_HISTORY_LENGTH) -> DemoStats:
    """Write the demonstrations of the first ``limit`` goals of ``split`` (JSONL)."""
    check_out_path(out_path)
    world = get_world(data_dir)
    env = WebShopEnv(world, max_steps=max_steps)
    stats = DemoStats()
    with open_out(out_path) as f:
        for task in world.tasks(split, limit):
            records = demo_episode(env, task, history_length=history_length)
            stats.episodes += 1
            if records:
                stats.won += 1
                stats.turns += write_records(f, records)
    return stats
