"""Help for every setting (docs/training.md, "Every setting"): each field of every settings
class carries a one-line help; `sharpo train --help`, `sharpo eval --help` and `sharpo
settings` list every key with its type, default, range and help; docs/training.md's tables
are the generated ones."""
import dataclasses
from pathlib import Path

import pytest

from sharpo_train.cli import main
from sharpo_train.commands.settings import COMMANDS, docs_block, setting_rows
from sharpo_train.envs.registry import recipe_envs
from sharpo_train.loops.sft import SFTConfig
from sharpo_train.loops.train_config import Config
from sharpo_train.recipes.recipe_config import CompareConfig, settings_class
from sharpo_train.settings.describe import field_range, missing_help

ROOT = Path(__file__).resolve().parents[3]


def _fields(obj, prefix=""):
    """(key, dataclasses.Field) of every field of a settings tree, sections included."""
    for f in dataclasses.fields(obj):
        yield prefix + f.name, f
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from _fields(value, prefix + f.name + ".")


@pytest.mark.parametrize("make", [Config, SFTConfig, CompareConfig,
                                  *[lambda e=e: settings_class(e, CompareConfig)()
                                    for e in recipe_envs()]])
def test_every_field_of_every_settings_class_has_a_one_line_help(make):
    obj = make()
    assert missing_help(obj) == []
    for key, f in _fields(obj):
        text = f.metadata.get("help", "")
        assert text.strip() and "\n" not in " ".join(text.split()), key


@pytest.mark.parametrize("command", ["train", "eval"])   # eval loads the trainer's Config
def test_train_help_lists_every_key_with_its_help(capsys, command):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    rows = setting_rows("train")
    assert {"estimator.tau", "teacher.hint_scope", "rollout.group_size", "env.name",
            "model.lora.rank", "log.report_to"} <= {r.key for r in rows}
    for r in rows:
        assert f"  {r.key} ({r.type}, default {r.default}" in out, r.key
        assert r.help in " ".join(out.split()), r.key


def test_settings_command_filters_by_prefix_and_names_ranges(capsys):
    assert main(["settings", "estimator."]) == 0
    out = capsys.readouterr().out
    keys = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and
            not line.startswith("      ")]
    assert keys and all(k.startswith("estimator.") for k in keys) and "estimator.tau" in keys
    assert "estimator.tau (float, default 1, (0, 1000])" in out       # in_range(..., lo_open)
    assert main(["settings", "rollout.eng"]) == 0
    assert "rollout.engine (str, default hf, hf or vllm)" in capsys.readouterr().out
    assert main(["settings", "nothing."]) == 2
    assert "no train setting starts with 'nothing.'" in capsys.readouterr().err
    assert main(["settings", "--command", "sft", "lr"]) == 0
    assert "lr (float, default 0.001, (0, 1])" in capsys.readouterr().out


def test_ranges_are_read_from_the_checks():
    cfg = Config()
    assert field_range(cfg.rollout, "group_size") == "[1, 1024]"
    assert field_range(cfg.rollout, "top_p") == "(0, 1]"
    assert field_range(cfg.model, "cpu_threads") == "[1, 1024] or null"
    assert field_range(cfg.rollout, "engine") == "hf or vllm"
    assert field_range(cfg.model, "hidden_size") == ""     # checked against num_heads only
    assert field_range(cfg, "seed") == "[0, 2147483647]"


@pytest.mark.parametrize("command", COMMANDS)
def test_docs_training_settings_tables_are_the_generated_ones(command):
    docs = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    if command == "demo":           # compare's table holds demo's keys and its own two
        assert set(r.key for r in setting_rows("demo")) < set(r.key for r in setting_rows("compare"))
        return
    assert docs_block(command) in docs, (
        f"docs/training.md: the {command} settings table is stale; regenerate it with "
        f"python -c \"from sharpo_train.commands.settings import write_docs; "
        f"write_docs('docs/training.md')\"")


def test_every_environment_setting_has_a_one_line_help():
    from sharpo_train.envs.registry import env_names, get_spec
    for name in env_names():
        spec = get_spec(name)
        assert set(spec.settings_help) == set(spec.settings) - {"name"}, name
        assert all(h.strip() and "\n" not in h for h in spec.settings_help.values()), name
    rows = [r for r in setting_rows("train") if r.key.startswith("env.") and r.key != "env.name"]
    assert rows and all(r.help.startswith("(env.name=") and len(r.help) > 20 for r in rows)
