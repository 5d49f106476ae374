"""Every float setting has a range that means something, and the error says it: a
huge value (1e300) or a huge negative one is refused with one line naming the
key and its bounds, for the trainer's config (every section, every registered
estimator's parameters, every environment's env.* floats, LoRA) and `sharpo sft`'s."""
import dataclasses
import re
import typing

import pytest

from sharpo_train.loops.train_config import Config, load_config
from sharpo_train.envs.registry import ENVS, get_spec
from sharpo_train.errors import ConfigError
from sharpo_train.estimators import ESTIMATORS
from sharpo_train.loops.sft import SFTConfig, parse_sft_overrides


def _is_float(tp) -> bool:
    return tp is float or (typing.get_origin(tp) is typing.Union
                           and float in typing.get_args(tp))


def _float_keys(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from _float_keys(tp, f"{prefix}{f.name}.")
        elif _is_float(tp):
            yield prefix + f.name


def trainer_keys():
    keys = [([], k) for k in _float_keys(Config) if not k.startswith("model.lora.")]
    keys += [(["model.lora.rank=4"], k) for k in _float_keys(Config) if k.startswith("model.lora.")]
    for name, est in sorted(ESTIMATORS.items()):
        keys += [([f"method={name}"], f"estimator.{k}") for k in _float_keys(est.params)]
    for name in sorted(ENVS):
        for k, entry in get_spec(name).settings.items():
            if _is_float(entry[0]):
                keys.append(([f"env.name={name}"], f"env.{k}"))
    return keys


@pytest.mark.parametrize("base, key", trainer_keys(), ids=lambda x: x if isinstance(x, str) else "")
@pytest.mark.parametrize("value", ["1e300", "-1e300"])
def test_every_trainer_float_is_bounded_and_says_its_range(base, key, value):
    with pytest.raises(ConfigError) as err:
        load_config(None, [*base, f"{key}={value}"])
    msg = str(err.value)
    assert msg.startswith(key) or key.split(".")[-1] in msg.split(":")[0], msg
    assert any(s in msg for s in ("<", ">", "[", "in (")), msg     # the range is stated
    assert "\n" not in msg


@pytest.mark.parametrize("key", list(_float_keys(SFTConfig)))
@pytest.mark.parametrize("value", ["1e300", "-1e300"])
def test_every_sft_float_is_bounded(key, value):
    base = ["model.lora.rank=4"] if key.startswith("model.lora.") else []
    with pytest.raises(ConfigError, match=key.split(".")[-1]):
        parse_sft_overrides([*base, f"{key}={value}"])


def test_the_cases_of_the_issue():
    for override, needle in (("model.lora.alpha=1e308", "model.lora.alpha: expected > 0.0 and <= 4096"),
                             ("estimator.tau=1e300", "tau"), ("estimator.rho_max=1e300", "rho_max")):
        base = ["model.lora.rank=4"] if "lora" in override else []
        with pytest.raises(ConfigError, match=needle):
            load_config(None, [*base, override])
    # the defaults and ordinary values keep loading
    load_config(None, ["model.lora.rank=4", "model.lora.alpha=64", "estimator.tau=2",
                       "estimator.rho_max=8"])


@pytest.mark.parametrize("override, needle", [
    ("rollout.temperature=1e-300", "rollout.temperature: expected >= 0.001"),
    ("eval.temperature=1e-300", "eval.temperature: expected 0 (greedy) or a number in [0.001, 100]"),
    ("estimator.eps=1e-300", "estimator.eps: expected >= 1e-12")])
def test_probe_round_tiny_values_that_overflowed_are_refused(override, needle):
    """Probe round: temperature 1e-300 made the sampler's probabilities inf/nan (a
    traceback), estimator.eps 1e-300 is 0 in float32 and gave a NaN loss."""
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(None, [override])
    load_config(None, ["eval.temperature=0", "rollout.temperature=0.001", "estimator.eps=1e-8"])
