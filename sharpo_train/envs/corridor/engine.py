"""The corridor: a text environment where credit assignment is the bottleneck.

An episode walks ``num_turns`` turns (default 10). At every turn the agent picks one of
``num_actions`` doors (default 2: ``left``, ``right``). On ``num_decisive`` turns (default
3, at positions drawn per task) a coloured lamp glows: its colour determines the safe door
(a fixed colour -> door code, ``clues_per_action`` colours per door, drawn from the
environment seed and the same for every task; the lamps of one task have distinct colours
while there are enough colours). The other turns have no lamp and accept
any door. A wrong door at a lamp does not end the episode and nothing says it was wrong;
the reward comes at the end: 1 when every lamp's door was taken, else 0. So a failed
episode holds right and wrong moves, and only the final reward tells them apart: the case
per-segment credit is for. A random agent wins ``num_actions ** -num_decisive`` of its
episodes (1/8 at the defaults).

Every observation carries the turn index ("Turn 3 of 10."), so that a successful peer's
trajectory, shown as a hint (prompts.render_hint: one line per turn), lines up with the
student's turns.

A task is self-contained in ``Task.source`` (JSON: turns, actions, {turn: [colour,
door]}), so saved rollouts can be labelled without the settings (``decisive_labels``).
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Optional

from ...checks import is_int
from ...errors import ConfigError
from ...settings.loader import in_range, need, setting, validate_settings
from ..base import Env, Observation, StepResult, Task

ACTION_NAMES = ("left", "right", "ahead", "up", "down", "back")
COLOURS = ("red", "blue", "green", "yellow", "white", "black", "orange", "purple", "pink",
           "grey", "brown", "gold")
FAMILY = "corridor"
TASK_TEXT = ("Your task is to: reach the exit of the corridor. Where a lamp glows, its "
             "colour shows the safe door.")


MAX_TURNS = 100            # the longest corridor (env.num_turns)


@dataclass
class CorridorSettings:
    """The env.* settings of the corridor (docs/corridor.md), the one declaration: the
    engine builds its tasks from it, `sharpo settings env.` reads its defaults, help and
    ranges. ``validate`` raises a ConfigError naming the key (``check``: with ``env.``;
    envs/env_config.py ``settings_from`` builds it from an env mapping)."""

    num_turns: int = setting(10, "turns per episode")
    num_decisive: int = setting(3, "decisive (lamp) turns per episode, at most num_turns")
    num_actions: int = setting(2, "doors to choose from")
    clues_per_action: int = setting(2, "lamp colours per door in the code (clues_per_action "
                                    "* num_actions <= 12 colours)")
    num_train: int = setting(500, "training tasks")
    num_eval: int = setting(200, "held-out tasks")
    seed: int = setting(0, "seed of the code and the tasks (held-out tasks from seed + 1)")
    format_penalty: float = setting(0.0, "every invalid reply costs format_penalty / "
                                    "num_turns of the final reward (0: the reward is success "
                                    "only; a reward setting, not a task one)")

    def validate(self) -> None:
        for key in ("num_turns", "num_decisive", "num_actions", "clues_per_action",
                    "num_train", "num_eval", "seed"):
            need(is_int(getattr(self, key)), key, "an int", getattr(self, key))
        in_range(self, "num_turns", 1, MAX_TURNS)
        in_range(self, "num_decisive", 1, MAX_TURNS)
        need(self.num_decisive <= self.num_turns, "num_decisive",
             f"an int in [1, num_turns={self.num_turns}]", self.num_decisive)
        in_range(self, "num_actions", 2, len(ACTION_NAMES))
        in_range(self, "clues_per_action", 1, len(COLOURS))
        need(self.clues_per_action * self.num_actions <= len(COLOURS), "clues_per_action",
             f"an int >= 1 with clues_per_action * num_actions <= {len(COLOURS)}",
             self.clues_per_action)
        in_range(self, "num_train", 1, 100000)
        in_range(self, "num_eval", 0, 100000)
        in_range(self, "seed", 0)
        in_range(self, "format_penalty", 0.0, 1.0)

    def check(self) -> "CorridorSettings":
        """``validate`` with every error naming ``env.<key>``; -> self."""
        return validate_settings(self, "env.")

    @property
    def actions(self) -> list[str]:
        return list(ACTION_NAMES[:self.num_actions])

    def code(self) -> dict[str, str]:
        """{colour: door}: the lamp code, fixed by ``seed`` (train and eval share it)."""
        colours = list(COLOURS)
        random.Random(f"corridor-code-{self.seed}").shuffle(colours)
        k = self.clues_per_action
        return {c: a for i, a in enumerate(self.actions) for c in colours[i * k:(i + 1) * k]}


def task_spec(task: Task) -> dict:
    """{"turns": n, "actions": [...], "decisive": {turn (1-based, str): [colour, door]}}."""
    try:
        spec = json.loads(task.source)
        spec["turns"], spec["actions"], spec["decisive"]      # noqa: B018 (presence check)
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"task {task.id!r}: not a corridor task (source {task.source!r})") \
            from exc
    ok = (isinstance(spec["turns"], int) and not isinstance(spec["turns"], bool)
          and isinstance(spec["actions"], list) and isinstance(spec["decisive"], dict)
          and all(isinstance(v, list) and len(v) == 2 for v in spec["decisive"].values()))
    if not ok:
        raise ValueError(f"task {task.id!r}: not a corridor task (expected turns: int, "
                         f"actions: list, decisive: {{turn: [colour, door]}}; source "
                         f"{task.source[:200]!r})")
    return spec


def layout_count(s: "CorridorSettings") -> int:
    """How many distinct task layouts the settings can draw (``make_tasks``' draw): the
    lamp turns (num_turns choose num_decisive) times the lamp colours (distinct while there
    are enough colours, else with repeats)."""
    colours, k = s.num_actions * s.clues_per_action, s.num_decisive
    arrangements = math.perm(colours, k) if k <= colours else colours ** k
    return math.comb(s.num_turns, k) * arrangements


def make_tasks(s: CorridorSettings) -> tuple[list[Task], list[Task]]:
    """(train, eval) tasks: decisive positions and lamp colours drawn per task (train from
    ``seed``, eval from ``seed + 1``); an eval task never repeats a train task's layout."""
    code = s.code()
    colours = sorted(code)

    def draw(rng: random.Random) -> str:
        turns = sorted(rng.sample(range(1, s.num_turns + 1), s.num_decisive))
        # distinct colours within a task while there are enough (a hint's lamp line is then
        # found by its colour alone); else drawn with repeats
        drawn = (rng.sample(colours, len(turns)) if len(turns) <= len(colours)
                 else [rng.choice(colours) for _ in turns])
        decisive = {str(t): [c, code[c]] for t, c in zip(turns, drawn)}
        return json.dumps({"turns": s.num_turns, "actions": s.actions, "decisive": decisive},
                          sort_keys=True)

    rng = random.Random(s.seed)
    train = [Task(f"train-{i}", FAMILY, draw(rng)) for i in range(s.num_train)]
    seen = {t.source for t in train}
    total = layout_count(s)
    if s.num_eval > 0 and total <= len(seen):
        raise ConfigError(f"env.num_eval: these settings have only {total} distinct task "
                          f"layouts and the {s.num_train} training tasks use all of them, so "
                          f"no held-out task exists; set env.num_eval=0, or raise "
                          f"env.num_turns, env.num_decisive or env.clues_per_action")
    rng, evals, tries = random.Random(s.seed + 1), [], 0
    while len(evals) < s.num_eval:
        src = draw(rng)
        tries += 1
        if src in seen and tries < 100 * (s.num_eval + 1):
            continue            # a layout trained on is no held-out task (tiny settings: kept)
        evals.append(Task(f"eval-{len(evals)}", FAMILY, src))
    return train, evals


def decisive_labels(task: Task, actions: list[Optional[str]]) -> list[Optional[bool]]:
    """[T] per action of an episode of ``task``: True (a lamp turn, the right door), False
    (a lamp turn, another door or an invalid action), None (a turn without a lamp)."""
    spec = task_spec(task)
    out = []
    for t, a in enumerate(actions, start=1):
        d = spec["decisive"].get(str(t))
        out.append(None if d is None else a == d[1])
    return out


def turn_text(turn: int, n: int, lamp: Optional[str]) -> str:
    where = f"Turn {turn} of {n}."
    return f"{where} A {lamp} lamp glows above the doors." if lamp else f"{where} No lamp here."


class CorridorEnv(Env):
    """One corridor episode at a time (docs/corridor.md)."""

    def __init__(self, format_penalty: float = 0.0):
        # env.format_penalty: each invalid reply costs format_penalty / turns of the final
        # reward (0: the reward is 1 for a success, else 0)
        self.format_penalty = float(format_penalty)
        self.spec: dict = {}
        self.turn = 0
        self.right = 0
        self.invalid = 0

    def _obs(self, text: str) -> Observation:
        return Observation(text, TASK_TEXT, list(self.spec["actions"]))

    def _lamp(self) -> Optional[str]:
        d = self.spec["decisive"].get(str(self.turn))
        return d[0] if d else None

    def reset(self, task: Task) -> Observation:
        self.spec = task_spec(task)
        self.turn, self.right, self.invalid = 1, 0, 0
        return self._obs("You enter a corridor of doors. "
                         + turn_text(1, self.spec["turns"], self._lamp()))

    def step(self, action: Optional[str]) -> StepResult:
        if not self.spec or self.turn > self.spec["turns"]:
            raise RuntimeError("step: the episode is over (or was never reset)")
        n, doors = self.spec["turns"], self.spec["actions"]
        d = self.spec["decisive"].get(str(self.turn))
        if action in doors:
            feedback = f"You went {action}" + (f" under the {d[0]} lamp." if d else ".")
        else:
            self.invalid += 1
            shown = "no action" if action is None else repr(action)
            feedback = (f"Invalid action {shown}: the doors are {', '.join(doors)}. "
                        f"You stumble on.")
        if d is not None and action == d[1]:
            self.right += 1
        self.turn += 1
        if self.turn <= n:
            return StepResult(self._obs(f"{feedback} {turn_text(self.turn, n, self._lamp())}"),
                              0.0, False, {"won": False})
        won = self.right == len(self.spec["decisive"])
        end = "The exit opens." if won else "The exit stays locked."
        reward = (1.0 if won else 0.0) - self.format_penalty * self.invalid / n
        return StepResult(self._obs(f"{feedback} {end}"), reward, True,
                          {"won": won, "decisive_right": self.right, "invalid": self.invalid})
