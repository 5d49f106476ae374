"""The one list of environments: ``env.name`` -> its :class:`~.spec.EnvSpec`.

Specs are registered by import path and imported on first use, so an environment's
optional dependencies (alfworld) load only when it is used. Adding an environment is one
line here (or ``register_env`` from user code); docs/adding_an_environment.md.
"""
from __future__ import annotations

from .spec import EnvSpec, resolve

# name -> "module:attr" of its EnvSpec
ENVS: dict[str, str] = {
    "alfworld": "sharpo_train.envs.alfworld.spec:ENV_SPEC",
    "webshop": "sharpo_train.envs.webshop.spec:ENV_SPEC",
    "synthetic": "sharpo_train.envs.synthetic:ENV_SPEC",        # loop tests only, not a benchmark
    "signs": "sharpo_train.envs.synthetic:SIGNS_SPEC",      # learning-direction test only
    "corridor": "sharpo_train.envs.corridor.spec:ENV_SPEC",     # credit-assignment testbed
}
DEFAULT_ENV = "alfworld"      # env.name when a config names none

_loaded: dict[str, EnvSpec] = {}


def register_env(name: str, target: str | EnvSpec) -> None:
    """Add (or replace) an environment: ``target`` is its EnvSpec or "module:attr" of it."""
    if isinstance(target, EnvSpec):
        _loaded[name] = target
        ENVS[name] = f"{__name__}:<registered {name}>"
    else:
        _loaded.pop(name, None)
        ENVS[name] = target


def env_names() -> list[str]:
    return sorted(ENVS)


def get_spec(name) -> EnvSpec:
    """The EnvSpec of ``name``; a ValueError naming env.name when it is unknown."""
    if not isinstance(name, str) or name not in ENVS:
        raise ValueError(f"env.name: unknown environment {name!r}; known: {env_names()}")
    if name not in _loaded:
        spec = resolve(ENVS[name])
        if not isinstance(spec, EnvSpec) or spec.name != name:
            raise TypeError(f"{ENVS[name]}: expected the EnvSpec of {name!r}, got {spec!r}")
        _loaded[name] = spec
    return _loaded[name]


def check_env_data(env: dict) -> None:
    """The environment's data is where ``env.*`` says (its ``EnvSpec.check_data``, e.g.
    ALFWorld's games folder), checked by every command that plays it before it loads or
    writes anything: a UsageError naming the env.* key otherwise."""
    from ..errors import UsageError

    check_data = get_spec(env["name"]).check_data
    if check_data is not None:
        try:
            check_data(env)
        except (ValueError, FileNotFoundError) as exc:
            raise UsageError(f"env.{exc}") from None


def recipe_envs() -> list[str]:
    """The environments `sharpo demo` / `sharpo compare` can run (a spec with a recipe)."""
    return [n for n in env_names() if get_spec(n).recipe is not None]
