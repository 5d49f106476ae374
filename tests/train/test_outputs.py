"""Every output a command writes outside a run (docs/run_directory.md, "Outputs of every
command"): `sharpo sft --out` never deletes what it did not write, output files need
--force to be replaced, two evaluations of one run always leave two files. A decoy folder outside must stay byte-identical."""
import json
import os

import pytest

from sharpo_train.cli import main
from sharpo_train.errors import UsageError
from sharpo_train.outputs import SFT_MARKER, check_out_dir, check_out_file, create_exclusive

from train.runs.decoy_support import decoy, snapshot  # noqa: F401  (fixture)
from train.commands.test_cli_errors import one_line_error
from train.sft_support import SFT_FAST, demos



def test_sft_refuses_a_foreign_folder_and_keeps_its_files(tmp_path, capsys, decoy):
    out = decoy.root
    one_line_error(capsys, ["sft", "--demos", demos(tmp_path), "--out", str(out), *SFT_FAST],
                   "not a sharpo sft output")
    decoy.check()
    # --force writes the checkpoint's files into it and deletes nothing of the folder's own
    assert main(["sft", "--demos", demos(tmp_path), "--out", str(out), "--force",
                 *SFT_FAST]) == 0
    after = snapshot(out)
    for name, content in decoy.before.items():
        assert after[name] == content
    assert (out / "model.safetensors").is_file() and (out / SFT_MARKER).is_file()
    decoy.before = snapshot(out)          # what the fixture checks at the end


def test_sft_replaces_its_own_output_and_leaves_no_temp(tmp_path, capsys):
    out = tmp_path / "sft"
    for _ in range(2):
        assert main(["sft", "--demos", demos(tmp_path), "--out", str(out), *SFT_FAST]) == 0
    marker = json.loads((out / SFT_MARKER).read_text())
    assert marker["format"] == "sharpo-sft/1" and marker["command"] == "sharpo sft"
    assert "model.safetensors" in marker["files"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demos.jsonl", "sft"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["sft", "--demos", demos(tmp_path), "--out", str(empty), *SFT_FAST]) == 0
    assert (empty / "config.json").is_file()


def test_sft_refuses_a_link_home_and_system_folders_before_training(tmp_path, capsys, decoy,
                                                                    monkeypatch):
    link = tmp_path / "link"
    link.symlink_to(decoy.root, target_is_directory=True)
    for out, needle in ((link, "symbolic link"), ("/", "system folder /"),
                        ("/usr/lib/x", "/usr"), (os.path.expanduser("~"), "home directory")):
        for force in ([], ["--force"]):
            one_line_error(capsys, ["sft", "--demos", demos(tmp_path), "--out", str(out),
                                    *force, *SFT_FAST], needle)
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(capsys, ["sft", "--demos", demos(tmp_path), "--out", str(f), *SFT_FAST],
                   "not a directory")
    assert f.read_text() == "x"


def test_a_junk_sft_marker_does_not_make_an_sft_output(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / SFT_MARKER).write_text("junk")
    with pytest.raises(UsageError, match="not a sharpo sft output"):
        check_out_dir(out, "--out")


def test_output_files_need_force_and_never_follow_a_link(tmp_path, decoy):
    existing = tmp_path / "r.json"
    existing.write_text("old")
    with pytest.raises(FileExistsError, match="--json: .* exists .*--force"):
        check_out_file(existing, "--json")
    check_out_file(existing, "--json", force=True)
    link = tmp_path / "l.json"
    link.symlink_to(decoy.root / "notes.txt")
    for force in (False, True):
        with pytest.raises(UsageError, match="symbolic link"):
            check_out_file(link, "--json", force)
    with pytest.raises(UsageError, match="not a regular file"):
        check_out_file(decoy.root / "data", "--json", True)
    with pytest.raises(UsageError, match="/etc"):
        check_out_file("/etc/sharpo.json", "--json", True)


def test_exclusive_creation_never_reuses_a_name(tmp_path):
    paths = [create_exclusive(tmp_path, "eval-x", ".json", str(k).encode()) for k in range(3)]
    assert [p.name for p in paths] == ["eval-x.json", "eval-x-1.json", "eval-x-2.json"]
    assert [p.read_text() for p in paths] == ["0", "1", "2"]


def test_two_evaluations_in_the_same_second_leave_two_files(tmp_path, monkeypatch, capsys):
    """The second `sharpo eval --run-dir` plans its file name while the first evaluates."""
    import sharpo_train.commands.eval as eval_cmd
    import sharpo_train.loops.evaluate as evaluate
    from train.recipes.test_pipeline import _fake_run

    run = _fake_run(tmp_path / "run")
    monkeypatch.setattr(eval_cmd.time, "strftime", lambda fmt: "eval-20260101-000000")
    calls = []

    def fake_eval(weights, cfg, label=None):
        calls.append(len(calls) + 1)
        n = calls[-1]
        if n == 1:                # the other evaluation starts and ends meanwhile
            assert main(["eval", "--run-dir", str(run)]) == 0
        return {"success": float(n), "call": n}

    monkeypatch.setattr(evaluate, "evaluate_checkpoint", fake_eval)
    assert main(["eval", "--run-dir", str(run)]) == 0
    files = sorted(run.glob("eval-*.json"))
    assert [f.name for f in files] == ["eval-20260101-000000-1.json", "eval-20260101-000000.json"]
    assert sorted(json.loads(f.read_text())["call"] for f in files) == [1, 2]
    assert json.loads((run / "eval.json").read_text()) == {}


def test_explain_and_generate_outputs_follow_the_rule(tmp_path, capsys, decoy):
    """Probe round: `explain --out` wrote into /etc and over existing files, `alfworld
    generate --out` into /etc and into any folder; `sft --out` below a file trained first."""
    one_line_error(capsys, ["explain", "--run-dir", str(tmp_path / "none"), "--out",
                            "/etc/sharpo-credit"], "--out", "/etc")
    (tmp_path / "page.html").write_text("mine")
    one_line_error(capsys, ["explain", "--run-dir", str(tmp_path), "--out",
                            str(tmp_path / "page")], "--out", "exists", "--force")
    assert (tmp_path / "page.html").read_text() == "mine"
    one_line_error(capsys, ["alfworld", "generate", "--out", "/etc/sharpo-games", "--n", "1"],
                   "--out", "/etc")
    one_line_error(capsys, ["alfworld", "generate", "--out", str(decoy.root), "--n", "1"],
                   "--out", "not an ALFWorld games folder")
    f = tmp_path / "afile"
    f.write_text("x")
    one_line_error(capsys, ["sft", "--demos", demos(tmp_path), "--out", str(f / "sub"),
                            *SFT_FAST], f"{f} is a file, not a folder")
