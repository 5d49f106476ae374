"""Small synthetic multi-turn text tasks for tests of the training loop. NOT benchmarks.

"Counter": the observation shows a number and a target; the admissible actions are
"increase" and "decrease"; the episode is won (reward 1) when the number equals the target,
and lost at ``max_steps``. Task families "Up" / "Down" (target above / below the start).
Actions are parsed from ``<action>...</action>`` exactly as for ALFWorld; a reply without
one is an invalid action ("Nothing happens."). Deterministic, in-process, instant, so the
loop tests run in seconds. Registered as env.name "synthetic" (``ENV_SPEC``).

env_config keys: ``CounterSettings`` (defaults, help and ranges: `sharpo settings env.`).

"Signs" (env.name "signs"): a corridor of ``num_signs`` rooms; in each, the observation
says which way a sign points, and the admissible actions are "go left" / "go right".
Following the sign moves to the next room; the other way ends the episode (reward 0);
following every sign wins (reward 1). The optimal policy is known (follow the sign), a
format-only policy that picks at random wins 2**-num_signs of its episodes, and a failed
episode holds right steps before its one wrong step: the case segment-level credit is
for. Used by the learning-direction test (tests/train/loops/test_learning_direction.py).
Registered as env.name "signs" (``SIGNS_SPEC``).
env_config keys: ``SignsSettings``.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional, Sequence

import sys

from ..settings.loader import in_range, setting
from .env_config import settings_from
from .base import Env, EnvSuite, Observation, SerialEnvPool, StepResult, Task
from .spec import EnvSpec
from .turn_prompt import parse_action, render_hint   # the shared reply format and hint


@dataclass
class TaskDraw:
    """The env.* both synthetic environments share: how many tasks, drawn from which seed."""
    num_train: int = setting(16, "training tasks")
    num_eval: int = setting(4, "held-out tasks")
    seed: int = setting(0, "seed of the task draw")

    def validate(self) -> None:
        in_range(self, "num_train", 1, 100000)
        in_range(self, "num_eval", 0, 100000)
        in_range(self, "seed", 0)


@dataclass
class CounterSettings(TaskDraw):
    """env.* of "synthetic" (the counter)."""
    max_steps: int = setting(6, "step limit per episode")
    max_distance: int = setting(2, "largest distance to the target")

    def validate(self) -> None:
        super().validate()
        in_range(self, "max_steps", 1, 10000)
        in_range(self, "max_distance", 1, 10000)


@dataclass
class SignsSettings(TaskDraw):
    """env.* of "signs"."""
    num_eval: int = setting(8, "held-out tasks")
    num_signs: int = setting(3, "signs per task, one turn each")

    def validate(self) -> None:
        super().validate()
        in_range(self, "num_signs", 1, 100)


ACTIONS = ["increase", "decrease"]


def render_turn_prompt(task_text: str, history: Sequence[tuple[str, str]], observation: str,
                       admissible: Sequence[str], history_length: int = 2) -> str:
    lines = [task_text]
    for k, (obs, act) in enumerate(list(history)[-history_length:] if history_length else [], 1):
        lines.append(f"[Observation: {obs} Action: {act}]")
    lines.append(f"Now: {observation}")
    lines.append("Admissible actions: " + ", ".join(admissible))
    lines.append("Think inside <think> </think>, then give one action inside <action> </action>.")
    return "\n".join(lines)


def _parse(task: Task) -> tuple[int, int]:
    start, target = task.source.split(":")
    return int(start), int(target)


class CounterEnv(Env):
    def __init__(self, max_steps: int = 6):
        self.max_steps = max_steps
        self.value = self.target = self.steps = 0

    def _obs(self, text: str) -> Observation:
        return Observation(f"{text} The counter shows {self.value}.",
                           f"Your task is to: make the counter show {self.target}.", list(ACTIONS))

    def reset(self, task: Task) -> Observation:
        self.value, self.target = _parse(task)
        self.steps = 0
        return self._obs("You see a counter.")

    def step(self, action: Optional[str]) -> StepResult:
        self.steps += 1
        if action == "increase":
            self.value += 1
            text = "You press increase."
        elif action == "decrease":
            self.value -= 1
            text = "You press decrease."
        else:
            text = "Nothing happens."
        won = self.value == self.target
        done = won or self.steps >= self.max_steps
        return StepResult(self._obs(text), 1.0 if won else 0.0, done, {"won": won})


def make_tasks(n: int, seed: int, max_distance: int, prefix: str) -> list[Task]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        start = rng.randint(0, 9)
        dist = rng.randint(1, max_distance) * rng.choice([-1, 1])
        out.append(Task(f"{prefix}-{i}", "Up" if dist > 0 else "Down", f"{start}:{start + dist}"))
    return out


def make_suite(env_config: dict) -> EnvSuite:
    s = settings_from(env_config, CounterSettings, "synthetic")
    train = make_tasks(s.num_train, s.seed, s.max_distance, "train")
    evals = make_tasks(s.num_eval, s.seed + 1, s.max_distance, "eval")
    return EnvSuite(train, evals, lambda n=None: SerialEnvPool(lambda: CounterEnv(s.max_steps)),
                    ["Up", "Down"])


SIGN_ACTIONS = ["go left", "go right"]


class SignsEnv(Env):
    def __init__(self):
        self.signs: list[str] = []
        self.room = 0

    def _obs(self, text: str) -> Observation:
        if self.room < len(self.signs):
            text += (f" You are in room {self.room + 1} of {len(self.signs)}. "
                     f"A sign on the wall points {self.signs[self.room]}.")
        return Observation(text.strip(), "Your task is to: follow the signs to the exit.",
                           list(SIGN_ACTIONS))

    def reset(self, task: Task) -> Observation:
        self.signs = task.source.split(",")
        self.room = 0
        return self._obs("You enter a corridor.")

    def step(self, action: Optional[str]) -> StepResult:
        if action not in SIGN_ACTIONS:
            return StepResult(self._obs("Nothing happens."), 0.0, False, {"won": False})
        if action != f"go {self.signs[self.room]}":
            return StepResult(self._obs("You walk into a wall and the lights go out."), 0.0,
                              True, {"won": False})
        self.room += 1
        won = self.room == len(self.signs)
        return StepResult(self._obs("You reach the exit!" if won else "You walk on."),
                          1.0 if won else 0.0, won, {"won": won})


def make_sign_tasks(n: int, seed: int, num_signs: int, prefix: str) -> list[Task]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        signs = [rng.choice(["left", "right"]) for _ in range(num_signs)]
        out.append(Task(f"{prefix}-{i}", "Signs", ",".join(signs)))
    return out


def make_signs_suite(env_config: dict) -> EnvSuite:
    s = settings_from(env_config, SignsSettings, "signs")
    train = make_sign_tasks(s.num_train, s.seed, s.num_signs, "train")
    evals = make_sign_tasks(s.num_eval, s.seed + 1, s.num_signs, "eval")
    return EnvSuite(train, evals, lambda n=None: SerialEnvPool(SignsEnv), ["Signs"])


# this module is both environments' prompts (render_turn_prompt above; parse_action and
# render_hint shared)
ENV_SPEC = EnvSpec(name="synthetic", make_suite=make_suite, prompts=sys.modules[__name__],
                   settings_class=CounterSettings, families=("Up", "Down"),
                   label="Counter (synthetic)")
SIGNS_SPEC = EnvSpec(name="signs", make_suite=make_signs_suite, prompts=sys.modules[__name__],
                     settings_class=SignsSettings,
                     families=("Signs",), label="Signs (synthetic)")

__all__ = ["CounterEnv", "SignsEnv", "make_suite", "make_signs_suite", "make_tasks",
           "make_sign_tasks", "render_turn_prompt", "parse_action", "render_hint", "ENV_SPEC",
           "SIGNS_SPEC", "CounterSettings", "SignsSettings"]
