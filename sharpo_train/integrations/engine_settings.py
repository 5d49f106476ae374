"""SHARPO's ``algorithm.sharpo.*`` settings in verl and verl-agent, checked without importing
either engine (docs/integrations.md, "what is validated when").

- ``sharpo_settings(algorithm, max_prompt_length)``: ``algorithm.sharpo.*`` merged over
  ``DEFAULTS`` and checked: an unknown key (``lamda``) is refused with a did-you-mean, and so
  is a look-alike of the section itself (``algorithm.sharp``, ``algorithm.sharpo_lam``),
  which Hydra would otherwise compose and verl ignore.
- ``agent_settings(config)``: the same plus verl-agent's own keys (``base``,
  ``max_observation_chars``).
- ``check_config(config, engine)``: what an engine's trainer checks at construction, before
  a worker or a model starts: the settings above, and a warning when ``algorithm.lam`` (verl's
  GAE lambda, unused by SHARPO) is set next to ``adv_estimator=sharpo``.
- ``check_overrides(args, engine)``: the same on a launch command's Hydra overrides
  (``+algorithm.sharpo.lam=0.3 ...``), for configs/verl_agent/run_alfworld_sharpo.sh, which
  runs it before the data step; also ``python -m sharpo_train.integrations.engine_settings``.
The value checks are ``common.check_sharpo_settings``'s (TRL's SharpoConfig too).
"""
from __future__ import annotations

import dataclasses
import difflib
import sys
import warnings
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Optional, Sequence

from sharpo_kernels import COEFFICIENT_NAMES, with_coefficients
from sharpo_train.checks import check_int, is_int
from sharpo_train.errors import did_you_mean
from sharpo_train.hint import HintSettings
from sharpo_train.settings.loader import setting
from sharpo_train.integrations.common import check_sharpo_settings
from sharpo_train.step.teacher_rule import SUCCESS_THRESHOLD

SECTION = "sharpo"
BASES = ("grpo", "gigpo", "episode_grpo")      # verl-agent's algorithm.sharpo.base


def _hint_field(name: str):
    """A field with HintSettings' ``name`` default and help (sharpo_train/hint.py: their one home)."""
    f = next(f for f in dataclasses.fields(HintSettings) if f.name == name)
    return setting(f.default, f.metadata["help"])


@dataclass
@with_coefficients
class EngineSettings:
    """``algorithm.sharpo.*`` of verl and verl-agent: the kernel's coefficients (lam, alpha,
    tau, rho_min, rho_max: ``sharpo_kernels.SharpoCoefficients``, their defaults and help),
    then the teacher rule's and the hint's (sharpo_train/hint.py)."""
    success_threshold: float = setting(SUCCESS_THRESHOLD, "an episode succeeds when its reward "
                                       ">= this; a successful peer gives the hint")
    max_hint_tokens: int = _hint_field("max_hint_tokens")
    max_teacher_prompt_length: Optional[int] = setting(None, "longest teacher prompt in tokens; "
                                                       "null: data.max_prompt_length + max_hint_tokens")
    hint_template: str = _hint_field("template")


FUSED_HELP = ("turn the engine's actor_rollout_ref.model.use_fused_kernels on, with sharpo's "
              "linear_logprobs under it (fused_verl.py); an explicit use_fused_kernels=false on "
              "the command line keeps it off (fused_choice)")


@dataclass
class VerlKeys:
    """verl 0.9.1's own ``algorithm.sharpo.*`` key (``fused_kernels_setup``)."""
    fused_logprobs: bool = setting(True, FUSED_HELP)


@dataclass
class AgentKeys:
    """verl-agent's own ``algorithm.sharpo.*`` keys."""
    base: str = setting("grpo", f"the advantage SHARPO starts from: one of {list(BASES)} "
                        "(docs/integrations.md, verl-agent)")
    max_observation_chars: int = _hint_field("max_observation_chars")
    fused_logprobs: bool = setting(True, FUSED_HELP)


