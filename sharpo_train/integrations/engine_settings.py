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

import difflib
import sys
import warnings
from types import SimpleNamespace
from typing import Any, Optional, Sequence

from sharpo_kernels import COEFFICIENT_NAMES, SHARPO_DEFAULTS
from sharpo_train.checks import check_int, is_int
from sharpo_train.errors import did_you_mean
from sharpo_train.hint import HINT_DEFAULTS
from sharpo_train.integrations.common import check_sharpo_settings
from sharpo_train.step.teacher_rule import SUCCESS_THRESHOLD

SECTION = "sharpo"
# algorithm.sharpo.*: the kernel's coefficients (sharpo_kernels.SharpoCoefficients), then the
# hint's budget and template (sharpo_train/hint.py)
DEFAULTS = dict(SHARPO_DEFAULTS.kwargs(), success_threshold=SUCCESS_THRESHOLD,
                max_hint_tokens=HINT_DEFAULTS.max_hint_tokens, max_teacher_prompt_length=None,
                hint_template=HINT_DEFAULTS.template)
BASES = ("grpo", "gigpo", "episode_grpo")      # verl-agent's algorithm.sharpo.base
AGENT_KEYS = {"base": "grpo",                  # verl-agent's own algorithm.sharpo.* keys
              "max_observation_chars": HINT_DEFAULTS.max_observation_chars, "fused_logprobs": True}
VERL_KEYS = {"fused_logprobs": True}           # verl 0.9.1's own key: fused_kernels_setup
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


def fused_kernels_setup(config, cfg: dict[str, Any], engine: str = "verl") -> bool:
    """verl 0.9.1 and verl-agent: with ``algorithm.sharpo.fused_logprobs`` (``cfg``) true, turn on
    ``actor_rollout_ref.model.use_fused_kernels`` (the actor's and the reference's log-prob
    passes, SHARPO's teacher pass among them, skip the [N, V] logits; fused_verl.py) and
    check that the actor reads it on (``actor.use_fused_kernels`` interpolates it unless
    overridden): ValueError naming the key that keeps it off. -> whether it is on.
    verl-agent (``engine``) has no default ``fused_kernel_options.impl_backend``: set to
    ``torch`` (fused_verl.py wraps its text forward); another backend is refused by name."""
    if not cfg["fused_logprobs"]:
        return bool(_get(config, "actor_rollout_ref.model.use_fused_kernels", False))
    from omegaconf import open_dict

    with open_dict(config):
        config.actor_rollout_ref.model.use_fused_kernels = True
        if engine == "verl-agent" and _get(config, "actor_rollout_ref.model.fused_kernel_options", None) is None:
            config.actor_rollout_ref.model.fused_kernel_options = {"impl_backend": "torch"}
    backend = _get(config, "actor_rollout_ref.model.fused_kernel_options.impl_backend", "torch")
    if engine == "verl-agent" and backend != "torch":
        raise ValueError(f"actor_rollout_ref.model.fused_kernel_options.impl_backend: {backend!r}, but verl-agent's "
                         "fused path runs only with 'torch' (sharpo's kernel); drop the override or set "
                         "algorithm.sharpo.fused_logprobs=false")
    for key in ("actor_rollout_ref.model.use_fused_kernels", "actor_rollout_ref.actor.use_fused_kernels"):
        if _get(config, key, True) is not True:
            raise ValueError(f"{key}: false, but algorithm.sharpo.fused_logprobs=true asks for verl's fused "
                             f"log-prob path; drop the override or set algorithm.sharpo.fused_logprobs=false")
    return True


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
    ``data.max_prompt_length`` must be among them, as in run_alfworld_sharpo.sh)."""
    return check_config(overrides_config(args), engine)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sharpo_train.integrations.engine_settings [--engine verl-agent] OVERRIDES...``:
    exit 0 when the overrides' SHARPO settings pass, else one line naming the key, exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    engine = "verl-agent"
    if args[:1] == ["--engine"] and len(args) > 1:
        engine, args = args[1], args[2:]
    try:
        check_overrides(args, engine)
    except (TypeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
