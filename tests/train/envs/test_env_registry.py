"""The environment registry (sharpo_train/envs/registry.py) and EnvSpec (envs/spec.py): every
registered environment is complete, the config checks env.* through its spec, a new one is
one registration, and nothing outside the environment packages names an environment (what
the environment packages may import: tests/test_import_table.py)."""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sharpo_train.errors import ConfigError

from sharpo_train.loops.train_config import load_config
from sharpo_train.envs import (ENVS, EnvSpec, EnvSuite, SerialEnvPool, env_names, get_spec,
                               make_suite, register_env)
from sharpo_train.envs.synthetic import CounterEnv, make_tasks
from sharpo_train.settings.loader import in_range, setting
from sharpo_train.envs.turn_prompt import parse_action, render_hint

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", env_names())
def test_every_registered_spec_is_complete(name):
    spec = get_spec(name)
    assert spec.name == name and "name" in spec.settings
    prompt = spec.prompts.render_turn_prompt("Your task is to: win.", [("o1", "a1")], "now",
                                             ["a", "b"], 1)
    assert isinstance(prompt, str) and "now" in prompt
    assert spec.prompts.parse_action("<think>x</think><action>go  west</action>") == "go west"
    assert spec.prompts.render_hint(["a1"]).startswith("A successful attempt")
    for hook in ("plan_labels", "recipe", "probe"):      # lazy hooks import and resolve
        if getattr(spec, hook) is not None and hook != "plan_labels":
            assert spec.load(hook) is not None


@pytest.mark.parametrize("name", env_names())
def test_unknown_env_key_is_refused_by_config_and_by_the_factory(name):
    with pytest.raises(ConfigError, match="env.bogus"):
        load_config(None, [f"env.name={name}", "env.bogus=1"])
    with pytest.raises(ValueError, match="bogus"):
        make_suite({"name": name, "bogus": 1})


def test_unknown_environment_and_missing_hook_are_named():
    with pytest.raises(ValueError, match="env.name: unknown environment 'nope'"):
        get_spec("nope")
    with pytest.raises(ConfigError, match="env.name"):
        load_config(None, ["env.name=nope"])
    with pytest.raises(ValueError, match="'synthetic' has no recipe"):
        get_spec("synthetic").load("recipe")
    with pytest.raises(ConfigError, match="log.credit_quality"):
        load_config(None, ["env.name=synthetic", "log.credit_quality=true"])


def _toy_suite(cfg: dict) -> EnvSuite:
    n = cfg.get("num_train", 3)
    return EnvSuite(make_tasks(n, 0, 2, "train"), [], lambda k=None: SerialEnvPool(CounterEnv),
                    ["Up", "Down"])


@dataclass
class ToySettings:
    num_train: int = setting(3, "training tasks")

    def validate(self) -> None:
        in_range(self, "num_train", 1, 10)


def test_a_new_environment_is_one_registration():
    import sharpo_train.envs.synthetic as prompts
    spec = EnvSpec(name="toy", make_suite=_toy_suite, prompts=prompts, settings_class=ToySettings)
    assert spec.settings == {"name": (str,), "num_train": (int, 1, 10)}
    assert spec.settings_help == {"num_train": "training tasks"}
    register_env("toy", spec)
    try:
        cfg = load_config(None, ["env.name=toy", "env.num_train=4"])
        assert cfg.env == {"name": "toy", "num_train": 4}
        assert len(make_suite(cfg.env).train_tasks) == 4
        with pytest.raises(ConfigError, match="env.num_train"):
            load_config(None, ["env.name=toy", "env.num_train=11"])
    finally:
        ENVS.pop("toy")
    with pytest.raises(ValueError, match="unknown environment 'toy'"):
        get_spec("toy")


def test_spec_checks_its_prompts_and_schema():
    with pytest.raises(ValueError, match="settings_class"):
        EnvSpec(name="x", make_suite=_toy_suite, prompts=sys.modules[__name__])
    with pytest.raises(ValueError, match="settings_class"):
        EnvSpec(name="x", make_suite=_toy_suite, prompts=sys.modules[__name__],
                settings_class={"name": (str,)})
    with pytest.raises(ValueError, match="render_turn_prompt"):
        EnvSpec(name="x", make_suite=_toy_suite, prompts=object(), settings_class=ToySettings)
    with pytest.raises(ValueError, match="reward setting 'bonus' is not in its settings"):
        EnvSpec(name="x", make_suite=_toy_suite, prompts=sys.modules[__name__],
                settings_class=ToySettings, reward_settings=("bonus",))
    assert parse_action("<action>a</action>") == "a" and render_hint(["a"])


def test_loading_a_config_imports_no_environment_engine():
    code = ("import sys, sharpo_train.loops.train_config as c; c.load_config(None, []); "
            "print(sorted(m for m in sys.modules if m.startswith(('textworld', 'alfworld')) "
            "or m.endswith(('alfworld.engine', 'alfworld.recipe', 'webshop.engine'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "[]"


ENV_MODULE = re.compile(r"(?:from|import)\s+(?:sharpo_train|\.+)\.?envs\.(?!base\b|spec\b|"
                        r"registry\b|turn_prompt\b|env_config\b|demo_files\b|command_args\b)(\w+)")


def test_only_an_environment_names_itself():
    """No module of the package, and no benchmark, imports an environment package, except
    the environment itself (sharpo_train/envs/<name>/) and a benchmark of that environment
    (benchmarks/bench_<name>.py, or a benchmark package benchmarks/<name>_*/): the
    commands, reports and recipes go through EnvSpec."""
    offenders = []
    for path in sorted([*(ROOT / "sharpo_train").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("sharpo_train", "envs") and len(rel.parts) > 3:
            own = rel.parts[2]
        elif rel.parts[0] == "benchmarks" and len(rel.parts) > 2:
            own = rel.parts[1].split("_")[0]            # benchmarks/corridor_map/: corridor
        elif rel.parts[0] == "benchmarks":
            own = path.stem[len("bench_"):]
        else:
            own = None
        offenders += [f"{rel}: {m.group(0)}" for m in ENV_MODULE.finditer(path.read_text())
                      if m.group(1) != own]
    assert offenders == []
