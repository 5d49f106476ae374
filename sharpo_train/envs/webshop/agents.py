"""Scripted WebShop agents and the play loop behind `sharpo webshop play`.

Expert (knows the goal): search with the instruction (its price clause removed); on the
results pages, click the goal's product if listed, else "Next >" while the goal is among
the 50 hits further on; otherwise go back and search the product's title. On the item
page, click each goal option value not chosen yet, then "Buy Now". Every action it sends
is admissible except the search keywords themselves (the "search[<your query>]" slot).

Random: a uniformly random admissible action (seeded); the search slot gets three random
words of the instruction.
"""
from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional, Sequence

from ..base import Task
from .engine import SEARCH_PLACEHOLDER, WebShopEnv

_PRICE_CLAUSE = re.compile(r",? and price lower than [\d.]+ dollars\s*$")


def goal_search_text(goal: dict) -> str:
    return _PRICE_CLAUSE.sub("", goal["instruction_text"]).strip()


class ExpertAgent:
    """Plays one episode of ``env`` towards its goal; ``act()`` -> the next action and a
    one-line reason (used as the demonstrations' <think>)."""

    def __init__(self, env: WebShopEnv):
        self.env = env
        self.queries = [goal_search_text(env.goal), env.world.catalogue.by_asin[env.goal["asin"]]["Title"].lower()]
        self.attempt = 0

    def act(self) -> tuple[str, str]:
        env, goal = self.env, self.env.goal
        target = goal["asin"]
        clicks = env.clickables()
        if env.page == "search":
            q = self.queries[min(self.attempt, len(self.queries) - 1)]
            why = ("I should search for the product the instruction describes." if self.attempt == 0
                   else "The first search did not list the product; I search its exact name.")
            return f"search[{q}]", why
        if env.page == "results":
            start = (env.page_no - 1) * 10
            if target in env.hits[start:start + 10]:
                title = env.world.catalogue.by_asin[target]["Title"]
                return f"click[{target.lower()}]", f"{target} ({title[:60]}) matches what I am looking for."
            if target in env.hits[start + 10:] and "next >" in clicks:
                return "click[next >]", "No result on this page fits; I look at the next page."
            self.attempt += 1
            return "click[back to search]", "These results do not contain the product; I go back to search again."
        if env.page in ("description", "features", "reviews"):
            return "click[< prev]", "I go back to the item page."
        if env.page == "item":
            if env.asin != target:
                return "click[< prev]", "This is not the product I want; back to the results."
            for name, value in (goal["goal_options"].items() if isinstance(goal["goal_options"], dict)
                                else [(None, v) for v in goal["goal_options"]]):
                if value in clicks and (name is None or env.options.get(name) != value) and \
                        value not in env.options.values():
                    what = f"{name} {value}" if name else value
                    return f"click[{value}]", f"The instruction asks for {what}; I select it."
            return "click[buy now]", "The product and its options match the instruction, so I buy it."
        return "click[back to search]", "I start over from the search page."


def random_policy(seed: int = 0) -> Callable[[WebShopEnv, list[str]], str]:
    rng = random.Random(seed)

    def act(env: WebShopEnv, admissible: list[str]) -> str:
        a = rng.choice(admissible)
        if a == SEARCH_PLACEHOLDER:
            words = goal_search_text(env.goal).split()
            a = f"search[{' '.join(rng.sample(words, min(3, len(words))))}]"
        return a
    return act


@dataclass
class PlayRecord:
    task_id: str
    family: str
    won: bool
    score: float
    steps: int
    actions: list[str] = field(default_factory=list)
    purchase: Optional[dict] = None


def play(env: WebShopEnv, tasks: Sequence[Task], agent: str = "expert", *, seed: int = 0,
         keep_actions: bool = False) -> list[PlayRecord]:
    if agent not in ("expert", "random"):
        raise ValueError(f"agent: expected 'expert' or 'random', got {agent!r}")
    rand = random_policy(seed)
    out = []
    for task in tasks:
        obs = env.reset(task)
        expert = ExpertAgent(env) if agent == "expert" else None
        actions, res = [], None
        while res is None or not res.done:
            a = expert.act()[0] if expert else rand(env, obs.admissible_actions)
            actions.append(a)
            res = env.step(a)
            obs = res.observation
        out.append(PlayRecord(task.id, task.family, bool(res.info["won"]),
                              float(res.info["task_score"]), len(actions),
                              actions if keep_actions else [], res.info.get("purchase")))
    return out


def summary(records: Sequence[PlayRecord]) -> dict:
    n = len(records)
    fams: dict[str, list[PlayRecord]] = {}
    for r in records:
        fams.setdefault(r.family, []).append(r)

    def row(rs):
        return {"success": sum(r.won for r in rs) / len(rs) if rs else 0.0,
                "mean_reward": sum(r.score for r in rs) / len(rs) if rs else 0.0,
                "episodes": len(rs)}
    return {**row(records), "episodes": n,
            "per_family": {f: row(rs) for f, rs in sorted(fams.items())}}


def records_to_json(records: Sequence[PlayRecord]) -> list[dict]:
    return [asdict(r) for r in records]
