"""The environment interface the trainer talks to.

A *task* is one game/instance (ALFWorld: one game folder). An episode is a multi-turn
text interaction with a terminal reward (docs/method.md §1). Environments are run in batches
through an :class:`EnvPool`, which may use worker processes; a failing episode ends as a
failure with ``info["error"]`` set and never takes the rest of the batch down.
"""
from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from ..checks import check_int


@dataclass(frozen=True)
class Task:
    """One playable instance. ``family`` is the task family used for per-family success
    (ALFWorld: Pick, Clean, Heat, Cool, Look, Pick2). ``source`` locates it (a folder)."""

    id: str
    family: str
    source: str = ""


def episodes_by_family(tasks) -> dict[str, int]:
    """Family -> number of ``tasks`` of it (eval.json "per_family_episodes")."""
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.family] = counts.get(t.family, 0) + 1
    return counts


def balanced_tasks(tasks: Sequence, n: int, key: str = "eval") -> list:
    """``n`` of ``tasks`` (0 or n >= len: all of them, in their order) spread over families:
    each family's tasks are shuffled with a generator seeded by ``key``, then the families
    (sorted by name) take turns. Deterministic for the same (tasks, n, key)."""
    check_int(n, "num_tasks", 0)
    tasks = list(tasks)
    if n == 0 or n >= len(tasks):
        return tasks
    by_family: dict[str, list] = {}
    for t in tasks:
        by_family.setdefault(t.family, []).append(t)
    rng = random.Random(key)
    for group in by_family.values():        # first-seen order: the draws are reproducible
        rng.shuffle(group)
    picked, k = [], 0
    while len(picked) < n:
        for fam in sorted(by_family):
            if k < len(by_family[fam]) and len(picked) < n:
                picked.append(by_family[fam][k])
        k += 1
    return picked


@dataclass
class Observation:
    text: str                      # what the agent sees after reset / its last action
    task_text: str                 # the goal, e.g. "Your task is to: put a mug in cabinet."
    admissible_actions: list[str] = field(default_factory=list)  # may be empty


@dataclass
class StepResult:
    observation: Observation
    reward: float                  # terminal/binary for ALFWorld: 1.0 on the goal
    done: bool
    info: dict = field(default_factory=dict)  # "won": bool, "error": str (episode ended by a fault)


class Env(ABC):
    """One episode at a time, in-process."""

    @abstractmethod
    def reset(self, task: Task) -> Observation: ...

    @abstractmethod
    def step(self, action: Optional[str]) -> StepResult:
        """``action=None`` means the policy produced no parsable action: the environment
        answers it as an invalid action (e.g. "Nothing happens.") and the episode goes on."""

    def close(self) -> None:
        pass


class EnvPool(ABC):
    """A batch of episodes stepped together (slot i plays tasks[i])."""

    @abstractmethod
    def reset(self, tasks: list[Task]) -> list[StepResult]:
        """Start one episode per task; a failed reset gives a done StepResult with
        reward 0 and info["error"]."""

    @abstractmethod
    def step(self, actions: dict[int, Optional[str]]) -> dict[int, StepResult]:
        """Step the slots named in ``actions`` (only unfinished ones)."""

    def close(self) -> None:
        pass


class SerialEnvPool(EnvPool):
    """Runs in-process environments one after the other (cheap envs, tests)."""

    def __init__(self, make_env: Callable[[], Env]):
        self._make_env = make_env
        self._envs: list[Env] = []

    def reset(self, tasks: list[Task]) -> list[StepResult]:
        while len(self._envs) < len(tasks):
            self._envs.append(self._make_env())
        out = []
        for env, task in zip(self._envs, tasks):
            try:
                out.append(StepResult(env.reset(task), 0.0, False, {"won": False}))
            except Exception as exc:  # an engine fault ends this episode only
                out.append(StepResult(Observation("", ""), 0.0, True,
                                      {"won": False, "error": f"reset: {exc!r}"}))
        return out

    def step(self, actions: dict[int, Optional[str]]) -> dict[int, StepResult]:
        out = {}
        for i, action in actions.items():
            try:
                out[i] = self._envs[i].step(action)
            except Exception as exc:
                out[i] = StepResult(Observation("", ""), 0.0, True,
                                    {"won": False, "error": f"step: {exc!r}"})
        return out

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs.clear()


# name -> factory(env_config: dict) -> EnvSuite ; see sharpo_train/envs/__init__.py
@dataclass
class EnvSuite:
    """What an environment name in the config resolves to."""

    train_tasks: list[Task]
    eval_tasks: list[Task]
    make_pool: Callable[[int], EnvPool]   # make_pool(num_workers) -> EnvPool
    families: list[str]
