"""Small synthetic multi-turn text tasks for tests of the training loop. NOT benchmarks.

"Counter": the observation shows a number and a target; the admissible actions are
"increase" and "decrease"; the episode is won (reward 1) when the number equals the target,
and lost at ``max_steps``. Task families "Up" / "Down" (target above / below the start).
Actions are parsed from ``<action>...</action>`` exactly as for ALFWorld; a reply without
one is an invalid action ("Nothing happens."). Deterministic, in-process, instant, so the
loop tests run in seconds. Registered as env.name "synthetic" (``ENV_SPEC``).

env_config keys: num_train (16), num_eval (4), max_steps (6), max_distance (2), seed (0).

"Signs" (env.name "signs"): a corridor of ``num_signs`` rooms; in each, the observation
says which way a sign points, and the admissible actions are "go left" / "go right".
Following the sign moves to the next room; the other way ends the episode (reward 0);
following every sign wins (reward 1). The optimal policy is known (follow the sign), a
format-only policy that picks at random wins 2**-num_signs of its episodes, and a failed
episode holds right steps before its one wrong step: the case segment-level credit is
for. Used by the learning-direction test (tests/train/loops/test_learning_direction.py).
Registered as env.name "signs" (``SIGNS_SPEC``).
env_config keys: num_train (16), num_eval (8), num_signs (3), seed (0).
"""
from __future__ import annotations

import random
from typing import Optional, Sequence

import sys

from .env_config import check_env_config, opt_int
from .base import Env, EnvSuite, Observation, SerialEnvPool, StepResult, Task
from .spec import EnvSpec
from .turn_prompt import parse_action, render_hint   # the shared reply format and hint

# env.<key> -> (type, lo, hi) of each environment here (train_config.check_env reads it via ENV_SPEC)
SETTINGS: dict[str, tuple] = {
    "name": (str,), "num_train": (int, 1, 100000), "num_eval": (int, 0, 100000),
    "max_steps": (int, 1, 10000), "max_distance": (int, 1, 10000), "seed": (int, 0, None)}
SIGNS_SETTINGS: dict[str, tuple] = {
    "name": (str,), "num_train": (int, 1, 100000), "num_eval": (int, 0, 100000),
    "num_signs": (int, 1, 100), "seed": (int, 0, None)}
SETTINGS_HELP = {"num_train": "training tasks (default 16)", "num_eval": "held-out tasks (default 4)",
                 "max_steps": "step limit per episode (default 6)",
                 "max_distance": "largest distance to the target (default 2)",
                 "seed": "seed of the task draw (default 0)"}
SIGNS_SETTINGS_HELP = {"num_train": "training tasks (default 16)",
                       "num_eval": "held-out tasks (default 8)",
                       "num_signs": "signs per task, one turn each (default 3)",
                       "seed": "seed of the task draw (default 0)"}
_KNOWN = set(SETTINGS)
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


def _env_int(env_config: dict, key: str, default: int, lo: int) -> int:
    """env_config[key] (``default`` when absent or null): an int >= lo (env_config.opt_int)."""
    v = opt_int(env_config, key, lo)
    return default if v is None else v


def make_suite(env_config: dict) -> EnvSuite:
    cfg = check_env_config(env_config, _KNOWN, "synthetic")
    max_steps, dist = _env_int(cfg, "max_steps", 6, 1), _env_int(cfg, "max_distance", 2, 1)
    seed = _env_int(cfg, "seed", 0, 0)
    train = make_tasks(_env_int(cfg, "num_train", 16, 1), seed, dist, "train")
    evals = make_tasks(_env_int(cfg, "num_eval", 4, 0), seed + 1, dist, "eval")
    return EnvSuite(train, evals, lambda n=None: SerialEnvPool(lambda: CounterEnv(max_steps)),
                    ["Up", "Down"])


SIGN_ACTIONS = ["go left", "go right"]
_SIGNS_KNOWN = set(SIGNS_SETTINGS)


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
    cfg = check_env_config(env_config, _SIGNS_KNOWN, "signs")
    k, seed = _env_int(cfg, "num_signs", 3, 1), _env_int(cfg, "seed", 0, 0)
    train = make_sign_tasks(_env_int(cfg, "num_train", 16, 1), seed, k, "train")
    evals = make_sign_tasks(_env_int(cfg, "num_eval", 8, 0), seed + 1, k, "eval")
    return EnvSuite(train, evals, lambda n=None: SerialEnvPool(SignsEnv), ["Signs"])


# this module is both environments' prompts (render_turn_prompt above; parse_action and
# render_hint shared)
ENV_SPEC = EnvSpec(name="synthetic", make_suite=make_suite, prompts=sys.modules[__name__],
                   settings=SETTINGS, settings_help=SETTINGS_HELP, families=("Up", "Down"),
                   label="Counter (synthetic)")
SIGNS_SPEC = EnvSpec(name="signs", make_suite=make_signs_suite, prompts=sys.modules[__name__],
                     settings=SIGNS_SETTINGS, settings_help=SIGNS_SETTINGS_HELP,
                     families=("Signs",), label="Signs (synthetic)")

__all__ = ["CounterEnv", "SignsEnv", "make_suite", "make_signs_suite", "make_tasks",
           "make_sign_tasks", "render_turn_prompt", "parse_action", "render_hint", "ENV_SPEC",
           "SIGNS_SPEC"]
