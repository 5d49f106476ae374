"""ALFWorld for sharpo_train: the real alfworld/textworld engine on games in the official
layout, parallel worker pools, a game generator, experts, prompts and demonstrations.

Entry point for the trainer (env.name "alfworld"; its EnvSpec: spec.py)::

    suite = make_suite({"name": "alfworld", "games_dir": "../shared/data/alfworld",
                        "train_split": "valid_train", "eval_split": "valid_seen"})
    pool = suite.make_pool(2)            # ProcessEnvPool with 2 worker processes
    first = pool.reset(suite.train_tasks[:4])
    results = pool.step({0: "go to countertop 1", 1: None})

env_config keys (all optional except a game source): the fields of
``settings.AlfworldSettings`` (defaults, help and ranges: `sharpo settings env.`), e.g.
generate={"n_train": 32, "n_eval": 8, "seed": 0, "size": "small"} writes games into a
games_dir that holds no json_2.1.1 yet (generator.py).

Submodules: settings (env.*), games (discovery/validation), engine (AlfWorldEnv), pool (ProcessEnvPool),
prompts (render_turn_prompt, parse_action, render_hint), generator, experts, planner, demos,
plan_labels (credit-quality labels), recipe (`sharpo demo` phases), spec (the EnvSpec).
The prompt helpers import without alfworld installed; the engine needs the extra
``pip install '.[alfworld]'``.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional

from ...errors import ConfigError
from ..base import EnvSuite, Task
from ..env_config import check_env_config, settings_from
from .games import (FAMILIES, FAMILY_BY_TASK_TYPE, RELEASE_DIR, discover_games,
                    normalize_families, resolve_release_dir, task_from_folder, task_of)
from .prompts import format_response, parse_action, render_hint, render_turn_prompt
from .settings import AlfworldSettings, GenerateSettings


def settings_of(env_config: dict) -> AlfworldSettings:
    """The AlfworldSettings of an env config (unknown keys and bad values: ConfigError
    naming env.<key>)."""
    return settings_from(env_config, AlfworldSettings, "alfworld")


def env_kwargs(s: AlfworldSettings) -> dict:
    """The AlfWorldEnv arguments of the settings ``s``."""
    return {"max_steps": s.max_steps, "expert": s.expert_type or None, "seed": s.seed}


def env_kwargs_from_config(cfg: dict) -> dict:
    """The AlfWorldEnv arguments an env_config implies."""
    return env_kwargs(settings_of(cfg))


def make_pool(num_workers: int = 2, *, max_steps: int = 50, expert: Optional[str] = None,
              seed: Optional[int] = None, start_method: str = "spawn",
              timeout_s: float = 120.0):
    """A ProcessEnvPool playing AlfWorldEnv episodes (num_workers=0: in-process)."""
    from .pool import ProcessEnvPool
    return ProcessEnvPool(num_workers, {"max_steps": max_steps, "expert": expert, "seed": seed},
                          start_method=start_method, timeout_s=timeout_s)


def make_suite(env_config: dict) -> EnvSuite:
    s = settings_of(env_config)
    games_dir, gen = s.games_dir, s.generate
    if gen:
        check_env_config(gen, {f.name for f in dataclasses.fields(GenerateSettings)},
                         "alfworld", "env.generate")
        if games_dir in (None, ""):
            raise ConfigError("env.generate needs env.games_dir (where to write the games)")
        root = Path(os.path.expandvars(os.path.expanduser(str(games_dir))))
        if not (root / RELEASE_DIR).is_dir() and root.name != RELEASE_DIR:
            from .generator import generate_splits
            generate_splits(root, train_split=s.train_split, eval_split=s.eval_split, **gen)
    release = resolve_release_dir(games_dir)
    # alfworld.info creates $ALFWORLD_DATA on import: point it at the data we use
    os.environ.setdefault("ALFWORLD_DATA", str(release.parent))

    families = normalize_families(s.task_families)
    train = [task_of(g) for g in discover_games(release, s.train_split, families=families,
                                                limit=s.num_train_games)]
    evals: list[Task] = []
    if s.eval_split:
        evals = [task_of(g) for g in discover_games(release, s.eval_split, families=families,
                                                    limit=s.num_eval_games)]
    kwargs = env_kwargs(s)
    default_workers, start_method, timeout_s = s.workers, s.start_method, float(s.timeout_s)

    def _make_pool(num_workers: Optional[int] = None):
        n = default_workers if num_workers is None else num_workers
        return make_pool(n, start_method=start_method, timeout_s=timeout_s, **kwargs)

    present = {t.family for t in train + evals}
    fams = [f for f in (families or FAMILIES) if f in present]
    return EnvSuite(train_tasks=train, eval_tasks=evals, make_pool=_make_pool, families=fams)


__all__ = ["make_suite", "make_pool", "env_kwargs_from_config", "FAMILIES",
           "FAMILY_BY_TASK_TYPE", "discover_games", "task_from_folder", "task_of",
           "resolve_release_dir", "render_turn_prompt", "parse_action", "render_hint",
           "format_response", "settings_of", "AlfworldSettings", "GenerateSettings"]
