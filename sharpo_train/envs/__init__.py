"""Environment registry: ``env.name`` in the config -> a factory building an EnvSuite.

Factories are registered lazily by import path so optional dependencies (alfworld) are
only imported when that environment is used.
"""
from __future__ import annotations

import importlib

from .base import Env, EnvPool, EnvSuite, Observation, SerialEnvPool, StepResult, Task

# name -> "module:function"; function(env_config: dict) -> EnvSuite
ENV_FACTORIES: dict[str, str] = {
    "alfworld": "sharpo_train.envs.alfworld:make_suite",
    "synthetic": "sharpo_train.envs.synthetic:make_suite",   # loop tests only, not a benchmark
    "webshop": "sharpo_train.envs.webshop:make_suite",
    "signs": "sharpo_train.envs.synthetic:make_signs_suite",  # learning-direction test only
    "corridor": "sharpo_train.envs.corridor:make_suite",       # credit-assignment testbed
}


def register_env(name: str, target: str) -> None:
    ENV_FACTORIES[name] = target


def make_suite(env_config: dict) -> EnvSuite:
    name = env_config.get("name")
    if name not in ENV_FACTORIES:
        raise ValueError(f"env.name: unknown environment {name!r}; known: {sorted(ENV_FACTORIES)}")
    module, func = ENV_FACTORIES[name].split(":")
    return getattr(importlib.import_module(module), func)(env_config)


def env_prompts(env_config: dict):
    """The module of text helpers for an environment: ``render_turn_prompt``,
    ``parse_action``, ``render_hint`` (the env package's ``prompts`` submodule, else the
    env module itself)."""
    name = env_config.get("name")
    if name not in ENV_FACTORIES:
        raise ValueError(f"env.name: unknown environment {name!r}; known: {sorted(ENV_FACTORIES)}")
    module = importlib.import_module(ENV_FACTORIES[name].split(":")[0])
    prompts = getattr(module, "prompts", module)
    for fn in ("render_turn_prompt", "parse_action", "render_hint"):
        if not callable(getattr(prompts, fn, None)):
            raise ValueError(f"env.name: environment {name!r} has no {fn}() text helper")
    return prompts


__all__ = ["Env", "EnvPool", "EnvSuite", "Observation", "SerialEnvPool", "StepResult", "Task",
           "ENV_FACTORIES", "register_env", "make_suite", "env_prompts"]