def defaults(cls) -> dict[str, Any]:
    """{key: default} of a settings dataclass, in declaration order."""
    return {f.name: f.default for f in dataclasses.fields(cls)}


# the key -> default views the checks read (one declaration: the classes above)
DEFAULTS = defaults(EngineSettings)
AGENT_KEYS = defaults(AgentKeys)
VERL_KEYS = defaults(VerlKeys)
ENGINE_KEYS = {"verl": VerlKeys, "verl-agent": AgentKeys}
ENGINES = ("verl", "verl-agent")
GAE_LAM_DEFAULT = 1.0                          # algorithm.lam in verl's and verl-agent's ppo_trainer.yaml


def _get(cfg, path: str, default):
    for part in path.split("."):
        if cfg is None or not hasattr(cfg, "get"):
            return default
        cfg = cfg.get(part, None)
    return default if cfg is None else cfg


def _has(cfg, path: str) -> bool:
    """True when the dotted ``path`` is a key of ``cfg`` (its value may be null)."""
    *parents, last = path.split(".")
    for part in parents:
        if cfg is None or not hasattr(cfg, "get"):
            return False
        cfg = cfg.get(part, None)
    return hasattr(cfg, "keys") and last in cfg.keys()


def check_section_name(algorithm) -> None:
    """ValueError for a key of ``algorithm`` that looks like ``sharpo`` but is not
    (``sharp``, ``sharpo_lam``, ``SHARPO``, ``shapro``): Hydra composes it with ``+`` and
    verl never reads it, so the run would silently use SHARPO's defaults."""
    if not hasattr(algorithm, "keys"):
        return
    for key in algorithm.keys():
        k = str(key)
        if k == SECTION:
            continue
        if k.lower().startswith("sharp") or difflib.get_close_matches(k.lower(), [SECTION], cutoff=0.8):
            raise ValueError(f"algorithm.{k}: unknown section (did you mean {SECTION!r}?); SHARPO's settings "
                             f"are algorithm.{SECTION}.* (e.g. +algorithm.{SECTION}.lam=0.3), keys: "
                             f"{', '.join(DEFAULTS)}")


def sharpo_settings(algorithm, max_prompt_length: int, extra: Optional[dict] = None) -> dict[str, Any]:
    """``algorithm.sharpo.*`` (a mapping, or absent) merged over ``DEFAULTS`` and checked.

    An unknown key (a typo such as ``lamda``) raises ValueError naming it, the nearest known
    key and every known key; so does a look-alike section (``check_section_name``); values by
    ``common.check_sharpo_settings`` (TRL's check too). ``max_teacher_prompt_length``
    defaults to ``max_prompt_length + max_hint_tokens``. ``extra``: an engine's own keys with
    their defaults (verl-agent's ``base``), known keys too; their values are returned
    unchecked (the engine checks them).
    """
    check_section_name(algorithm)
    user = algorithm.get(SECTION, None) if hasattr(algorithm, "get") else None
    user = {} if user is None else user
    if not hasattr(user, "keys"):
        raise TypeError(f"algorithm.sharpo: expected a mapping of settings, got {type(user).__name__}")
    known = {**DEFAULTS, **(extra or {})}
    unknown = [str(k) for k in user.keys() if k not in known]
    if unknown:
        named = ", ".join(f"{k!r}{did_you_mean(k, known)}" for k in unknown)
        raise ValueError(f"algorithm.sharpo: unknown key {named}; known keys: {', '.join(known)}")
    cfg = {k: user[k] if k in user else v for k, v in known.items()}
    try:
        check_sharpo_settings(SimpleNamespace(**cfg))
    except (TypeError, ValueError) as e:
        raise type(e)(f"algorithm.sharpo.{e}") from None
    for key in (*COEFFICIENT_NAMES, "success_threshold"):
        cfg[key] = float(cfg[key])
    v = cfg["max_teacher_prompt_length"]
    if v is not None:
        check_int(v, "algorithm.sharpo.max_teacher_prompt_length", 1)
    if cfg["max_teacher_prompt_length"] is None:
        if not is_int(max_prompt_length):
            raise ValueError(f"data.max_prompt_length: expected an int (the teacher prompt's default length "
                             f"builds on it), got {max_prompt_length!r}; or set "
                             "algorithm.sharpo.max_teacher_prompt_length")
        cfg["max_teacher_prompt_length"] = max_prompt_length + cfg["max_hint_tokens"]
    return cfg


