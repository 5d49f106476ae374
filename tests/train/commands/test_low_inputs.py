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


def test_an_extra_tensor_in_the_weights_is_refused(done_run, tmp_path, capsys):
    """A tensor the model has no place for was dropped silently (issue 47, LOW)."""
    import torch
    from safetensors.torch import load_file, save_file
    model = tmp_path / "model"
    shutil.copytree(done_run / "checkpoints" / "step_000001" / "policy", model)
    tensors = load_file(str(model / "model.safetensors"))
    tensors["extra.weight"] = torch.zeros(3)
    save_file(tensors, str(model / "model.safetensors"), metadata={"format": "pt"})
    one_line_error(capsys, ["eval", "--model", str(model), "--config", SMOKE,
                            "--out", str(tmp_path / "e.json")],
                   "extra.weight: in the files, not in this model")
    assert not (tmp_path / "e.json").exists()


def test_alfworld_generate_bounds_its_count(tmp_path, capsys):
    from sharpo_train.cli import main
    out = tmp_path / "g"
    with pytest.raises(SystemExit) as e:
        main(["alfworld", "generate", "--out", str(out), "--n", "99999999999"])
    assert e.value.code == 2 and not out.exists()
    assert "--n: expected an int in [1, 100,000], got 99999999999" in capsys.readouterr().err


def test_int_settings_show_their_real_upper_bound(capsys):
    """demo.seed said [0, inf] while values over 2**31-1 are refused (issue 47, LOW)."""
    from sharpo_train.cli import main
    assert main(["settings", "--command", "demo", "demo.seed"]) == 0
    assert "demo.seed (int, default 0, [0, 2147483647])" in capsys.readouterr().out
    assert main(["settings", "env."]) == 0
    text = capsys.readouterr().out
    assert "inf]" not in text and "env.num_train_games (int | null" in text
