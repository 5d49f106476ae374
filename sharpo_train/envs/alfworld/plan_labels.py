"""Planner labels of ALFWorld actions for credit quality (analysis/credit_auc.py,
docs/credit_quality.md): the planner knows, for every state, the length of the shortest
plan it finds to the goal. An action is **on-plan** when the plan from the state after it
is exactly one step shorter than the plan from the state before it (it kept a plan), else
**off-plan** (invalid actions, detours, undoing progress). ``PlanLabeller`` is the
``plan_labels`` hook of ALFWorld's EnvSpec (spec.py); it needs the alfworld engine.
"""
from __future__ import annotations

import hashlib
import os
import time
from collections import OrderedDict
from typing import Optional, Sequence

from .engine import INVALID_FEEDBACK, engine_modules, normalize_command
from .games import GAME_FILE


class PlanLabeller:
    """Replays each episode's actions in one ALFWorld engine (the env's own stack,
    engine.py) and asks the planner for the remaining plan length of every state it
    reaches. Plan lengths are cached by (game file, PDDL facts of the state), an exact
    state key: states reached by several rollouts of a group (common prefixes, invalid
    actions and ``look``, which change nothing) are planned once. The replay checks every
    observation against the rollout's; a mismatch leaves the rest of that episode
    unlabelled (counted in ``stats["mismatches"]``)."""

    def __init__(self, capacity: int = 200_000):
        self.capacity = capacity
        self._cache: "OrderedDict[tuple, Optional[int]]" = OrderedDict()
        self._env = None
        self._pddl = None
        self._loaded: Optional[str] = None
        self.stats = {"planner_calls": 0, "planner_seconds": 0.0, "cache_hits": 0,
                      "replay_seconds": 0.0, "mismatches": 0, "episodes": 0}

    def _open(self, game_file: str) -> None:
        if self._env is None:
            mods = engine_modules()
            infos = mods["textworld"].EnvInfos(won=True, admissible_commands=True)
            self._pddl = mods["PddlEnv"](infos)
            self._env = mods["AlfredInfos"](mods["AlfredDemangler"](self._pddl))
        if self._loaded != game_file:
            self._loaded = None
            self._env.load(game_file)
            self._loaded = game_file

    def remaining(self, state) -> Optional[int]:
        """Length of the planner's plan from ``state`` (0 when won, None: no plan)."""
        if state["won"]:
            return 0
        facts = sorted(str(f) for f in self._pddl._pddl_state.facts)
        key = (self._loaded, hashlib.sha1("\n".join(facts).encode()).hexdigest())
        if key in self._cache:
            self._cache.move_to_end(key)
            self.stats["cache_hits"] += 1
            return self._cache[key]
        t = time.perf_counter()
        # the planner on the current state (what PddlEnv's policy_commands info calls)
        plan = self._pddl._pddl_state.replan(self._pddl._entity_infos)
        self.stats["planner_seconds"] += time.perf_counter() - t
        self.stats["planner_calls"] += 1
        n = len(plan) if plan else None
        self._cache[key] = n
        if len(self._cache) > self.capacity:
            self._cache.popitem(last=False)
        return n

    def label(self, game_file: str, actions: Sequence[Optional[str]],
              observations: Optional[Sequence[str]] = None) -> list[Optional[bool]]:
        """[T] on-plan (True) / off-plan (False) / unknown (None) for each action of one
        episode of ``game_file`` (a game.tw-pddl), in order. ``observations``: the
        rollout's observation after each action, checked against the replay."""
        t0 = time.perf_counter()
        self._open(game_file)
        state = self._env.reset()
        before = self.remaining(state)
        out: list[Optional[bool]] = []
        for k, action in enumerate(actions):
            if state["won"]:
                out.append(None)                 # nothing to label after the goal
                continue
            state, _, _ = self._env.step(normalize_command(action))
            if observations is not None:
                got = (state["feedback"] or INVALID_FEEDBACK).strip()
                if got != str(observations[k]).strip():
                    self.stats["mismatches"] += 1
                    out += [None] * (len(actions) - k)
                    break
            after = self.remaining(state)
            out.append(None if before is None or after is None else after == before - 1)
            before = after
        self.stats["episodes"] += 1
        self.stats["replay_seconds"] += time.perf_counter() - t0
        return out

    def label_episodes(self, episodes) -> list[list[Optional[bool]]]:
        """[N][turns] labels of rollout Episodes (step/rollout.py); see ``label_episodes``."""
        return label_episodes(episodes, self)

    def close(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            except Exception:  # pragma: no cover - best effort
                pass
        self._env = self._pddl = self._loaded = None


def label_episodes(episodes, labeller: PlanLabeller) -> list[list[Optional[bool]]]:
    """[N][turns] labels of rollout Episodes (step/rollout.py) of ALFWorld games; an episode
    ended by an env fault is unlabelled."""
    out = []
    for ep in episodes:
        if ep.error is not None or not ep.turns:
            out.append([None] * len(ep.turns))
            continue
        out.append(labeller.label(os.path.join(ep.task.source, GAME_FILE),
                                  [t.action for t in ep.turns],
                                  [t.observation_after for t in ep.turns]))
    return out