def agent_settings(config) -> dict[str, Any]:
    """verl-agent's ``algorithm.sharpo.*`` checked (``sharpo_settings`` plus ``base`` and
    ``max_observation_chars``)."""
    cfg = sharpo_settings(config.algorithm if hasattr(config, "algorithm") else config.get("algorithm", {}),
                          _get(config, "data.max_prompt_length", None), extra=AGENT_KEYS)
    if cfg["base"] not in BASES:
        raise ValueError(f"algorithm.sharpo.base: expected one of {list(BASES)}, got {cfg['base']!r}")
    check_int(cfg["max_observation_chars"], "algorithm.sharpo.max_observation_chars", 0)
    _check_fused(cfg)
    return cfg


def _check_fused(cfg: dict[str, Any]) -> None:
    if not isinstance(cfg["fused_logprobs"], bool):
        raise TypeError(f"algorithm.sharpo.fused_logprobs: expected true or false, got {cfg['fused_logprobs']!r}")


def verl_settings(config) -> dict[str, Any]:
    """verl 0.9.1's ``algorithm.sharpo.*`` checked (``sharpo_settings`` plus
    ``fused_logprobs``, a bool)."""
    cfg = sharpo_settings(_get(config, "algorithm", {}), _get(config, "data.max_prompt_length", None),
                          extra=VERL_KEYS)
    _check_fused(cfg)
    return cfg


MODEL_FUSED = "actor_rollout_ref.model.use_fused_kernels"
FUSED_KEYS = (MODEL_FUSED, "actor_rollout_ref.actor.use_fused_kernels")
FUSED_SETTING = f"algorithm.{SECTION}.fused_logprobs"


def fused_kernels_setup(config, cfg: dict[str, Any], engine: str = "verl") -> bool:
    """verl 0.9.1 and verl-agent: with ``algorithm.sharpo.fused_logprobs`` (``cfg``) true, turn on
    ``actor_rollout_ref.model.use_fused_kernels`` (the actor's and the reference's log-prob
    passes, SHARPO's teacher pass among them, skip the [N, V] logits; fused_verl.py) and
    check that the actor reads it on (``actor.use_fused_kernels`` interpolates it unless
    overridden): ValueError naming the key that keeps it off. -> whether it is on.
    A config that had it off (verl's default, or the user's ``false``: the composed config
    cannot tell them apart; the launchers can, ``fused_choice``) gets one warning line saying
    it was turned on and how to keep it off.
    verl-agent (``engine``) has no default ``fused_kernel_options.impl_backend``: set to
    ``torch`` (fused_verl.py wraps its text forward); another backend is refused by name."""
    if not cfg["fused_logprobs"]:
        return bool(_get(config, MODEL_FUSED, False))
    from omegaconf import open_dict

    if _get(config, MODEL_FUSED, False) is not True:
        warnings.warn(f"{MODEL_FUSED}: turned on by {FUSED_SETTING}=true (the default: sharpo's "
                      f"fused log-prob path); set +{FUSED_SETTING}=false to keep verl's unfused path",
                      UserWarning, stacklevel=2)
    with open_dict(config):
        config.actor_rollout_ref.model.use_fused_kernels = True
        if engine == "verl-agent" and _get(config, "actor_rollout_ref.model.fused_kernel_options", None) is None:
            config.actor_rollout_ref.model.fused_kernel_options = {"impl_backend": "torch"}
    backend = _get(config, "actor_rollout_ref.model.fused_kernel_options.impl_backend", "torch")
    if engine == "verl-agent" and backend != "torch":
        raise ValueError(f"actor_rollout_ref.model.fused_kernel_options.impl_backend: {backend!r}, but verl-agent's "
                         "fused path runs only with 'torch' (sharpo's kernel); drop the override or set "
                         "algorithm.sharpo.fused_logprobs=false")
    for key in FUSED_KEYS:
        if _get(config, key, True) is not True:
            raise ValueError(f"{key}: false, but algorithm.sharpo.fused_logprobs=true asks for verl's fused "
                             f"log-prob path; drop the override or set algorithm.sharpo.fused_logprobs=false")
    return True


