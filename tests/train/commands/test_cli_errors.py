"""`sharpo` user errors (the CLI as users meet it):
one line on stderr, exit status 2, no traceback, nothing created; `--resume` semantics.

Most cases call ``sharpo_train.cli.main`` in-process (fast); one runs the real command in a
subprocess for its exit status."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sharpo_train import __version__
from sharpo_train.cli import build_parser, main
from sharpo_train.loops.train_config import load_config, save_config
from sharpo_train.io import read_jsonl

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["log.progress=false", "rollout.max_new_tokens=8",
        "rollout.max_turns=2", "method=grpo"]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run from an empty directory, to see that a failing command creates nothing."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def one_line_error(capsys, argv, *needles) -> str:
    """Run ``sharpo argv`` in-process: exit 2, one stderr line naming every needle."""
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, (argv, err)
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"sharpo {argv[0]}: error: "), err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def fake_run(run_dir: Path, *overrides) -> Path:
    """A run directory as `sharpo train` leaves it (its marker, config.yaml, a metrics line)."""
    from sharpo_train.runs.run_dir import mark_run_dir
    mark_run_dir(run_dir)
    save_config(load_config(SMOKE, [f"run_dir={run_dir}", *overrides]), run_dir / "config.yaml")
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "kind": "train"}\n')
    return run_dir


@pytest.mark.parametrize("override, key", [
    ("rollout.group_size=100000000000000000000000", "rollout.group_size"),
    ("rollout.group_size=1", "rollout.group_size"),
    ("env.foo=1", "env.foo"),
    ("model.device=foo", "model.device"),
    ("optim.beta1=2", "optim.beta1"),
    ("optim.lr=.inf", "optim.lr"),
    ("eval.num_tasks=-1", "eval.num_tasks"),
    ("eval.max_turns=0", "eval.max_turns"),
    ("loss.entropy_coef=.nan", "loss.entropy_coef"),
    ("run_dir=", "run_dir"),
    ("optimizer.lr=1", "optimizer"),
    ("novalue", "novalue"),
    ("model.path=/nonexistent/model", "model.path"),
    ("init_from=/nonexistent/sft", "init_from"),
])
def test_train_bad_setting_is_one_line_and_creates_nothing(in_tmp, capsys, override, key):
    one_line_error(capsys, ["train", override], key)
    assert list(in_tmp.iterdir()) == []


def test_train_bad_config_files(in_tmp, capsys):
    bad = in_tmp / "bad.yaml"
    bad.write_text("model: {device: cpu\nrollout: 3\n")
    one_line_error(capsys, ["train", "--config", str(bad)], "bad.yaml", "not valid YAML")
    one_line_error(capsys, ["train", "--config", str(in_tmp / "none.yaml")], "--config",
                   "none.yaml")
    (in_tmp / "child.yaml").write_text("base: missing.yaml\n")
    one_line_error(capsys, ["train", "--config", str(in_tmp / "child.yaml")], "missing.yaml")
    assert sorted(p.name for p in in_tmp.iterdir()) == ["bad.yaml", "child.yaml"]


def test_train_into_a_run_directory_that_holds_a_run(in_tmp, capsys):
    run = fake_run(in_tmp / "r")
    before = (run / "config.yaml").read_text()
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={run}"], "run_dir",
                   "already holds a run")
    assert (run / "config.yaml").read_text() == before


def test_resume_of_a_missing_or_empty_run_directory(in_tmp, capsys):
    one_line_error(capsys, ["train", "--resume", f"run_dir={in_tmp / 'nope'}"], "--resume",
                   "nope")
    one_line_error(capsys, ["train", "--resume", "--run-dir", str(in_tmp / "nope")], "nope")
    (in_tmp / "empty").mkdir()
    one_line_error(capsys, ["train", "--resume", f"run_dir={in_tmp / 'empty'}"], "holds no run")
    assert [p.name for p in in_tmp.iterdir()] == ["empty"]
    assert list((in_tmp / "empty").iterdir()) == []


@pytest.mark.parametrize("override, key", [
    ("env.name=alfworld", "env.name"), ("method=sharpo", "method"), ("seed=3", "seed"),
    ("optim.lr=0.01", "optim.lr"), ("model.hidden_size=64", "model.hidden_size"),
    ("rollout.group_size=8", "rollout.group_size"), ("total_steps=1", "total_steps"),
    ("estimator.lam=0.05", "estimator.lam"), ("loss.use_kl=true", "loss.use_kl"),
])
def test_resume_refuses_overrides_that_change_the_run(in_tmp, capsys, override, key):
    run = fake_run(in_tmp / "r", "method=grpo", "total_steps=2")
    before = (run / "config.yaml").read_text()
    one_line_error(capsys, ["train", "--resume", f"run_dir={run}", override], key,
                   "--resume cannot change")
    assert (run / "config.yaml").read_text() == before


def test_resume_with_a_config_file_must_restate_the_run(in_tmp, capsys):
    run = fake_run(in_tmp / "r", "rollout.group_size=8")
    one_line_error(capsys, ["train", "--config", SMOKE, "--resume", f"run_dir={run}"],
                   "rollout.group_size")


def test_resume_uses_the_runs_own_config(in_tmp):
    from sharpo_train.commands.train import plan
    run = fake_run(in_tmp / "r", "method=grpo", "optim.lr=0.01", "total_steps=2")
    args = build_parser().parse_args(["train", "--resume", f"run_dir={run}", "total_steps=5",
                                      "log.progress=false", "model.cpu_threads=2"])
    cfg = plan(args)
    # not the embedded default (ALFWorld, sharpo): the run's synthetic env and settings
    assert cfg.env["name"] == "synthetic" and cfg.method == "grpo" and cfg.optim.lr == 0.01
    assert cfg.total_steps == 5 and cfg.resume and cfg.log.progress is False
    assert cfg.model.cpu_threads == 2


def test_eval_of_a_missing_run(in_tmp, capsys):
    one_line_error(capsys, ["eval", "--run", str(in_tmp / "nonexistent")], "--run", "nonexistent")
    assert list(in_tmp.iterdir()) == []


def test_sft_bad_settings_and_files(in_tmp, capsys):
    demos = in_tmp / "d.jsonl"
    demos.write_text('{"messages": [{"role": "user", "content": "u"}, '
                     '{"role": "assistant", "content": "a"}]}\n')
    out = str(in_tmp / "out")
    one_line_error(capsys, ["sft", "--demos", str(demos), "--out", out, "lr=abc"], "lr")
    one_line_error(capsys, ["sft", "--demos", str(demos), "--out", out, "model.device=foo"],
                   "model.device")
    one_line_error(capsys, ["sft", "--demos", str(demos), "--out", out, "model.path=/no/x"],
                   "model.path")
    one_line_error(capsys, ["sft", "--demos", str(in_tmp / "none.jsonl"), "--out", out],
                   "--demos")
    demos.write_text("not json\n")
    one_line_error(capsys, ["sft", "--demos", str(demos), "--out", out], "d.jsonl:1")
    assert [p.name for p in in_tmp.iterdir()] == ["d.jsonl"]


def test_version_and_command_list(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"sharpo {__version__}"
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert "advantage" not in sub.choices
    assert {"demo", "train", "eval", "sft", "alfworld", "compare", "explain"} <= set(sub.choices)
    # an environment's own command comes from its EnvSpec.command, in `sharpo --help` order
    # after sft; cli.py names no environment
    assert list(sub.choices) == ["demo", "train", "eval", "sft", "alfworld", "webshop", "compare",
                                 "explain", "probe-teacher", "settings"]
    import ast
    from sharpo_train.envs import env_names
    tree = ast.parse((ROOT / "sharpo_train" / "cli.py").read_text())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, str)} - {ast.get_docstring(tree, clean=False)}
    assert not strings & set(env_names())


def test_real_command_exits_2_on_a_huge_group_size(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "sharpo_train", "train",
         "rollout.group_size=100000000000000000000000"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "rollout.group_size" in proc.stderr
    assert "Traceback" not in proc.stderr and list(tmp_path.iterdir()) == []


def test_resume_loads_the_run_config_and_a_finished_run_adds_no_eval(in_tmp, capsys):
    """The same errors on a real (tiny, synthetic) run."""
    run = in_tmp / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run}", "total_steps=1", *FAST]) == 0
    # no --config: the run's own synthetic config, not the embedded ALFWorld default
    assert main(["train", "--resume", f"run_dir={run}", "total_steps=2",
                 "checkpoint.keep=3"]) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["env"]["name"] == "synthetic" and saved["total_steps"] == 2
    assert saved["method"] == "grpo" and saved["checkpoint"]["keep"] == 3
    kinds = [(r["step"], r["kind"]) for r in read_jsonl(run / "metrics.jsonl")]
    assert kinds == [(1, "train"), (1, "eval"), (2, "train"), (2, "eval")]
    # the finished run resumed again: nothing trained, no second final eval line
    assert main(["train", "--resume", f"run_dir={run}"]) == 0
    assert [(r["step"], r["kind"]) for r in read_jsonl(run / "metrics.jsonl")] == kinds
    before = (run / "config.yaml").read_text()
    capsys.readouterr()
    one_line_error(capsys, ["train", "--resume", f"run_dir={run}", "method=sharpo"], "method")
    assert (run / "config.yaml").read_text() == before


def test_python_api_resume_never_rewrites_the_run_config(in_tmp):
    from sharpo_train.errors import ConfigError
    from sharpo_train.loops.trainer import train
    run = fake_run(in_tmp / "r", "method=grpo")
    before = (run / "config.yaml").read_text()
    changed = load_config(SMOKE, [f"run_dir={run}", "method=sharpo", "resume=true"])
    with pytest.raises(ConfigError, match="^method: --resume cannot change"):
        train(changed)
    assert (run / "config.yaml").read_text() == before


def test_train_accepts_scientific_notation_on_the_command_line(in_tmp):
    from sharpo_train.commands.train import plan
    cfg = plan(build_parser().parse_args(["train", "--config", SMOKE, "optim.lr=1e-3",
                                          "estimator.lam=.05"]))
    assert cfg.optim.lr == 1e-3 and cfg.estimator.lam == 0.05


def test_train_on_a_missing_gpu(in_tmp, capsys, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    one_line_error(capsys, ["train", "--config", SMOKE, "model.device=cuda:0"], "model.device",
                   "CUDA is not available")
    assert list(in_tmp.iterdir()) == []


def test_train_on_missing_games(in_tmp, capsys):
    games = in_tmp / "no_games"
    one_line_error(capsys, ["train", "env.generate=null", f"env.games_dir={games}"],
                   "env.games_dir", str(games))
    assert list(in_tmp.iterdir()) == []


@pytest.mark.parametrize("argv", [["sft"], ["nosuchcommand"], ["train", "--bogus"], []])
def test_argument_errors_are_one_line(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "error:" in err, err
