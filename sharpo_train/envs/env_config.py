"""Checks every environment's suite factory applies to its `env:` settings (configs/*.yaml,
docs/training.md): the mapping itself, its keys, and optional int settings."""
from __future__ import annotations

from typing import Optional

from ..errors import ConfigError, did_you_mean


def check_env_config(env_config, known: set, env_name: str) -> dict:
    """env_config must be a dict whose keys are all in ``known``; returns it."""
    if not isinstance(env_config, dict):
        raise TypeError(f"env_config: expected a dict, got {type(env_config).__name__}")
    unknown = set(env_config) - known
    if unknown:
        hint = "".join(did_you_mean(k, known) for k in sorted(unknown))
        raise ConfigError(f"env: unknown key(s) {sorted(unknown)}{hint} for {env_name}; known: "
                         f"{sorted(known)}")
    return env_config


def opt_int(cfg: dict, key: str, minimum: int = 0) -> Optional[int]:
    """cfg[key]: None when absent or null, else an int >= minimum (a bool is no int)."""
    v = cfg.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise ConfigError(f"env.{key}: expected an int >= {minimum}, got {v!r}")
    return v