def fused_choice(overrides: Sequence[str]) -> list[str]:
    """A launch command's overrides with the user's own ``use_fused_kernels`` choice kept:
    an explicit ``actor_rollout_ref.{model,actor}.use_fused_kernels=false`` next to
    ``adv_estimator=sharpo`` and no ``algorithm.sharpo.fused_logprobs`` gets
    ``+algorithm.sharpo.fused_logprobs=false`` appended (verl's own switch decides; SHARPO's
    turns it on only where the user left it); both set the other way round is a ValueError
    naming both. Other overrides are returned unchanged."""
    given = overrides_config(overrides)
    off = [k for k in FUSED_KEYS if _get(given, k, None) is False]
    if not off or _get(given, "algorithm.adv_estimator", None) != "sharpo":
        return list(overrides)
    fused = _get(given, FUSED_SETTING, None)
    if fused is None:
        return [*overrides, f"+{FUSED_SETTING}=false"]
    if fused is True:
        raise ValueError(f"{off[0]}=false and {FUSED_SETTING}=true: the one turns the fused log-prob "
                         "path off, the other on; drop one")
    return list(overrides)


def gae_lam_warning(config, sharpo_lam: float) -> Optional[str]:
    """The warning text when ``algorithm.lam`` (verl's GAE lambda) is set away from its
    default next to ``adv_estimator=sharpo`` (the user most likely meant SHARPO's lam), else
    None."""
    lam = _get(config, "algorithm.lam", None)
    try:
        same = lam is None or float(lam) == GAE_LAM_DEFAULT
    except (TypeError, ValueError):
        same = False
    if same:
        return None
    # Hydra's `+key=v` adds a key and is refused when the key is there; `key=v` sets one that is
    present = _has(config, f"algorithm.{SECTION}.lam")
    override = f"algorithm.{SECTION}.lam={lam}" if present else f"+algorithm.{SECTION}.lam={lam}"
    return (f"algorithm.lam={lam} is verl's GAE lambda, which adv_estimator=sharpo does not use; SHARPO's "
            f"mixing weight is algorithm.sharpo.lam (now {sharpo_lam:g}): set {override} to change it")


def check_engine_estimator(name: str, engine_estimators) -> None:
    """ValueError naming ``algorithm.adv_estimator`` when it names an estimator registered in
    sharpo (sharpo_train.estimators) that the engine does not have (``engine_estimators``:
    verl's ``ADV_ESTIMATOR_REGISTRY`` names): the drop-ins run ``sharpo`` only, every other
    name goes to the engine's own estimators, and verl's error would not say why."""
    from sharpo_train.estimators import ESTIMATORS

    name = str(name)
    if name == SECTION or name not in ESTIMATORS or name in set(engine_estimators):
        return
    raise ValueError(f"algorithm.adv_estimator: {name!r} is a sharpo estimator "
                     "(sharpo_train.estimators), which the verl drop-in does not run: it runs "
                     f"adv_estimator={SECTION} and leaves every other name to verl's own estimators; "
                     f"train {name!r} with `sharpo train method={name}` or the TRL drop-in "
                     f"(SharpoConfig(estimator={name!r}))")


