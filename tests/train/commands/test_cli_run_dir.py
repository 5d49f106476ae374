"""One spelling of the run directory on every command, `--run-dir DIR`, with the older
spellings kept as aliases, and `--print-config` (commands/_run_dir_arg.py,
docs/training.md "Command line")."""
from pathlib import Path

import pytest
import yaml

from sharpo_train.cli import build_parser, main
from sharpo_train.loops.train_config import load_config

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# every command, its required extra arguments, and the older spellings of --run-dir
SPELLINGS = {
    "train": ([], []),
    "eval": ([], ["--run"]),
    "explain": ([], ["POSITIONAL"]),
    "demo": ([], ["--out"]),
    "compare": ([], ["--out"]),
    "probe-teacher": ([], ["--run"]),
}


@pytest.mark.parametrize("command", sorted(SPELLINGS))
def test_every_command_takes_run_dir_and_its_older_spellings(command):
    extra, aliases = SPELLINGS[command]
    parse = build_parser().parse_args
    assert parse([command, "--run-dir", "R", *extra]).run_dir == "R"
    for alias in aliases:
        if alias == "POSITIONAL":
            args = parse([command, "R", *extra])
            assert args.run == "R" and args.run_dir is None
        else:
            assert parse([command, alias, "R", *extra]).run_dir == "R"


@pytest.mark.parametrize("argv", [
    ["eval", "--run", "a", "--run-dir", "b"],
    ["probe-teacher", "--run-dir", "a", "--run", "b"],
    ["demo", "--out", "a", "--run-dir", "b"],
    ["compare", "--run-dir", "a", "--out", "b"],
    ["train", "--run-dir", "a", "--run-dir", "b"],
])
def test_two_different_spellings_at_once_are_one_line_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert "--run-dir: the run directory is given twice" in err and "'a'" in err and "'b'" in err


@pytest.mark.parametrize("argv", [
    ["train", "--config", SMOKE, "--run-dir", "a", "run_dir=b", "--print-config"],
    ["explain", "a", "--run-dir", "b"],
    ["demo", "--quick", "--run-dir", "a", "run_dir=b", "--print-config"],
    ["compare", "--quick", "--out", "a", "++run_dir=b", "--print-config"],
])
def test_run_dir_given_as_option_and_override_or_positional_must_agree(argv, in_tmp, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "given twice" in err and "Traceback" not in err, err
    assert list(in_tmp.iterdir()) == []


def test_the_same_value_twice_is_fine(in_tmp, capsys):
    assert main(["train", "--config", SMOKE, "--run-dir", "a", "run_dir=a", "--print-config"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["run_dir"] == "a"


@pytest.mark.parametrize("spelling", [["--run-dir", "nope"], ["--run", "nope"]])
def test_eval_spellings_behave_alike(spelling, in_tmp, capsys):
    assert main(["eval", *spelling]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sharpo eval: error: --run-dir: nope") and err.count("\n") == 1, err


@pytest.mark.parametrize("spelling", [["--run-dir", "nope"], ["nope"]])
def test_explain_spellings_behave_alike(spelling, in_tmp, capsys):
    assert main(["explain", *spelling]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "no such run directory" in err and err.count("\n") == 1, err


def test_explain_without_a_run_dir_is_one_line(in_tmp, capsys):
    assert main(["explain"]) == 2
    err = capsys.readouterr().err
    assert "--run-dir: the run directory is required" in err and err.count("\n") == 1


# ------------------------------------------------------------------ --print-config

def test_train_print_config_is_the_resolved_config_and_creates_nothing(in_tmp, capsys):
    argv = ["--config", SMOKE, "+env.seed=3", "++total_steps=7", "optim.lr=2e-3"]
    assert main(["train", "--print-config", "--run-dir", "runs/x", *argv]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    want = load_config(SMOKE, ["+env.seed=3", "++total_steps=7", "optim.lr=2e-3",
                               "run_dir=runs/x"]).to_dict()
    assert printed == want
    assert (printed["env"]["seed"], printed["total_steps"], printed["optim"]["lr"]) == (3, 7, 2e-3)
    assert list(in_tmp.iterdir()) == []
    # the printed YAML is a config file that gives the same config back
    (in_tmp / "c.yaml").write_text(yaml.safe_dump(printed))
    assert load_config(in_tmp / "c.yaml").to_dict() == want


def test_train_print_config_still_refuses_bad_settings(in_tmp, capsys):
    assert main(["train", "--print-config", "env.bogus=1"]) == 2
    err = capsys.readouterr().err
    assert "env.bogus: unknown key" in err and "known: [" in err and err.count("\n") == 1
    assert main(["train", "--print-config", "+total_steps=3"]) == 2
    assert "total_steps: +total_steps=... adds a key" in capsys.readouterr().err
    assert list(in_tmp.iterdir()) == []


def test_train_print_config_of_a_resume_is_the_runs_config(in_tmp, capsys):
    run = in_tmp / "run"
    assert main(["train", "--config", SMOKE, "--run-dir", str(run), "total_steps=1",
                 "log.progress=false", "rollout.max_new_tokens=8",
                 "rollout.max_turns=2", "method=grpo", "eval.at_end=false"]) == 0
    capsys.readouterr()
    before = sorted(p.name for p in run.iterdir())
    assert main(["train", "--resume", "--run-dir", str(run), "--print-config",
                 "total_steps=3"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["total_steps"] == 3 and printed["method"] == "grpo" and printed["resume"]
    assert sorted(p.name for p in run.iterdir()) == before


def test_demo_print_config_names_every_setting_and_creates_nothing(in_tmp, capsys):
    assert main(["demo", "--quick", "--print-config", "run_dir=d", "++demo.train_games=9",
                 "sft.max_steps=5", "total_steps=3", "+env.seed=4"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["run_dir"] == "d" and printed["demo"]["train_games"] == 9
    assert printed["sft"]["max_steps"] == 5
    train = printed["train"]
    # run_dir= names the demo's directory; its RL run is d/rl (not a trainer override)
    assert train["run_dir"] == str(Path("d") / "rl") and train["init_from"] == str(Path("d") / "sft")
    assert train["total_steps"] == 3 and train["env"]["seed"] == 4 and "runs" not in printed
    assert list(in_tmp.iterdir()) == []


def test_compare_print_config_lists_each_run_by_what_it_changes(in_tmp, capsys):
    assert main(["compare", "--quick", "--print-config", "--out", "c", "--seeds", "0,1",
                 "--methods", "grpo,sharpo:0.05"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["demo"]["seeds"] == [0, 1]
    assert printed["train"]["method"] == "grpo" and printed["train"]["seed"] == 0
    assert printed["runs"] == {
        "runs/grpo-seed0": {},
        "runs/sharpo-lam0.05-seed0": {"method": "sharpo", "estimator.lam": 0.05,
                                      "run_dir": str(Path("c/runs/sharpo-lam0.05-seed0"))},
        "runs/grpo-seed1": {"seed": 1, "run_dir": str(Path("c/runs/grpo-seed1"))},
        "runs/sharpo-lam0.05-seed1": {"method": "sharpo", "estimator.lam": 0.05, "seed": 1,
                                      "run_dir": str(Path("c/runs/sharpo-lam0.05-seed1"))}}
    assert list(in_tmp.iterdir()) == []
