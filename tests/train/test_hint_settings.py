"""The hint's one set of settings (sharpo_train/hint.py): defaults, checks, the hint_* keys
of the trainer and of `sharpo sft`, and the one max_hint_tokens default."""
import pytest

from sharpo_train.loops.train_config import load_config
from sharpo_train.errors import ConfigError
from sharpo_train.hint import (HINT_DEFAULTS, HINT_TEMPLATE, HintKeys, HintSettings,
                               render_steps, scoped)
from sharpo_train.loops.sft import SFTConfig, parse_sft_overrides


@pytest.mark.parametrize("field, value, exc", [
    ("placement", "before_task", ValueError), ("scope", "whole", ValueError),
    ("max_observation_chars", -1, ValueError), ("max_observation_chars", True, ValueError),
    ("max_hint_tokens", 4, ValueError), ("max_hint_tokens", 64.0, TypeError),
    ("template", "no field", ValueError), ("template", "{hint} {other}", ValueError)])
def test_bad_settings_name_the_field(field, value, exc):
    with pytest.raises(exc, match=f"^hint_{field}: "):
        HintSettings(**{field: value}).validate(prefix="hint_")


def test_trainer_and_sft_keys_are_the_hint_modules():
    for cls in (type(load_config(None, []).teacher), SFTConfig):
        assert issubclass(cls, HintKeys)
    t = load_config(None, []).teacher.hint_settings()
    s = SFTConfig().hint_settings()
    assert t == s == HintSettings(max_hint_tokens=HINT_DEFAULTS.max_hint_tokens)
    with pytest.raises(ConfigError, match=r"^teacher\.hint_scope: expected one of"):
        load_config(None, ["teacher.hint_scope=whole"])
    with pytest.raises(ConfigError, match=r"^hint_placement: expected one of"):
        parse_sft_overrides(["hint_placement=before_task"])
    with pytest.raises(ConfigError, match=r"^sft\.hint_max_observation_chars: expected"):
        parse_sft_overrides(["hint_max_observation_chars=-3"], prefix="sft.")


def test_one_max_hint_tokens_default():
    pytest.importorskip("trl")
    from sharpo_train.integrations.trl import SharpoConfig
    import dataclasses
    fields = {f.name: f.default for f in dataclasses.fields(SharpoConfig)}
    assert fields["max_hint_tokens"] == HINT_DEFAULTS.max_hint_tokens == 512
    assert fields["hint_template"] == HINT_TEMPLATE == HINT_DEFAULTS.template


def test_scope_cut_and_rendering():
    steps = [("a", "x"), ("b", "y"), ("c", "z")]
    assert scoped(steps, "trajectory", 0) == steps
    assert scoped(steps, "to_turn", 1) == steps[:2] and scoped(steps, "to_turn", None) == steps
    with pytest.raises(ValueError, match="^scope: "):
        scoped(steps, "all", 0)
    assert render_steps(steps[:1], template="Peer:\n{hint}") == "Peer:\n1. a -> x"
    with pytest.raises(ValueError, match="^steps: "):
        render_steps([])
