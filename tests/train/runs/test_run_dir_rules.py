"""Which folders may be a run directory (sharpo_train/runs/run_dir.py,
docs/run_directory.md "Which folders may be a run"): system folders and the home directory
are refused; an existing non-empty folder that is not a sharpo run is refused instead of
having its config.yaml / eval.json overwritten; new and empty folders and real runs (with
the .sharpo-run marker) keep working. One line, exit 2, nothing
written."""
import json
from pathlib import Path

import pytest

from sharpo_train.cli import main
from sharpo_train.loops.train_config import load_config, save_config
from sharpo_train.errors import UsageError
from sharpo_train.outputs import system_folder
from sharpo_train.runs.run_dir import RUN_MARKER, check_run_dir, is_sharpo_run
from sharpo_train.loops.trainer import Trainer, train

from train.commands.test_cli_errors import one_line_error
from train.loops.test_trainer_support import small_config

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["total_steps=1", "log.progress=false", "rollout.max_new_tokens=8",
        "rollout.max_turns=2", "method=grpo", "eval.at_end=false", "checkpoint.every=1"]


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("path, needle", [
    ("/", "system folder /"), ("/etc", "system folder /etc"),
    ("/etc/sharpo-run", "inside the system folder /etc"), ("/usr/local/runs/x", "/usr"),
    ("/proc/self", "/proc"), ("/tmp", "system folder /tmp"), ("/home", "/home"),
])
def test_system_folders_are_refused(path, needle, capsys):
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={path}"], "run_dir", needle)
    with pytest.raises(UsageError, match="run_dir"):
        Trainer(small_config(path))


def test_the_home_directory_and_a_link_to_root_are_refused(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert "home directory" in system_folder("~")
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={home}"], "home directory")
    (tmp_path / "root").symlink_to("/")
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'root'}"],
           "system folder /")
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path}/../../../../../.."],
           "system folder /")
    # through a folder that does not exist: refused before (tests/train/test_inputs_round5.py)
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path}/a/../../../../../.."],
           "not an existing folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "root"]
    assert list(home.iterdir()) == []
    assert system_folder(tmp_path / "runs" / "x") is None


def foreign_folder(tmp_path) -> Path:
    """Somebody else's project: a config.yaml, an eval.json, a metrics.jsonl."""
    other = tmp_path / "project"
    other.mkdir()
    (other / "config.yaml").write_text("learning_rate: 3\nlayers: [1, 2]\n")
    (other / "eval.json").write_text('{"accuracy": 0.93}\n')
    (other / "metrics.jsonl").write_text("")
    (other / "notes.txt").write_text("mine\n")
    return other


def test_a_foreign_folder_is_refused_and_left_untouched(tmp_path, capsys):
    other = foreign_folder(tmp_path)
    before = snapshot(other)
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={other}", *FAST],
           "run_dir", "not a sharpo run")
    one_line_error(capsys, ["train", "--config", SMOKE, "--resume", f"run_dir={other}"],
           "not a sharpo run")
    with pytest.raises(UsageError, match="not a sharpo run"):
        Trainer(small_config(other, total_steps=1))
    assert snapshot(other) == before                 # no .lock, no marker, nothing rewritten


def test_a_file_named_as_run_dir_is_refused(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={f}"], "not a directory")
    assert f.read_text() == "x"


def test_new_and_empty_folders_work_and_get_the_marker_first(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    for run in (tmp_path / "new" / "run", empty):
        assert main(["train", "--config", SMOKE, f"run_dir={run}", *FAST]) == 0, \
            capsys.readouterr().err
        assert json.loads((run / RUN_MARKER).read_text()) == {"format": "sharpo-run/1",
                                                               "command": "sharpo train"}
        assert is_sharpo_run(run) and (run / "checkpoints" / "latest").is_file()
    # a marked run: a fresh start is refused (it holds a run), --resume continues it
    capsys.readouterr()
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={empty}", *FAST], "already holds a run")
    assert main(["train", "--resume", f"run_dir={empty}", "total_steps=2"]) == 0
    assert (empty / "checkpoints" / "latest").read_text().strip() == "step_000002"


def test_a_folder_holding_only_a_lock_counts_as_empty(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").write_text("")
    check_run_dir(run)
    (run / "x").write_text("")
    with pytest.raises(UsageError, match="not a sharpo run"):
        check_run_dir(run)


def test_only_the_marker_makes_a_run(tmp_path):
    """A run is recognised by its .sharpo-run marker alone: a folder holding a sharpo
    config.yaml beside metrics.jsonl and .lock but no marker is not a run (no earlier format
    is guessed from its files)."""
    run = tmp_path / "run"
    cfg = small_config(run, total_steps=1, eval__at_end=False)
    train(cfg)
    assert is_sharpo_run(run)
    (run / RUN_MARKER).unlink()
    assert (run / "config.yaml").is_file() and (run / "metrics.jsonl").is_file()
    assert not is_sharpo_run(run)
    with pytest.raises(UsageError, match="not a sharpo run"):
        check_run_dir(run)
    alone = tmp_path / "alone"
    alone.mkdir()
    save_config(load_config(SMOKE), alone / "config.yaml")
    assert not is_sharpo_run(alone)


def test_demo_and_compare_refuse_system_and_foreign_folders(tmp_path, capsys):
    other = foreign_folder(tmp_path)
    before = snapshot(other)
    for cmd in ("demo", "compare"):
        one_line_error(capsys, [cmd, "--out", "/", "--quick"], "system folder /")
        one_line_error(capsys, [cmd, "--out", str(other), "--quick"], "not a sharpo demo/compare")
    assert snapshot(other) == before
