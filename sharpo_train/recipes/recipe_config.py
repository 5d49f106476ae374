"""Settings of the `sharpo demo` and `sharpo compare` recipes, read by the settings engine
(settings/loader.py: load_settings / apply_overrides: typed, validated, errors name the key).

    DemoConfig      the env-neutral ``demo.<key>`` overrides of `sharpo demo` / `sharpo compare`
    CompareConfig   DemoConfig + ``seeds`` and ``methods`` (`sharpo compare --seeds/--methods`)
    settings_class  either of them joined with an environment's own ``demo.<key>`` settings
                    (its RecipeSpec.settings, envs/<name>/recipe.py): the class of a run's ``s``
    parse_method    one ``--methods`` item (``NAME[:value][@key=value...]``; split_method)
    parse_methods   ``--methods`` text -> one (label, slug, trainer overrides) per arm
                    (method_run); parse_seeds: ``--seeds`` text

The warm start's settings are sft.SFTConfig (``sft.<key>``), the RL run's
loops/train_config.py Config (plain trainer keys). How ``key=value`` overrides reach the
three: overrides.py.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields, make_dataclass

from ..loops.train_config import load_config
from ..envs.registry import DEFAULT_ENV, get_spec, recipe_envs
from ..estimators import ESTIMATORS
from ..settings.loader import (ConfigError, OverrideText, apply_overrides, in_range, need,
                               setting, validate_settings)


@dataclass
class DemoConfig:
    """Sizes of the demo pipeline, the same keys for every environment (an environment's own
    keys: its RecipeSpec.settings, joined by ``settings_class``; the trainer's own keys are
    set through plain overrides)."""

    env: str = setting(DEFAULT_ENV, "the environment: one with a recipe (envs.recipe_envs())")
    seed: int = setting(0, "seed of the games, demonstrations, SFT and RL")
    train_games: int = setting(120, "generated training games, the demonstrations come from "
                               "them (webshop: the first N goals of WebShop's train split)")
    # 180: enough to tell a gain of a few points from noise, paired game by game
    # (analysis/report/stats.py)
    eval_games: int = setting(180, "generated held-out games, another generator seed (webshop: "
                              "a category-balanced sample of the test split)")
    game_max_steps: int = setting(10, "environment step limit per episode (where the env.* "
                                  "has one)")
    workers: int = setting(2, "processes for game generation and demonstrations")
    eval_sft: bool = setting(True, "also evaluate the warm start (the \"before RL\" column)")
    explain: bool = setting(True, "write the credit report of the RL run")

    def validate(self) -> None:
        need(self.env in recipe_envs(), "env", f"one of {recipe_envs()}", self.env)
        in_range(self, "seed", 0)
        in_range(self, "train_games", 1, 100000)
        in_range(self, "eval_games", 1, 100000)
        in_range(self, "game_max_steps", 1, 1000)
        in_range(self, "workers", 0, 1024)


def env_settings(env: str):
    """The dataclass of environment ``env``'s own ``demo.<key>`` settings (its
    RecipeSpec.settings), or None."""
    return get_spec(env).load("recipe").settings


@functools.lru_cache(maxsize=None)
def settings_class(env: str, base: type = DemoConfig) -> type:
    """``base`` (DemoConfig or CompareConfig) joined with environment ``env``'s own settings
    (``env_settings``): one dataclass, ``base``'s fields first, whose validate() runs both;
    ``base`` itself when the environment has none. A key of both is a ValueError."""
    own = env_settings(env)
    if own is None:
        return base
    clash = sorted({f.name for f in fields(own)} & {f.name for f in fields(base)})
    if clash:
        raise ValueError(f"{own.__name__} (environment {env!r}): {clash} are already "
                         f"{base.__name__} settings")

    def validate(self) -> None:
        base.validate(self)
        own.validate(self)

    return make_dataclass(f"{base.__name__}_{env}", [], bases=(own, base),
                          namespace={"validate": validate, "__module__": __name__})


def setting_owners(key: str) -> list[str]:
    """The recipe environments whose own ``demo.<key>`` settings hold ``key``."""
    return [env for env in recipe_envs() if env_settings(env) is not None
            and key in {f.name for f in fields(env_settings(env))}]


METHOD_EXTRA_PREFIXES = ("estimator.", "optim.", "teacher.", "loss.")


def split_method(item: str) -> tuple[str, list[str]]:
    """'sharpo:1@estimator.alpha=0.9@optim.lr=2e-3' -> ('sharpo:1', ['estimator.alpha=0.9',
    'optim.lr=2e-3']): an arm of `sharpo compare --methods` with its own trainer settings
    (``estimator.*``, ``optim.*``, ``teacher.*``, ``loss.*``, and an environment's reward
    settings such as ``env.format_penalty``), checked by the trainer's config loader; a
    ConfigError naming the item otherwise."""
    base, *extras = item.strip().split("@")
    rewards = _reward_keys()
    keys = [x.partition("=")[0].strip() for x in extras]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ConfigError(f"methods: {item!r} sets {', '.join(twice)} twice; give each "
                          f"setting of an arm once")
    for x in extras:
        key = x.partition("=")[0].strip()
        if "=" not in x or not (key.startswith(METHOD_EXTRA_PREFIXES) or key in rewards):
            raise ConfigError(f"methods: {item!r}: expected NAME[:value]@key=value with key "
                              f"under {', '.join(METHOD_EXTRA_PREFIXES)} or an environment's "
                              f"reward setting ({', '.join(sorted(rewards)) or 'none'}), "
                              f"got {x!r}")
    if extras:
        try:
            load_config(None, extras)
        except ConfigError as exc:
            # a setting only some environments allow (teacher.oracle: exact credit labels)
            # passes here when one of them does; each run's config is checked with its env
            if not any(_valid_with(extras, env) for env in _labelled_envs()):
                raise ConfigError(f"methods: {item!r}: {exc}") from None
    return base.strip(), [x.strip() for x in extras]


def _reward_keys() -> set[str]:
    """env.<key>s an arm may set: the environments' reward settings (EnvSpec.reward_settings;
    they change what an episode pays, never the tasks, the warm start or the held-out set)."""
    from ..envs import ENVS, get_spec
    return {f"env.{k}" for name in ENVS for k in get_spec(name).reward_settings}


def _labelled_envs() -> list[str]:
    from ..envs import ENVS, get_spec
    return [name for name in ENVS if get_spec(name).exact_labels is not None]


def _valid_with(extras: list[str], env: str) -> bool:
    try:
        load_config(None, [f"env.name={env}", *extras])
    except ConfigError:
        return False
    return True


def parse_method(item: str) -> tuple[str, float | None]:
    """A method of `sharpo compare --methods`: any registered estimator name
    (estimators.ESTIMATORS), optionally ``name:<value>`` setting the estimator's knob
    (``Estimator.knob``: sharpo -> lam, rlsd/serl -> rlsd_lam, gigpo -> gigpo_step_weight,
    opsd -> opsd_coef, sdar -> sdar_coef, empg -> empg_zeta; docs/estimators.md), then
    optionally ``@key=value`` trainer settings of that arm (``split_method``, checked here).
    'grpo' -> ('grpo', None); 'sharpo' -> ('sharpo', 0.2); 'rlsd' -> ('rlsd', None)
    (the config's value); 'sharpo:0.05' -> ('sharpo', 0.05)."""
    import math

    item = split_method(item)[0]
    name, sep, raw = item.strip().partition(":")
    if name not in ESTIMATORS:
        raise ConfigError(f"methods: unknown method {item!r}; expected one of "
                          f"{sorted(ESTIMATORS)}, optionally NAME:<value>")
    est = ESTIMATORS[name]
    if not sep:
        return name, est.default_knob()
    need(est.knob is not None, "methods", f"{name} without a value (it has no knob)", item)
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    need(math.isfinite(value), "methods", f"{name}:<number> in {item!r}", raw)
    params = est.params()
    setattr(params, est.knob, value)
    try:
        params.validate()
    except ValueError as exc:       # ConfigError, or the kernel's coefficient check
        raise ConfigError(f"methods: {item!r}: estimator.{exc}") from None
    return name, value


@dataclass
class CompareConfig(DemoConfig):
    """DemoConfig plus what `sharpo compare` runs: each method with each RL seed."""

    seeds: list[int] = setting(help="RL seeds, distinct, >= 0 (--seeds, or demo.seeds=[..]; "
                                    "not both)",
                               factory=lambda: [0, 1, 2])
    methods: list[str] = setting(help="methods compared, NAME[:value][@key=value] "
                                 "(--methods, or demo.methods=[..]; not both)",
                                 factory=lambda: ["grpo", "sharpo:0.2", "sharpo:0.05"])

    def validate(self) -> None:
        super().validate()
        need(bool(self.seeds) and len(set(self.seeds)) == len(self.seeds)
             and all(0 <= s <= 2 ** 31 - 1 for s in self.seeds), "seeds",
             "distinct integers >= 0", self.seeds)
        need(bool(self.methods), "methods", "at least one method", self.methods)
        for item in self.methods:
            parse_method(item)


def _no_empty_item(option: str, text: str) -> None:
    """ConfigError naming ``option`` when the comma list ``text`` has an empty item
    (``0,,1``, ``grpo,``): a typo, never silently dropped."""
    items = [x.strip() for x in str(text).split(",")]
    if len(items) > 1 and "" in items:
        raise ConfigError(f"{option}: an empty item in {str(text)!r}; separate the items by "
                          f"single commas")


def parse_seeds(text: str, prefix: str = "--") -> list[int]:
    """`--seeds 0,1,2` -> [0, 1, 2] (CompareConfig.seeds: distinct integers >= 0); errors
    name ``prefix + "seeds"`` (``--seeds``, or ``demo.seeds`` where that gave them)."""
    _no_empty_item(f"{prefix}seeds", text)
    s = apply_overrides(CompareConfig(), {"seeds": OverrideText(text)}, prefix=prefix)
    return validate_settings(s, prefix=prefix).seeds


def parse_methods(text: str, prefix: str = "--") -> list[tuple[str, str, list[str]]]:
    """`--methods grpo,sharpo:0.2` -> [(label, slug, trainer overrides)] (CompareConfig.methods).
    Two arms that are one run (the same run folder: ``grpo,grpo``) are a ConfigError; errors
    name ``prefix + "methods"``."""
    _no_empty_item(f"{prefix}methods", text)
    s = apply_overrides(CompareConfig(), {"methods": OverrideText(text)}, prefix=prefix)
    out, seen = [], {}
    for item in validate_settings(s, prefix=prefix).methods:
        name, value = parse_method(item)
        run = method_run(name, value, split_method(item)[1])
        if run[1] in seen:      # two arms that are one run: never silently collapsed
            raise ConfigError(f"{prefix}methods: {item!r} is the same arm as {seen[run[1]]!r} "
                              f"(run folder {run[1]}); give each method once")
        seen[run[1]] = item
        out.append(run)
    return out


SLUG_MAX = 96       # run folder names stay far below a file system's 255 bytes


def _short_slug(slug: str) -> str:
    """``slug`` itself, or its first characters and a hash of the whole when it is longer
    than SLUG_MAX (an arm with many ``@key=value`` settings)."""
    if len(slug.encode("utf-8")) <= SLUG_MAX:
        return slug
    import hashlib
    return slug[:SLUG_MAX - 13] + "-" + hashlib.sha1(slug.encode("utf-8")).hexdigest()[:12]


def method_run(name: str, value: float | None, extras: list[str] = ()
               ) -> tuple[str, str, list[str]]:
    """(label, slug, trainer overrides) of one compared method; ``value`` sets the
    estimator's knob (parse_method); ``extras`` are the arm's own ``key=value``
    trainer settings (``NAME@optim.lr=2e-3``: split_method), named in its label
    and its run folder's name."""
    est = ESTIMATORS[name]
    label, slug, over = est.run_label(value), name, [f"method={name}"]
    if value is not None:       # the run folder names the knob where the label does (λ)
        slug = f"{name}-{est.knob if est.knob_label else ''}{value:g}"
        over.append(f"estimator.{est.knob}={value!r}")
    shown = []
    for x in extras:
        key, _, raw = x.partition("=")
        short = key.strip().rsplit(".", 1)[-1]
        try:
            raw = f"{float(raw):g}"
        except ValueError:
            raw = raw.strip()
        shown.append("perfect teacher" if key.strip() == "teacher.oracle" and
                     raw.lower() == "true" else f"{short}={raw}")
        slug += "-" + "".join(c if c.isalnum() or c in ".-_" else "_" for c in short + raw)
    if "(" in label:
        label = label + "".join(f", {x}" for x in shown) + ")"
    elif shown:
        label = f"{label} ({', '.join(shown)})"
    return label, _short_slug(slug), over + list(extras)
