"""Every path and string a user types goes through one validator (sharpo_train/inputs.py),
at the edge, before anything is created: control characters, undecodable bytes, empty and
too-long names, and files to read that are folders, fifos or devices
(docs/run_directory.md, "Settings text")."""
import os
from pathlib import Path

import pytest

from sharpo_train.errors import ConfigError

from train.commands.test_cli_errors import one_line_error

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["total_steps=1", "log.progress=false", "method=grpo",
        "rollout.max_new_tokens=8", "rollout.max_turns=2", "eval.at_end=false"]


def non_utf8(folder: Path, name: bytes) -> str:
    return os.fsdecode(os.fsencode(str(folder)) + b"/" + name)


@pytest.mark.parametrize("name", ["r\x01x", "r\x1b[31mx", "r\nx", "r\tx", "r\x7fx", "r\x9bx"])
def test_control_characters_in_a_run_dir_are_refused_and_create_nothing(tmp_path, capsys, name):
    for argv in (["train", "--config", SMOKE, "--run-dir", str(tmp_path / name), *FAST],
                 ["train", "--config", SMOKE, f"run_dir={tmp_path / name}", *FAST],
                 ["compare", "--run-dir", str(tmp_path / name), "--quick"],
                 ["demo", f"run_dir={tmp_path / name}", "--quick"]):
        err = one_line_error(capsys, argv, "run_dir", "control character")
        assert "\x1b" not in err            # the raw escape never reaches the terminal
    assert os.listdir(tmp_path) == []


def test_a_yaml_run_dir_with_a_control_character_is_refused(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f'base: {SMOKE}\nrun_dir: "{tmp_path}/yb\\x01b"\n')
    one_line_error(capsys, ["train", "--config", str(cfg), *FAST], "run_dir", "control character")
    assert sorted(os.listdir(tmp_path)) == ["c.yaml"]


@pytest.mark.parametrize("command", ["compare", "demo"])
def test_a_pipeline_dir_that_is_not_utf8_creates_nothing(tmp_path, capsys, command):
    one_line_error(capsys, [command, "--run-dir", non_utf8(tmp_path, b"c\xff"), "--quick"],
                   "run_dir", "not valid UTF-8")
    one_line_error(capsys, [command, f"run_dir={non_utf8(tmp_path, b'd')}\udcff", "--quick"],
                   "run_dir", "UTF-8")
    assert os.listdir(tmp_path) == []


def test_output_names_of_every_command_are_checked(tmp_path, capsys):
    bad = [str(tmp_path / "o\x01.json"), non_utf8(tmp_path, b"o\xfe.json"), ""]
    for out in bad:
        one_line_error(capsys, ["sft", "--demos", str(tmp_path / "d.jsonl"), "--out", out], "--out")
        one_line_error(capsys, ["eval", "--model", str(tmp_path), "--out", out], "--out")
        one_line_error(capsys, ["explain", "--run-dir", str(tmp_path), "--out", out], "--out")
        one_line_error(capsys, ["probe-teacher", "--model", str(tmp_path), "--env", "corridor",
                                "--json", out], "--json")
    assert os.listdir(tmp_path) == []


def test_sft_out_empty_is_refused_and_writes_nothing_here(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.jsonl").write_text('{"messages": [{"role": "user", "content": "a"}, '
                                      '{"role": "assistant", "content": "b"}]}\n')
    one_line_error(capsys, ["sft", "--demos", "d.jsonl", "--out", "", "max_steps=1"],
                   "--out", "empty path")
    assert os.listdir(tmp_path) == ["d.jsonl"]


def test_a_name_too_long_for_the_file_system_is_one_line(tmp_path, capsys):
    long = str(tmp_path / ("x" * 300))
    one_line_error(capsys, ["train", "--config", SMOKE, "--run-dir", long, *FAST],
                   "run_dir", "300 bytes", "255")
    one_line_error(capsys, ["eval", "--model", str(tmp_path), "--out", long + ".json"],
                   "--out", "255")
    deep = str(tmp_path) + "/a" * 2100
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={deep}", *FAST],
                   "run_dir", "4095")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
