"""Environments: ``env.name`` in the config -> an :class:`EnvSpec` (envs/registry.py, the one
list) -> its factory building an EnvSuite, its prompts, settings schema and hooks.

Specs are registered lazily by import path so optional dependencies (alfworld) are only
imported when that environment is used.
"""
from __future__ import annotations

from .base import Env, EnvPool, EnvSuite, Observation, SerialEnvPool, StepResult, Task
from .registry import DEFAULT_ENV, ENVS, env_names, get_spec, recipe_envs, register_env
from .spec import EnvSpec, ProbeHooks, RecipeSpec


def make_suite(env_config: dict) -> EnvSuite:
    return get_spec(env_config.get("name")).make_suite(env_config)


def env_prompts(env_config: dict):
    """The text helpers of an environment: ``render_turn_prompt``, ``parse_action``,
    ``render_hint`` (EnvSpec.prompts)."""
    return get_spec(env_config.get("name")).prompts


__all__ = ["Env", "EnvPool", "EnvSuite", "Observation", "SerialEnvPool", "StepResult", "Task",
           "EnvSpec", "RecipeSpec", "ProbeHooks", "ENVS", "DEFAULT_ENV", "register_env",
           "get_spec", "env_names", "recipe_envs", "make_suite", "env_prompts"]
