"""Scripted corridor agents and the play loop behind `sharpo corridor play`.

Expert (knows the lamp code): the right door at every lamp, a seeded random door
elsewhere (any door is right there). Random: a uniformly random admissible door every turn
(wins ``num_actions ** -num_decisive`` of its episodes).
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

from ..base import Task
from .engine import CorridorEnv, task_spec

AGENTS = ("expert", "random")


def check_agent(agent: str) -> str:
    if not isinstance(agent, str) or agent not in AGENTS:
        raise ValueError(f"agent: expected one of {list(AGENTS)}, got {agent!r}")
    return agent


def choose(agent: str, spec: dict, turn: int, rng: random.Random,
           fixed: Optional[dict] = None) -> str:
    """The door ``agent`` takes at ``turn`` (1-based) of a task ``spec`` (engine.task_spec).
    ``fixed`` {turn: door} overrides the choice at those turns (a peer that must agree)."""
    if fixed and turn in fixed:
        return fixed[turn]
    d = spec["decisive"].get(str(turn))
    if agent == "expert" and d is not None:
        return d[1]
    return rng.choice(spec["actions"])


@dataclass
class Turn:
    observation: str          # what the agent saw
    admissible: list
    action: str
    observation_after: str


@dataclass
class Episode:
    task: Task
    turns: list = field(default_factory=list)
    won: bool = False


def play_episode(task: Task, agent: str, rng: random.Random,
                 fixed: Optional[dict] = None) -> Episode:
    """One episode of ``agent`` on ``task`` (``fixed``: as in ``choose``)."""
    check_agent(agent)
    env, spec = CorridorEnv(), task_spec(task)
    obs = env.reset(task)
    ep = Episode(task)
    for turn in range(1, spec["turns"] + 1):
        a = choose(agent, spec, turn, rng, fixed)
        res = env.step(a)
        ep.turns.append(Turn(obs.text, list(obs.admissible_actions), a, res.observation.text))
        obs = res.observation
        if res.done:
            ep.won = bool(res.info["won"])
            break
    return ep


def lamp_doors(ep: Episode) -> dict:
    """{turn: door} of the turns of ``ep`` that had a lamp."""
    spec = task_spec(ep.task)
    return {t: ep.turns[t - 1].action for t in map(int, spec["decisive"]) if t <= len(ep.turns)}


@dataclass
class PlayRecord:
    task_id: str
    won: bool
    actions: list


def play(tasks: Sequence[Task], agent: str = "expert", *, seed: int = 0) -> list[PlayRecord]:
    rng = random.Random(seed)
    return [PlayRecord(t.id, ep.won, [x.action for x in ep.turns])
            for t in tasks for ep in [play_episode(t, agent, rng)]]


def summary(records: Sequence[PlayRecord]) -> dict:
    n = len(records)
    return {"episodes": n, "success": sum(r.won for r in records) / n if n else 0.0}


def records_to_json(records: Sequence[PlayRecord]) -> list[dict]:
    return [asdict(r) for r in records]