def test_a_demos_or_config_that_is_no_regular_file_is_named_as_such(tmp_path, capsys, kind):
    path = tmp_path / "input"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/null")
    what = {"folder": "a folder", "fifo": "a fifo", "device": "a character device"}[kind]
    err = one_line_error(capsys, ["sft", "--demos", str(path), "--out", str(tmp_path / "o"),
                                  "max_steps=1"], "--demos", what)
    assert "no such file" not in err
    err = one_line_error(capsys, ["train", "--config", str(path),
                                  f"run_dir={tmp_path / 'r'}"], what)
    assert "no such file" not in err
    assert not (tmp_path / "o").exists() and not (tmp_path / "r").exists()


def test_the_validator_itself():
    from sharpo_train.inputs import check_input_file, check_path, check_text
    for good in ("runs/a b", "ünï/cödé", "/tmp/x.json", "a" * 255):
        assert check_path("k", good) == good
    for bad, needle in (("", "empty"), ("  ", "empty"), ("a\x00b", "NUL"), ("a\nb", "control"),
                        ("a\udcffb", "UTF-8"), ("a" * 256, "255"), ("a\x85b", "control")):
        with pytest.raises(ConfigError, match=needle):
            check_path("k", bad)
    check_text("k", "multi\nline\ttext")            # a template may hold newlines and tabs
    for bad in ("a\x1bb", "a\x07", {"x": ["ok", "b\x01"]}):
        with pytest.raises(ConfigError, match="control character"):
            check_text("k", bad)
    with pytest.raises(FileNotFoundError, match="k: no such file"):
        check_input_file("k", "/nonexistent/file.yaml")


def test_a_leading_tilde_is_refused_not_made_into_a_folder(tmp_path, capsys, monkeypatch):
    """Probe round: run_dir=~/x (quoted, so the shell did not expand it) was checked as the
    home directory's x but created ./~/x."""
    monkeypatch.chdir(tmp_path)
    for argv in (["train", "--config", SMOKE, "run_dir=~/sharpo-x", *FAST],
                 ["train", "--config", SMOKE, "--run-dir", "~", *FAST],
                 ["eval", "--model", str(tmp_path), "--out", "~/r.json"]):
        one_line_error(capsys, argv, "starts with '~'")
    assert os.listdir(tmp_path) == []


def test_a_file_where_a_model_folder_is_needed_is_said_so(tmp_path, capsys):
    f = tmp_path / "tok"
    f.write_text("x")
    err = one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'r'}",
                                  f"model.tokenizer_path={f}", *FAST],
                         "model.tokenizer_path", "is not a directory")
    assert "no such" not in err


@pytest.mark.parametrize("option, value", [("--seeds", "0,,1"), ("--seeds", "0,1,"),
                                           ("--methods", "grpo,"), ("--methods", "grpo,,sharpo")])
def test_an_empty_item_in_a_comma_list_is_refused(capsys, option, value):
    one_line_error(capsys, ["compare", option, value, "--print-config"], option, "empty item")


def test_an_edited_run_config_is_named_on_resume(tmp_path, capsys):
    """Probe round: a control character written into RUN/config.yaml named the key only."""
    from sharpo_train.loops.train_config import load_config, save_config
    run = tmp_path / "run"
    run.mkdir()
    save_config(load_config(SMOKE, [f"run_dir={run}"]), run / "config.yaml")
    (run / ".sharpo-run").write_text('{"format": "sharpo-run/1", "command": "sharpo train"}\n')
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text.replace("method: sharpo", 'method: "sharpo\\x01"'))
    one_line_error(capsys, ["train", "--resume", f"run_dir={run}"], "config.yaml",
                   "control character")
