"""The LOW input items of issue 47, each a test that failed on main: a ``base:`` that is a
folder, a float closer to 0 than a float can be (lr=1e-400 said "got 0.0"), invisible
characters in a path, and a checkpoint file that may not be read (EACCES was "No such
file or directory", as safetensors' loader says)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sharpo_train.errors import ConfigError
from sharpo_train.inputs import check_path, file_problem
from sharpo_train.loops.train_config import load_config
from sharpo_train.settings.bounded_yaml import load_yaml_text

from train.commands.test_cli_errors import one_line_error
from train.commands.test_cli_input_errors import SMOKE

ROOT = Path(__file__).resolve().parents[3]


def test_a_base_that_is_a_folder_is_named_as_a_folder(tmp_path, capsys):
    (tmp_path / "parent").mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("base: parent\n")
    err = one_line_error(capsys, ["train", "--config", str(cfg), f"run_dir={tmp_path / 'r'}"],
                         "base:", "is a folder, not a regular file")
    assert "no such" not in err and not (tmp_path / "r").exists()


@pytest.mark.parametrize("text", ["1e-400", "-2.5e-999", "0.000001e-330"])
def test_a_float_that_underflows_is_named_not_read_as_zero(text):
    with pytest.raises(ConfigError, match=r"optim\.lr: .* closer to 0 than the smallest float"):
        load_config(None, [f"optim.lr={text}"])
    with pytest.raises(ConfigError, match=r"c\.yaml: refused: .* closer to 0 .*line 2"):
        load_yaml_text(f"a: 1\nlr: {text if '.' in text else text.replace('e', '.0e')}\n",
                       "c.yaml")
    assert load_config(None, ["optim.lr=1e-300"]).optim.lr == 1e-300
    assert load_yaml_text("x: 0.0e-400", "c.yaml") == {"x": 0.0}      # a real zero


@pytest.mark.parametrize("ch", ["\u202e", "\u200b", "\u200d", "\u2066", "\ufeff", "\u2028"])
def test_invisible_characters_in_a_path_are_refused(tmp_path, capsys, ch):
    with pytest.raises(ConfigError, match=f"U\\+{ord(ch):04X}"):
        check_path("run_dir", f"runs/a{ch}b")
    run = tmp_path / f"a{ch}txt.exe"
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={run}"], "run_dir",
                   "invisible character")
    assert not run.exists()
    assert check_path("run_dir", "runs/café-ü") == "runs/café-ü"       # letters are fine


def test_file_problem_says_what_a_path_is(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    os.mkfifo(tmp_path / "p")
    assert file_problem(f) is None
    assert file_problem(tmp_path / "nope") == "missing"
    assert file_problem(tmp_path) == "a folder, not a regular file"
    assert file_problem(tmp_path / "p") == "a fifo (named pipe), not a regular file"


def _as_if_not_root():
    """The command prefix that makes file permissions apply (root reads everything:
    drop the two capabilities that let it), or [] for another user."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root without setpriv: permissions cannot be made to apply")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}"]


@pytest.mark.parametrize("name", ["policy/model.safetensors", "optimizer.safetensors"])
def test_a_checkpoint_file_that_may_not_be_read_is_said_so(done_run, tmp_path, name):
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    (run / "checkpoints" / "step_000001" / name).chmod(0)
    proc = subprocess.run([*_as_if_not_root(), sys.executable, "-m", "sharpo_train", "eval",
                           "--run-dir", str(run), "--out", str(tmp_path / "e.json")],
                          capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{name}: Permission denied" in proc.stderr and "No such file" not in proc.stderr
    assert not (tmp_path / "e.json").exists()
