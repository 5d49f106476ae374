"""`sharpo compare --methods`: every arm is checked before the first phase runs (an arm its
environment refuses, e.g. the oracle on ALFWorld, is refused at once, not after the other
arms trained); two arms that are one run, or one key given twice in an arm, are refused
instead of collapsing; an arm with many ``@key=value`` settings gets a run folder name a
file system takes."""
import os

import pytest

import sharpo_train.recipes.phases as phases
from sharpo_train.errors import ConfigError
from sharpo_train.recipes.recipe_config import parse_methods

from train.commands.test_cli_errors import one_line_error


@pytest.fixture
def nothing_runs(monkeypatch):
    """Any phase that starts is a failure of the test."""
    def started(*a, **k):
        raise AssertionError("a phase started before the arms were checked")
    import sharpo_train.envs.alfworld.recipe as alfworld_recipe
    monkeypatch.setattr(alfworld_recipe, "games", started)
    monkeypatch.setattr(phases, "sft", started)


def test_an_arm_the_environment_refuses_is_refused_before_any_phase(tmp_path, capsys,
                                                                     nothing_runs):
    one_line_error(capsys, ["compare", "--run-dir", str(tmp_path / "c"), "--quick",
                            "--methods", "grpo,oracle", "--seeds", "0"], "oracle")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("methods, needle", [
    ("grpo,grpo", "same arm"),
    ("sharpo:0.2,sharpo:0.20", "same arm"),
    ("grpo@optim.lr=1e-3@optim.lr=2e-3", "optim.lr twice"),
])
def test_duplicate_arms_and_keys_are_refused(tmp_path, capsys, methods, needle, nothing_runs):
    with pytest.raises(ConfigError, match=needle):
        parse_methods(methods)
    one_line_error(capsys, ["compare", "--run-dir", str(tmp_path / "c"), "--quick",
                            "--methods", methods], "--methods", needle)
    assert not (tmp_path / "c").exists()


def test_forty_settings_in_one_arm_give_a_short_run_folder(tmp_path):
    arm = "grpo@optim.lr=1e-4"
    many = "grpo" + "".join(f"@optim.{key}" for key in (
        "lr=1e-3", "weight_decay=0.01", "beta1=0.9", "beta2=0.99", "warmup_steps=3",
        "grad_clip=1.0", "ppo_epochs=2", "mini_batches=2"))
    for methods in (arm, many):
        label, slug, _ = parse_methods(methods)[0]
        assert len(slug.encode()) <= 96 and "/" not in slug
        folder = tmp_path / f"{slug}-seed0"
        folder.mkdir()                               # a name the file system takes
    long_value = "grpo@optim.lr=" + "0" * 300 + "1e-3"
    _, slug, _ = parse_methods(long_value)[0]
    assert len(slug) <= 96
    os.mkdir(tmp_path / slug)
    # distinct long arms keep distinct folders
    a = parse_methods("grpo@optim.lr=" + "0" * 300 + "1e-3")[0][1]
    b = parse_methods("grpo@optim.lr=" + "0" * 300 + "2e-3")[0][1]
    assert a != b


def _printed_compare(capsys, argv) -> dict:
    """The demo.* section `sharpo compare ... --print-config` prints."""
    import yaml
    from sharpo_train.cli import main
    assert main(["compare", *argv, "--print-config"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_demo_seeds_and_methods_are_the_runs_not_silently_replaced(tmp_path, capsys):
    """`demo.seeds=[0,5]` once printed as set and then ran the default seeds 0,1,2."""
    run = ["--run-dir", str(tmp_path / "c"), "--quick"]
    printed = _printed_compare(capsys, run + ["demo.seeds=[0,5]", "demo.methods=[grpo]"])
    assert printed["demo"]["seeds"] == [0, 5] and printed["demo"]["methods"] == ["grpo"]
    assert set(printed["runs"]) == {"runs/grpo-seed0", "runs/grpo-seed5"}
    assert printed["train"]["run_dir"].endswith("runs/grpo-seed0")
    printed = _printed_compare(capsys, run + ["--seeds", "3", "--methods", "sharpo:0.2"])
    assert printed["demo"]["seeds"] == [3] and printed["demo"]["methods"] == ["sharpo:0.2"]
    printed = _printed_compare(capsys, run)                  # neither: the defaults
    assert printed["demo"]["seeds"] == [0, 1, 2]
    assert printed["demo"]["methods"] == ["grpo", "sharpo:0.2", "sharpo:0.05"]
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("argv, needles", [
    (["demo.seeds=[0,5]", "--seeds", "1"], ("demo.seeds", "--seeds", "one of the two")),
    (["demo.methods=[grpo]", "--methods", "grpo"], ("demo.methods", "--methods")),
    (["demo.seeds=[0,0]"], ("demo.seeds", "distinct")),
    (["demo.methods=[grpo,grpo]"], ("demo.methods", "same arm")),
])
def test_seeds_and_methods_from_demo_are_checked_and_named(tmp_path, capsys, argv, needles):
    one_line_error(capsys, ["compare", "--run-dir", str(tmp_path / "c"), "--quick", *argv,
                            "--print-config"], *needles)
    assert not (tmp_path / "c").exists()