def check_config(config, engine: str = "verl") -> dict[str, Any]:
    """What a trainer checks at construction for ``adv_estimator=sharpo`` (verl's
    ``SharpoTrainerMixin.__init__``, verl-agent's ``RayPPOTrainer.__init__`` through
    configs/verl_agent/ray_trainer.patch), before any worker or model starts: the settings
    (ValueError/TypeError naming the key) and the ``algorithm.lam`` warning. Returns the
    settings."""
    if engine not in ENGINES:
        raise ValueError(f"engine: expected one of {ENGINES}, got {engine!r}")
    if engine == "verl-agent":
        cfg = agent_settings(config)
    else:
        cfg = verl_settings(config)
    if _get(config, "algorithm.use_kl_in_reward", False):
        raise ValueError("algorithm.use_kl_in_reward: not supported with adv_estimator=sharpo")
    message = gae_lam_warning(config, cfg["lam"])
    if message:
        warnings.warn(message, UserWarning, stacklevel=2)
    return cfg


def _value(text: str, key: str):
    """A Hydra override's value as Hydra reads simple ones: 'quoted text' (or "...") is the
    text inside; anything else as sharpo reads a key=value (settings/loader.parse_value,
    Hydra's reading: 1e-3 and .5 are floats where YAML 1.1 says strings, 0.3, 512, null,
    true; ``[..]``/``{..}`` through the bounded YAML reader: nested deeper than 32 levels
    or an integer of more than 4,300 digits is a ConfigError naming ``key``)."""
    from sharpo_train.settings.loader import parse_value

    s = text.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return parse_value(s, key)


def overrides_config(args: Sequence[str]) -> dict:
    """Nested dict of the ``key=value`` overrides in ``args`` (``+``/``++`` prefixes and
    ``~key`` deletions dropped), the values read as Hydra reads simple ones."""
    out: dict = {}
    for arg in args:
        if arg.startswith("~") or "=" not in arg:
            continue
        key, text = arg.lstrip("+").split("=", 1)
        node = out
        *parents, last = key.split(".")
        for p in parents:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                nxt = node[p] = {}
            node = nxt
        node[last] = _value(text, key)
    return out


def check_overrides(args: Sequence[str], engine: str = "verl-agent") -> dict[str, Any]:
    """``check_config`` on a launch command's overrides (the run's whole ``algorithm.*`` and
    ``data.max_prompt_length`` must be among them, as in run_alfworld_sharpo.sh). This check
    cannot change the command that runs next, so an explicit ``use_fused_kernels=false``
    that ``fused_choice`` would keep off by adding ``fused_logprobs=false`` is refused,
    naming the override to add."""
    kept = fused_choice(args)
    if len(kept) > len(args):
        key = next(k for k in FUSED_KEYS if _get(overrides_config(args), k, None) is False)
        raise ValueError(f"{key}=false: {FUSED_SETTING} (default true) would turn it on; add "
                         f"{kept[-1]} to keep verl's unfused path")
    return check_config(overrides_config(args), engine)


def rows(engine: str = "verl"):
    """The settings rows (type, default, range, help; settings/describe.py) of an engine's
    ``algorithm.sharpo.*``."""
    from sharpo_train.settings.describe import setting_rows

    if engine not in ENGINES:
        raise ValueError(f"engine: expected one of {ENGINES}, got {engine!r}")
    prefix = f"algorithm.{SECTION}."
    return setting_rows(EngineSettings(), prefix) + setting_rows(ENGINE_KEYS[engine](), prefix)


USAGE = ("usage: python -m sharpo_train.integrations.engine_settings [--engine verl|verl-agent] "
         "[--help] OVERRIDES...\nchecks the overrides' algorithm.sharpo.* settings (exit 0, or one "
         "line naming the key and exit 2); --help lists them with type, default and help")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sharpo_train.integrations.engine_settings [--engine verl-agent] OVERRIDES...``:
    exit 0 when the overrides' SHARPO settings pass, else one line naming the key, exit 2.
    ``--help``: the engine's ``algorithm.sharpo.*`` settings with their help."""
    args = list(sys.argv[1:] if argv is None else argv)
    engine = "verl-agent"
    if args[:1] == ["--engine"] and len(args) > 1:
        engine, args = args[1], args[2:]
    if args[:1] in (["--help"], ["-h"]):
        from sharpo_train.settings.describe import rows_text

        try:
            print(USAGE + "\n\n" + rows_text(rows(engine)))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    try:
        check_overrides(args, engine)
    except (TypeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
