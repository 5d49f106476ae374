"""Nothing outside the run directory is written (docs/run_directory.md, "Nothing outside the
run is written"): a `.lock`, `credit/`, `checkpoints/`, `step_N` or `metrics.jsonl` that is
a link is refused with one line (exit 2) before anything is written, never written
through; checkpoint rotation keeps the newest by step number."""
import os
import shutil

import pytest

from sharpo_train.runs.checkpoint import latest_checkpoint, save_checkpoint
from sharpo_train.cli import main
from sharpo_train.runs.credit_record import write_credit
from sharpo_train.errors import UsageError
from sharpo_train.io import append_jsonl
from sharpo_train.runs.run_files import RunDirLinkError, run_subdir
from sharpo_train.runs.run_lock import RunLock, RunLockFileError
from sharpo_train.loops.trainer import Trainer

from train.runs.test_run_dir import _optimizer_objects
from train.loops.test_trainer_support import small_config

TRAIN = ["train", "env.name=synthetic", "total_steps=1", "log.progress=false",
         "rollout.max_new_tokens=8", "rollout.max_turns=2",
         "method=grpo", "model.hidden_size=32", "model.intermediate_size=64",
         "model.num_layers=1", "model.device=cpu"]


@pytest.fixture
def victim(tmp_path):
    """A file outside the run that must keep its bytes."""
    path = tmp_path / "precious.txt"
    path.write_text("keep me\n")
    return path


def _one_line_exit_2(capsys, argv, *needles):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


# ------------------------------------------------------------------ .lock
@pytest.mark.parametrize("resume", [False, True])
def test_a_symlinked_lock_is_refused_and_its_target_never_truncated(tmp_path, victim, capsys,
                                                                     resume):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(victim)
    argv = TRAIN + [f"run_dir={run}"] + (["--resume"] if resume else [])
    if resume:      # a real run to resume: config.yaml + a metrics line
        (run / ".lock").unlink()
        assert main(TRAIN + [f"run_dir={run}"]) == 0
        capsys.readouterr()
        (run / ".lock").unlink()
        (run / ".lock").symlink_to(victim)
        argv = ["train", "--resume", f"run_dir={run}", "total_steps=2"]
    before = sorted(p.name for p in run.iterdir())
    _one_line_exit_2(capsys, argv, ".lock", "symbolic link")
    assert victim.read_text() == "keep me\n"
    assert sorted(p.name for p in run.iterdir()) == before        # nothing written


def test_the_lock_itself_refuses_links_hard_links_and_fifos(tmp_path, victim):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(victim)
    with pytest.raises(RunLockFileError, match="symbolic link"):
        RunLock(run).acquire()
    (run / ".lock").unlink()
    os.link(victim, run / ".lock")                                # a hard link: same inode
    with pytest.raises(RunLockFileError, match="hard link"):
        RunLock(run).acquire()
    (run / ".lock").unlink()
    os.mkfifo(run / ".lock")
    with pytest.raises(RunLockFileError, match="not a regular file"):
        RunLock(run).acquire()
    assert victim.read_text() == "keep me\n"
    (run / ".lock").unlink()
    with RunLock(run):                                            # a plain file: fine
        assert (run / ".lock").read_text().strip() == str(os.getpid())


# ------------------------------------------------------------------ folders and files
@pytest.mark.parametrize("entry", ["credit", "checkpoints", "tensorboard", "batches", "lora_base",
                                   ".sharpo-run", "metrics.jsonl", "checkpoints/step_000001"])
def test_a_run_entry_that_is_a_link_is_refused_before_anything_is_written(tmp_path, capsys,
                                                                           entry):
    run = tmp_path / "run"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file").write_text("")           # empty: not "a run already" either
    (run / entry).parent.mkdir(parents=True, exist_ok=True)
    if entry != ".sharpo-run":      # a run folder (run_dir.py), so the link is what is refused
        (run / ".sharpo-run").write_text('{"format": "sharpo-run/1"}\n')
    (run / entry).symlink_to(outside if "." not in entry else outside / "file")
    before = sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    _one_line_exit_2(capsys, TRAIN + [f"run_dir={run}", "log.credit_every=1"],
                     entry, "symbolic link")
    assert [p.name for p in outside.iterdir()] == ["file"]
    assert (outside / "file").read_text() == ""
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == before


def test_writers_refuse_a_link_planted_during_a_run(tmp_path, victim):
    """The guard is in the writers too, not only at start-up."""
    run = tmp_path / "run"
    outside = tmp_path / "outside"
    outside.mkdir()
    run.mkdir()
    (run / "credit").symlink_to(outside)
    with pytest.raises(RunDirLinkError, match="credit"):
        write_credit(run, {"step": 1, "groups": []})
    with pytest.raises(RunDirLinkError, match="report"):
        (run / "report").symlink_to(outside)
        run_subdir(run, "report")
    (run / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(UsageError, match="symbolic link"):
        append_jsonl(run / "metrics.jsonl", {"step": 1})
    assert victim.read_text() == "keep me\n" and list(outside.iterdir()) == []
    model, tok, opt, sched = _optimizer_objects()
    (run / "checkpoints").symlink_to(outside)
    with pytest.raises(RunDirLinkError, match="checkpoints"):
        save_checkpoint(run, 1, model, tok, opt, sched, {"step": 1, "seed": 0})
    assert list(outside.iterdir()) == []


def test_a_symlinked_step_dir_is_replaced_not_followed_and_later_saves_work(tmp_path):
    run = tmp_path / "run"
    model, tok, opt, sched = _optimizer_objects()
    save_checkpoint(run, 1, model, tok, opt, sched, {"step": 1, "seed": 0})
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(run / "checkpoints" / "step_000001", elsewhere)
    kept = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    root = run / "checkpoints"
    (root / "step_000002").symlink_to(elsewhere)                  # planted mid-run
    (root / ".tmp_step_000003").symlink_to(elsewhere)
    for step in (2, 3, 4):
        save_checkpoint(run, step, model, tok, opt, sched, {"step": step, "seed": 0}, keep=2)
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == kept
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_000003", "step_000004"]
    assert latest_checkpoint(run).name == "step_000004"


# ------------------------------------------------------------------ rotation
def test_rotation_keeps_the_newest_by_step_number_past_a_million(tmp_path):
    run = tmp_path / "run"
    model, tok, opt, sched = _optimizer_objects()
    for step in (999_998, 999_999, 1_000_000, 1_000_001):
        save_checkpoint(run, step, model, tok, opt, sched, {"step": step, "seed": 0}, keep=2)
    root = run / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_1000000", "step_1000001"]
    assert latest_checkpoint(run).name == "step_1000001"


def test_trainer_refuses_a_symlinked_lock_without_creating_files(tmp_path, victim):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(victim)
    with pytest.raises(RunDirLinkError, match=r"\.lock"):
        Trainer(small_config(run, total_steps=1))
    assert victim.read_text() == "keep me\n" and [p.name for p in run.iterdir()] == [".lock"]
