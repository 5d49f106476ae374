"""Checks every environment's suite factory applies to its `env:` settings (configs/*.yaml,
docs/training.md): the mapping itself, its keys, and optional int settings."""
from __future__ import annotations

from typing import Optional

import dataclasses
import typing

from ..checks import check_int
from ..errors import ConfigError, did_you_mean
from ..settings.loader import validate_settings


def check_env_config(env_config, known: set, env_name: str, key: str = "env") -> dict:
    """env_config (the ``env`` mapping, or a mapping inside it named by ``key``, e.g.
    ``env.generate``) must be a dict whose keys are all in ``known``; returns it."""
    if not isinstance(env_config, dict):
        name = "env_config" if key == "env" else key
        raise TypeError(f"{name}: expected a dict, got {type(env_config).__name__}")
    unknown = set(env_config) - known
    if unknown:
        hint = "".join(did_you_mean(k, known) for k in sorted(unknown))
        raise ConfigError(f"{key}: unknown key(s) {sorted(unknown)}{hint} for {env_name}; "
                          f"known: {sorted(known)}")
    return env_config


def opt_int(cfg: dict, key: str, minimum: int = 0) -> Optional[int]:
    """cfg[key]: None when absent or null, else an int >= minimum (a bool is no int)."""
    v = cfg.get(key)
    if v is None:
        return None
    return check_int(v, f"env.{key}", minimum, error=ConfigError)


def settings_from(env_config, cls: type, env_name: str):
    """An environment's settings (its class ``cls``: ``setting(default, help)`` fields and a
    ``validate()``, EnvSpec.settings_class) from its ``env`` mapping: unknown keys refused
    (``check_env_config``), null for a setting that cannot be null is its default, every
    value typed and checked (``validate_settings``: a ConfigError naming ``env.<key>``)."""
    known = {"name"} | {f.name for f in dataclasses.fields(cls)}
    check_env_config(env_config, known, env_name)
    hints = typing.get_type_hints(cls)
    nullable = {k for k, tp in hints.items() if type(None) in typing.get_args(tp)}
    return validate_settings(cls(**{k: v for k, v in env_config.items() if k != "name" and
                                    (v is not None or k in nullable)}), "env.")
