"""Playing batches of games with an agent, and success overall and per task family.

``play`` drives any EnvPool (the trainer's policy, the expert, a random agent) and
``success_table`` is the per-family summary `sharpo alfworld play` prints; a trained
policy is evaluated the same way by passing its own ``act`` function.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional, Sequence

from ..base import EnvPool, Observation, Task
from .games import FAMILIES


@dataclass
class AgentView:
    """What an agent sees in one slot at one turn."""

    slot: int
    task: Task
    observation: Observation
    history: list[tuple[str, str]]      # (observation, action) of earlier turns
    info: dict                          # the last StepResult.info (expert_action, admissible)


@dataclass
class EpisodeRecord:
    task_id: str
    family: str
    won: bool
    steps: int
    error: Optional[str] = None
    actions: list[str] = field(default_factory=list)


Act = Callable[[list[AgentView]], list[Optional[str]]]


def expert_agent(views: list[AgentView]) -> list[Optional[str]]:
    """Plays info["expert_action"] (the pool must be made with an expert)."""
    return [v.info.get("expert_action") for v in views]


def random_agent(seed: int = 0) -> Act:
    """Uniformly random admissible command (seeded)."""
    rng = random.Random(seed)

    def act(views: list[AgentView]) -> list[Optional[str]]:
        return [rng.choice(v.observation.admissible_actions) if v.observation.admissible_actions
                else None for v in views]
    return act


def play(pool: EnvPool, tasks: Sequence[Task], act: Act, *, batch_size: int = 16,
         keep_actions: bool = False) -> list[EpisodeRecord]:
    """Play every task once, ``batch_size`` episodes at a time; one record per task."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: expected an int >= 1, got {batch_size!r}")
    records: list[EpisodeRecord] = []
    tasks = list(tasks)
    for start in range(0, len(tasks), batch_size):
        batch = tasks[start:start + batch_size]
        first = pool.reset(batch)
        views = {}
        done_rec: dict[int, EpisodeRecord] = {}
        for i, r in enumerate(first):
            if r.done:
                done_rec[i] = EpisodeRecord(batch[i].id, batch[i].family, bool(r.info.get("won")),
                                            0, r.info.get("error"))
            else:
                views[i] = AgentView(i, batch[i], r.observation, [], r.info)
        actions_taken: dict[int, list[str]] = {i: [] for i in range(len(batch))}
        while views:
            order = sorted(views)
            chosen = act([views[i] for i in order])
            if len(chosen) != len(order):
                raise ValueError(f"act: returned {len(chosen)} actions for {len(order)} views")
            results = pool.step(dict(zip(order, chosen)))
            for i, a in zip(order, chosen):
                v = views[i]
                r = results[i]
                actions_taken[i].append(a if a is not None else "")
                if r.done:
                    done_rec[i] = EpisodeRecord(batch[i].id, batch[i].family, bool(r.info.get("won")),
                                                int(r.info.get("steps", len(actions_taken[i]))),
                                                r.info.get("error"))
                    del views[i]
                else:
                    views[i] = AgentView(i, v.task, r.observation,
                                         v.history + [(v.observation.text, a or "")], r.info)
        for i in range(len(batch)):
            rec = done_rec[i]
            if keep_actions:
                rec.actions = actions_taken[i]
            records.append(rec)
    return records


def success_table(records: Sequence[EpisodeRecord], families: Optional[Sequence[str]] = None) -> dict:
    """{"success": rate, "episodes": n, "won": k, "errors": e, "mean_steps_won": x,
    "per_family": {family: {"success", "episodes", "won"}}} (families in FAMILIES order)."""
    fams = list(families) if families else [f for f in FAMILIES if any(r.family == f for r in records)]
    fams += sorted({r.family for r in records} - set(fams))
    won = [r for r in records if r.won]
    out = {"success": (len(won) / len(records)) if records else 0.0, "episodes": len(records),
           "won": len(won), "errors": sum(1 for r in records if r.error),
           "mean_steps_won": (sum(r.steps for r in won) / len(won)) if won else None,
           "per_family": {}}
    for f in fams:
        rs = [r for r in records if r.family == f]
        k = sum(1 for r in rs if r.won)
        out["per_family"][f] = {"success": (k / len(rs)) if rs else None, "episodes": len(rs), "won": k}
    return out


def format_table(table: dict) -> str:
    lines = [f"{'family':<8} {'success':>8} {'won':>5} {'episodes':>9}"]
    for f, row in table["per_family"].items():
        rate = "-" if row["success"] is None else f"{100 * row['success']:.1f}%"
        lines.append(f"{f:<8} {rate:>8} {row['won']:>5} {row['episodes']:>9}")
    lines.append(f"{'All':<8} {100 * table['success']:>7.1f}% {table['won']:>5} {table['episodes']:>9}")
    if table["errors"]:
        lines.append(f"({table['errors']} episode(s) ended by an engine/worker fault)")
    return "\n".join(lines)


def records_to_json(records: Sequence[EpisodeRecord]) -> list[dict]:
    return [asdict(r) for r in records]
