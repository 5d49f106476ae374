"""The output rule (docs/run_directory.md, "Outputs of every command"): a command never
deletes or replaces a file it did not make, checked before any work, --force included."""
import json
import os
import shutil
from pathlib import Path

import pytest

from sharpo_train.cli import main
from sharpo_train.errors import UsageError

from train.commands.test_cli_errors import one_line_error
from train.runs.decoy_support import snapshot
from train.sft_support import SFT_FAST, demos

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["total_steps=1", "log.progress=false", "method=grpo",
        "rollout.max_new_tokens=8", "rollout.max_turns=2", "eval.at_end=false",
        "checkpoint.every=1", "log.credit_every=1"]


def test_sft_force_never_replaces_the_folders_own_files(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"mine": true}')
    (out / "notes.txt").write_text("keep")
    before = snapshot(out)
    for force in ([], ["--force"]):
        one_line_error(capsys, ["sft", "--demos", demos(tmp_path), "--out", str(out), *force,
                                *SFT_FAST], "--out")
    err = one_line_error(capsys, ["sft", "--demos", demos(tmp_path), "--out", str(out),
                                  "--force", *SFT_FAST], "config.json", "did not make")
    assert "sft step" not in capsys.readouterr().out     # refused before training
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demos.jsonl", "mine"]
    (out / "config.json").unlink()             # without the clash --force writes beside
    assert main(["sft", "--demos", demos(tmp_path), "--out", str(out), "--force", *SFT_FAST]) == 0
    assert (out / "notes.txt").read_text() == "keep" and (out / "model.safetensors").is_file()
    # and the output is now its own: a second run replaces the files its marker lists
    assert main(["sft", "--demos", demos(tmp_path), "--out", str(out), *SFT_FAST]) == 0
    assert err


def test_sft_force_with_a_folder_where_a_weight_file_goes_is_refused_before_training(
        tmp_path, capsys):
    out = tmp_path / "o"
    (out / "model.safetensors").mkdir(parents=True)
    (out / "model.safetensors" / "x").write_text("mine")
    one_line_error(capsys, ["sft", "--demos", demos(tmp_path), "--out", str(out), "--force",
                            *SFT_FAST], "model.safetensors", "a folder")
    assert "sft step" not in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demos.jsonl", "o"]   # no .o.*.tmp
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]


def test_install_refuses_a_clash_that_appeared_during_training_and_cleans_up(tmp_path):
    from sharpo_train.outputs import install_dir, new_build_dir
    out = tmp_path / "o"
    out.mkdir()
    build = new_build_dir(out)
    (build / "config.json").write_text("{}")
    (out / "config.json").write_text("mine")      # appeared after the first check
    with pytest.raises(UsageError, match="did not make"):
        install_dir(build, out, "sharpo sft")
    assert (out / "config.json").read_text() == "mine" and not build.exists()


@pytest.mark.parametrize("target", ["config.yaml", "checkpoints/latest", "eval.json",
                                    ".sharpo-run", "metrics.jsonl"])
def test_eval_out_force_never_replaces_a_file_of_the_run(done_run, tmp_path, capsys, target):
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    if target == "eval.json":
        (run / "eval.json").write_text('{"success": 0.5, "episodes": 2}\n')
    before = snapshot(run)
    one_line_error(capsys, ["eval", "--run-dir", str(run), "--out", str(run / target),
                            "--force"], "--out", target.split("/")[-1])
    assert snapshot(run) == before
    assert main(["train", "--resume", f"run_dir={run}", "total_steps=1"]) == 0


def test_eval_out_force_replaces_an_earlier_eval_result_only(done_run, tmp_path, capsys):
    mine = tmp_path / "notes.json"
    mine.write_text('{"my": "data"}\n')
    one_line_error(capsys, ["eval", "--run-dir", str(done_run), "--out", str(mine), "--force"],
                   "not a sharpo eval result", "even with --force")
    assert mine.read_text() == '{"my": "data"}\n'
    out = tmp_path / "r.json"
    assert main(["eval", "--run-dir", str(done_run), "--out", str(out)]) == 0
    first = out.read_text()
    assert main(["eval", "--run-dir", str(done_run), "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text()).keys() == json.loads(first).keys()


def test_explain_out_a_folder_is_refused_not_written_beside_it(tmp_path, capsys, done_run):
    one_line_error(capsys, ["explain", "--run-dir", str(done_run), "--out", "/tmp"],
                   "--out", "is a folder", "file stem")
    assert not Path("/tmp.html").exists() and not Path("/tmp.png").exists()
    one_line_error(capsys, ["explain", "--run-dir", str(done_run), "--out", "/x-sharpo"],
                   "--out", "directly in /")
    assert not Path("/x-sharpo.html").exists()


def test_explain_force_replaces_its_own_page_and_plot_only(done_run, tmp_path, capsys):
    stem = tmp_path / "page"
    assert main(["explain", "--run-dir", str(done_run), "--out", str(stem)]) == 0
    assert main(["explain", "--run-dir", str(done_run), "--out", str(stem), "--force"]) == 0
    (tmp_path / "other.html").write_text("<html>mine</html>")
    one_line_error(capsys, ["explain", "--run-dir", str(done_run), "--out",
                            str(tmp_path / "other"), "--force"], "not a sharpo credit page")
    assert (tmp_path / "other.html").read_text() == "<html>mine</html>"


def test_outputs_inside_a_runs_own_folders_are_refused(done_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    before = snapshot(run)
    for inside in ("checkpoints/step_000001/x.json", "credit/x.json"):
        one_line_error(capsys, ["eval", "--run-dir", str(run), "--out", str(run / inside)],
                       "--out", "own files")
    assert snapshot(run) == before


def test_play_and_demos_force_never_replace_a_foreign_file(tmp_path, capsys):
    mine = tmp_path / "mine.txt"
    mine.write_text("notes\n")
    one_line_error(capsys, ["webshop", "demos", "--out", str(mine), "--force", "--data",
                            str(tmp_path / "nodata")], "--out", "not a demonstrations file")
    one_line_error(capsys, ["webshop", "play", "--agent", "expert", "--json", str(mine),
                            "--force"], "--json", "not a sharpo play result")
    assert mine.read_text() == "notes\n"


def test_a_fifo_as_an_output_is_named_as_such(tmp_path, capsys, done_run):
    """Probe round: the message said "not a regular file, not a regular file"."""
    os.mkfifo(tmp_path / "p.json")
    err = one_line_error(capsys, ["eval", "--run-dir", str(done_run), "--out",
                                  str(tmp_path / "p.json"), "--force"], "a fifo (named pipe)")
    assert err.count("not a regular file") == 1
