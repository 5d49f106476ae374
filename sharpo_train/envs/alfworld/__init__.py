"""ALFWorld for sharpo_train: the real alfworld/textworld engine on games in the official
layout, parallel worker pools, a game generator, experts, prompts and demonstrations.

Entry point for the trainer (env.name "alfworld"; its EnvSpec: spec.py)::

    suite = make_suite({"name": "alfworld", "games_dir": "../shared/data/alfworld",
                        "train_split": "valid_train", "eval_split": "valid_seen"})
    pool = suite.make_pool(2)            # ProcessEnvPool with 2 worker processes
    first = pool.reset(suite.train_tasks[:4])
    results = pool.step({0: "go to countertop 1", 1: None})

env_config keys (all optional except a game source):
  games_dir        folder holding json_2.1.1/ (or json_2.1.1 itself, or relative to
                   $ALFWORLD_DATA); default $ALFWORLD_DATA
  train_split      default "train";  eval_split: default "valid_seen" ("" or None: none)
  num_train_games / num_eval_games   caps (first N in path order; 0/None = all)
  task_families    e.g. ["Pick", "Heat"] (or task_type names); default all six
  max_steps        step limit per episode, counted by the env (default 50)
  workers          default worker count when make_pool gets None (default 2)
  expert_type      None | "planner" | "handcoded": adds info["expert_action"] (slow)
  seed             seed for the handcoded expert's random choices
  generate         {"n_train": 32, "n_eval": 8, "seed": 0, "size": "small"}: when
                   games_dir has no json_2.1.1 yet, generate games there first (generator.py)

Submodules: games (discovery/validation), engine (AlfWorldEnv), pool (ProcessEnvPool),
prompts (render_turn_prompt, parse_action, render_hint), generator, experts, planner, demos,
plan_labels (credit-quality labels), recipe (`sharpo demo` phases), spec (the EnvSpec).
The prompt helpers import without alfworld installed; the engine needs the extra
``pip install '.[alfworld]'``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from ...errors import ConfigError
from ..base import EnvSuite, Task
from ..env_config import check_env_config, opt_int
from .games import (FAMILIES, FAMILY_BY_TASK_TYPE, RELEASE_DIR, discover_games,
                    normalize_families, resolve_release_dir, task_from_folder, task_of)
from .prompts import format_response, parse_action, render_hint, render_turn_prompt

# env.<key> -> (type, lo, hi): the settings schema (train_config.check_env reads it via ENV_SPEC)
SETTINGS: dict[str, tuple] = {
    "name": (str,), "games_dir": (Optional[str],), "train_split": (str,),
    "eval_split": (Optional[str],), "num_train_games": (Optional[int], 0, None),
    "num_eval_games": (Optional[int], 0, None), "task_families": (Optional[list],),
    "max_steps": (int, 1, 10000), "workers": (int, 0, 1024), "expert_type": (Optional[str],),
    "seed": (Optional[int], 0, None), "generate": (Optional[dict],), "start_method": (str,),
    "timeout_s": (float, 0.001, 1e6)}
MAX_GENERATED = 100_000      # games one generation makes (env.generate.n_*, generate --n)
GENERATE_SETTINGS: dict[str, tuple] = {
    "n_train": (int, 0, MAX_GENERATED), "n_eval": (int, 0, MAX_GENERATED), "seed": (int, 0, None),
    "size": (str,), "grammar": (Any,), "families": (list,), "workers": (int, 0, 1024)}
SETTINGS_HELP = {
    "games_dir": "folder holding json_2.1.1/ (or that folder itself); default $ALFWORLD_DATA",
    "train_split": "training split (default train)",
    "eval_split": "held-out split (default valid_seen; empty or null: none)",
    "num_train_games": "first N training games in path order (0 or null: all)",
    "num_eval_games": "first N held-out games in path order (0 or null: all)",
    "task_families": "task families kept, e.g. [Pick, Heat] (default all six)",
    "max_steps": "environment step limit per episode (default 50)",
    "workers": "worker processes when the trainer asks for the default (default 2)",
    "expert_type": "null, planner or handcoded: adds the expert's action to each step (slow)",
    "seed": "seed of the handcoded expert's random choices",
    "generate": "{n_train, n_eval, seed, size, ...}: generate games into games_dir first "
                "when it holds none (generator.py)",
    "start_method": "multiprocessing start method of the worker pool",
    "timeout_s": "seconds a worker may take for one step before it is replaced",
}
_KNOWN_KEYS = set(SETTINGS)
_GENERATE_KEYS = set(GENERATE_SETTINGS)


def env_kwargs_from_config(cfg: dict) -> dict:
    """The AlfWorldEnv arguments an env_config implies."""
    from .engine import DEFAULT_MAX_STEPS, EXPERT_TYPES
    max_steps = opt_int(cfg, "max_steps", 1) or DEFAULT_MAX_STEPS
    expert = cfg.get("expert_type") or None
    if expert not in (None,) + EXPERT_TYPES:
        raise ConfigError(f"env.expert_type: expected one of {EXPERT_TYPES} or null, got {expert!r}")
    return {"max_steps": max_steps, "expert": expert, "seed": opt_int(cfg, "seed")}


def make_pool(num_workers: int = 2, *, max_steps: int = 50, expert: Optional[str] = None,
              seed: Optional[int] = None, start_method: str = "spawn",
              timeout_s: float = 120.0):
    """A ProcessEnvPool playing AlfWorldEnv episodes (num_workers=0: in-process)."""
    from .pool import ProcessEnvPool
    return ProcessEnvPool(num_workers, {"max_steps": max_steps, "expert": expert, "seed": seed},
                          start_method=start_method, timeout_s=timeout_s)


def make_suite(env_config: dict) -> EnvSuite:
    check_env_config(env_config, _KNOWN_KEYS, "alfworld")
    cfg = env_config
    games_dir = cfg.get("games_dir")
    gen = cfg.get("generate")
    if gen:
        check_env_config(gen, _GENERATE_KEYS, "alfworld", "env.generate")
        if games_dir in (None, ""):
            raise ConfigError("env.generate needs env.games_dir (where to write the games)")
        root = Path(os.path.expandvars(os.path.expanduser(str(games_dir))))
        if not (root / RELEASE_DIR).is_dir() and root.name != RELEASE_DIR:
            from .generator import generate_splits
            generate_splits(root, train_split=cfg.get("train_split", "train"),
                            eval_split=cfg.get("eval_split", "valid_seen"), **gen)
    release = resolve_release_dir(games_dir)
    # alfworld.info creates $ALFWORLD_DATA on import: point it at the data we use
    os.environ.setdefault("ALFWORLD_DATA", str(release.parent))

    families = normalize_families(cfg.get("task_families"))
    train_split = cfg.get("train_split", "train")
    eval_split = cfg.get("eval_split", "valid_seen")
    train = [task_of(g) for g in discover_games(release, train_split, families=families,
                                                limit=opt_int(cfg, "num_train_games"))]
    evals: list[Task] = []
    if eval_split:
        evals = [task_of(g) for g in discover_games(release, eval_split, families=families,
                                                    limit=opt_int(cfg, "num_eval_games"))]
    kwargs = env_kwargs_from_config(cfg)
    default_workers = opt_int(cfg, "workers")
    default_workers = 2 if default_workers is None else default_workers
    start_method = cfg.get("start_method", "spawn")
    timeout_s = float(cfg.get("timeout_s", 120.0))

    def _make_pool(num_workers: Optional[int] = None):
        n = default_workers if num_workers is None else num_workers
        return make_pool(n, start_method=start_method, timeout_s=timeout_s, **kwargs)

    present = {t.family for t in train + evals}
    fams = [f for f in (families or FAMILIES) if f in present]
    return EnvSuite(train_tasks=train, eval_tasks=evals, make_pool=_make_pool, families=fams)


__all__ = ["make_suite", "make_pool", "env_kwargs_from_config", "FAMILIES",
           "FAMILY_BY_TASK_TYPE", "discover_games", "task_from_folder", "task_of",
           "resolve_release_dir", "render_turn_prompt", "parse_action", "render_hint",
           "format_response", "SETTINGS", "GENERATE_SETTINGS", "MAX_GENERATED"]
