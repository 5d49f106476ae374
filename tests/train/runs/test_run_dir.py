"""What a run directory guarantees (docs/run_directory.md): nothing executable is loaded
from it, ``checkpoints/latest`` stays inside the run, one writer at a time (RUN/.lock),
truncated checkpoints fall back to the newest complete one, a torn last metrics line is
dropped, a diverged step stops the run and keeps the last good checkpoint, and resume
restores the optimizer exactly."""
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from sharpo_train.runs.checkpoint import (CheckpointError, checkpoint_problem, latest_checkpoint,
                                          load_state, restore_optimizer, save_checkpoint)
from sharpo_train.errors import UsageError
from sharpo_train.io import read_jsonl
from sharpo_train.models.policy import build_policy
from sharpo_train.analysis.report.records import read_metrics
from sharpo_train.runs.run_lock import RunDirBusyError, RunLock
from sharpo_train.loops.trainer import NonFiniteTrainingError, Trainer, train

from train.loops.test_trainer_support import small_config

REPO = Path(__file__).resolve().parents[3]
MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}
FAST = dict(method="grpo", checkpoint__every=1, rollout__max_new_tokens=8, rollout__max_turns=2)


# ------------------------------------------------------------------ fixtures
def _optimizer_objects(seed: int = 0):
    """A tiny policy with one AdamW step taken (non-trivial optimizer state) + scheduler."""
    torch.manual_seed(seed)
    model, tok = build_policy(MODEL)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    model(input_ids=torch.tensor([[1, 2, 3, 4, 5]])).logits.square().mean().backward()
    opt.step()
    sched.step()
    return model, tok, opt, sched


@pytest.fixture
def two_checkpoints(tmp_path):
    """RUN with checkpoints step_000001 and step_000002 (latest), written directly."""
    run = tmp_path / "run"
    model, tok, opt, sched = _optimizer_objects()
    for step in (1, 2):
        save_checkpoint(run, step, model, tok, opt, sched, {"step": step, "seed": 0})
    return run


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A real 2-step run with a checkpoint after every step (copied by each test)."""
    run = tmp_path_factory.mktemp("trained") / "run"
    train(small_config(run, total_steps=2, **FAST))
    return run


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    (dst / ".lock").unlink(missing_ok=True)
    return dst


# ------------------------------------------------------------------ item 1: nothing executable
class _Payload:
    """Unpickling this runs a shell command (what a malicious state.pt would carry)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickled_payload_in_the_newest_checkpoint_never_runs(tmp_path, trained_run, capsys):
    run = copy_run(trained_run, tmp_path / "run")
    marker = tmp_path / "PWNED"
    newest = run / "checkpoints" / "step_000002"
    payload = pickle.dumps({"optimizer": _Payload(marker), "trainer": {"step": 2}})
    (newest / "state.pt").write_bytes(payload)                     # what sharpo < 0.2 loaded
    (newest / "policy" / "model.safetensors").unlink()             # and what transformers
    (newest / "policy" / "pytorch_model.bin").write_bytes(payload)  # would fall back to
    tr = Trainer(small_config(run, total_steps=2, resume=True, **FAST))
    try:
        assert not marker.exists(), "the pickled payload ran"
        assert tr.step_done == 1                                   # fell back to step_000001
    finally:
        tr.lock.release()
        tr.pool.close()
    err = capsys.readouterr().err
    assert "step_000002" in err and "falling back to step_000001" in err and "refused" in err


def test_checkpoint_files_are_safetensors_and_json_only(two_checkpoints):
    ckpt = two_checkpoints / "checkpoints" / "step_000002"
    names = sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*") if p.is_file())
    assert "state.json" in names and "optimizer.safetensors" in names
    assert "policy/model.safetensors" in names
    for name in names:
        assert name.endswith((".safetensors", ".json", ".jinja", ".txt", ".model")), name
    doc = json.loads((ckpt / "state.json").read_text())
    assert doc["trainer"] == {"step": 2, "seed": 0} and doc["files"]["optimizer.safetensors"] > 0
    assert set(doc["sha256"]) == set(doc["files"])      # each file's digest beside its size


@pytest.mark.parametrize("pointer", ["/etc", "../../outside", "step_000001/../../..", "",
                                     "step_1", "step_000002\nstep_000001"])
def test_latest_must_name_a_checkpoint_of_this_run(two_checkpoints, tmp_path, pointer):
    outside = tmp_path / "outside"
    shutil.copytree(two_checkpoints / "checkpoints" / "step_000002", outside)
    (two_checkpoints / "checkpoints" / "latest").write_text(pointer)
    with pytest.raises(CheckpointError, match="latest"):
        latest_checkpoint(two_checkpoints)


def test_latest_naming_a_missing_step_or_a_symlink_out_of_the_run(two_checkpoints, tmp_path):
    root = two_checkpoints / "checkpoints"
    (root / "latest").write_text("step_000009\n")
    with pytest.raises(CheckpointError, match="step_000009, which does not exist"):
        latest_checkpoint(two_checkpoints)
    # a step directory that is a symbolic link to a (complete) checkpoint elsewhere
    outside = tmp_path / "elsewhere"
    shutil.copytree(root / "step_000002", outside)
    shutil.rmtree(root / "step_000001")
    (root / "step_000001").symlink_to(outside)
    (root / "latest").write_text("step_000001\n")
    with pytest.raises(CheckpointError, match="symbolic link"):
        latest_checkpoint(two_checkpoints)
    # a file inside a checkpoint that links out of it
    (root / "latest").write_text("step_000002\n")
    weights = root / "step_000002" / "policy" / "model.safetensors"
    weights.unlink()
    weights.symlink_to(outside / "policy" / "model.safetensors")
    assert "symbolic link" in checkpoint_problem(two_checkpoints, root / "step_000002")


def test_resume_restores_optimizer_and_scheduler_bit_for_bit(two_checkpoints):
    _, _, opt, sched = _optimizer_objects()
    state = load_state(two_checkpoints / "checkpoints" / "step_000002")
    assert state["step"] == 2 and state["trainer"] == {"step": 2, "seed": 0}
    model2, _, _, _ = _optimizer_objects(seed=1)       # other weights, fresh optimizer
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.01)
    sched2 = torch.optim.lr_scheduler.LambdaLR(opt2, lambda s: min(1.0, (s + 1) / 3))
    restore_optimizer(opt2, state["optimizer"])
    sched2.load_state_dict(state["scheduler"])
    a, b = opt.state_dict(), opt2.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert isinstance(b["param_groups"][0]["betas"], tuple)
    assert a["state"].keys() == b["state"].keys()
    for pid in a["state"]:
        for name, x in a["state"][pid].items():
            y = b["state"][pid][name]
            assert x.dtype == y.dtype and torch.equal(x, y), (pid, name)
    assert sched.state_dict() == sched2.state_dict()


# ------------------------------------------------------------------ item 6: bad files
@pytest.mark.parametrize("victim", ["optimizer.safetensors", "policy/model.safetensors",
                                    "state.json", "policy/tokenizer.json"])
def test_a_truncated_newest_checkpoint_falls_back_to_the_complete_one(two_checkpoints, victim):
    f = two_checkpoints / "checkpoints" / "step_000002" / victim
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    said = []
    assert latest_checkpoint(two_checkpoints, warn=said.append).name == "step_000001"
    assert len(said) == 1 and str(f) in said[0] and "falling back to step_000001" in said[0]


def test_no_complete_checkpoint_left_is_an_error_naming_the_file(two_checkpoints):
    for step in (1, 2):
        f = two_checkpoints / "checkpoints" / f"step_00000{step}" / "optimizer.safetensors"
        f.write_bytes(f.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="step_000002/optimizer.safetensors"):
        latest_checkpoint(two_checkpoints)


def test_resume_after_truncation_redoes_the_lost_step_like_the_straight_run(tmp_path, trained_run, capsys):
    run = copy_run(trained_run, tmp_path / "run")
    f = run / "checkpoints" / "step_000002" / "policy" / "model.safetensors"
    f.write_bytes(f.read_bytes()[:1000])
    train(small_config(run, total_steps=2, resume=True, **FAST))
    assert "falling back to step_000001" in capsys.readouterr().err
    strip = lambda rs: [{k: v for k, v in r.items() if not k.startswith(("time", "tokens_per_s"))}
                        for r in rs]
    assert strip(read_jsonl(run / "metrics.jsonl")) == strip(read_jsonl(trained_run / "metrics.jsonl"))
    for name in ("optimizer.safetensors", "policy/model.safetensors"):
        assert (run / "checkpoints/step_000002" / name).read_bytes() == \
            (trained_run / "checkpoints/step_000002" / name).read_bytes(), name


def test_a_torn_last_metrics_line_is_dropped_on_resume(tmp_path, trained_run):
    run = copy_run(trained_run, tmp_path / "run")
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "kind": "train", "TORN')          # killed mid-append
    train(small_config(run, total_steps=2, resume=True, **FAST))   # nothing left to do
    text = (run / "metrics.jsonl").read_text()
    assert text.endswith("\n") and "TORN" not in text
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == [1, 2]


def test_one_metrics_reader_drops_a_torn_tail_and_names_a_bad_middle_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "kind": "train"}\n{"step": 1, "kind": "eval", "eval/success": 0.5}\n{"st')
    assert [r["kind"] for r in read_jsonl(path)] == ["train", "eval"]
    train_rows, evals = read_metrics(tmp_path)
    assert len(train_rows) == 1 and len(evals) == 1
    path.write_text('{"step": 1}\n{"st\n{"step": 2}\n')
    for reader in (lambda: read_jsonl(path), lambda: read_metrics(tmp_path)):
        with pytest.raises(UsageError, match=r"metrics.jsonl:2: not JSON"):    # one CLI line
            reader()
    path.write_text('{"step": 1}\n[1, 2]\n')
    with pytest.raises(UsageError, match=r"metrics.jsonl:2: expected a JSON object"):
        read_jsonl(path)


# ------------------------------------------------------------------ item 3: one writer
HOLDER = textwrap.dedent("""
    import sys
    from sharpo_train.runs.run_lock import RunLock
    lock = RunLock(sys.argv[1]).acquire()
    print("held", flush=True)
    sys.stdin.read()
""")


def _hold_lock(run: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    holder = _hold_lock(run)
    try:
        with pytest.raises(RunDirBusyError, match=rf"pid {holder.pid}\b"):
            Trainer(small_config(run, total_steps=1))
        with pytest.raises(RunDirBusyError, match=rf"pid {holder.pid}\b"):
            RunLock(run).acquire()
        assert not (run / "metrics.jsonl").exists() and not (run / "config.yaml").exists()
    finally:
        holder.send_signal(signal.SIGKILL)                       # dies holding the lock
        holder.wait()
    with RunLock(run) as lock:                                   # stale: taken over
        assert lock.held and (run / ".lock").read_text().strip() == str(os.getpid())
        with pytest.raises(RunDirBusyError, match=rf"pid {os.getpid()}\b"):
            RunLock(run).acquire()                               # not reentrant
    assert (run / ".lock").read_text() == ""                     # released: no stale pid


def test_the_lock_is_held_for_the_whole_run_and_released_after(tmp_path, monkeypatch):
    run = tmp_path / "run"
    seen = []
    original = Trainer.step

    def step(self, s):
        with pytest.raises(RunDirBusyError):
            RunLock(run).acquire()
        seen.append(s)
        return original(self, s)

    monkeypatch.setattr(Trainer, "step", step)
    train(small_config(run, total_steps=1, **FAST))
    assert seen == [1]
    RunLock(run).acquire().release()                             # free again
    with pytest.raises(ValueError, match="already holds a run"):
        Trainer(small_config(run, total_steps=1))
    RunLock(run).acquire().release()                             # a refused Trainer released it


def test_sharpo_train_into_a_held_run_exits_2_naming_the_holder(tmp_path, capsys):
    from sharpo_train.cli import main as cli_main

    run = tmp_path / "run"
    run.mkdir()
    holder = _hold_lock(run)
    try:
        rc = cli_main(["train", "--config", "configs/synthetic_smoke.yaml", f"run_dir={run}",
                       "total_steps=1", "log.progress=false"])
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and f"pid {holder.pid}" in err[0], err
    assert sorted(p.name for p in run.iterdir()) == [".lock"]    # nothing written


# ------------------------------------------------------------------ item 4: divergence
def _diverging_step(monkeypatch, at: int, how: str):
    original = Trainer.step

    def step(self, s):
        rec = original(self, s)
        if s == at:
            if how == "loss":
                rec["loss"] = float("nan")
            elif how == "grad_norm":
                rec["grad_norm"] = float("inf")
            else:                                   # the update left NaN weights, loss was fine
                with torch.no_grad():
                    next(self.model.parameters()).fill_(float("nan"))
        return rec

    monkeypatch.setattr(Trainer, "step", step)


@pytest.mark.parametrize("how", ["loss", "grad_norm", "weights"])
def test_a_non_finite_step_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, trained_run,
                                                                               monkeypatch, how):
    run = copy_run(trained_run, tmp_path / "run")
    good = (run / "checkpoints/step_000002/policy/model.safetensors").read_bytes()
    _diverging_step(monkeypatch, at=3, how=how)
    with pytest.raises(NonFiniteTrainingError) as info:
        train(small_config(run, total_steps=3, resume=True, **FAST))
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("step 3:") and "step_000002 is kept" in msg
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_000002"
    assert not (run / "checkpoints" / "step_000003").exists()
    assert (run / "checkpoints/step_000002/policy/model.safetensors").read_bytes() == good
    last = read_jsonl(run / "metrics.jsonl")[-1]                 # the diverged step is on record
    assert last["step"] == 3 and (last[how] is None if how != "weights" else "parameter" in msg)
    RunLock(run).acquire().release()                             # the lock was released


def test_the_cli_stops_a_diverged_run_with_one_line(tmp_path, monkeypatch, capsys):
    from sharpo_train.cli import main as cli_main

    _diverging_step(monkeypatch, at=1, how="loss")
    run = tmp_path / "run"
    args = ["train", "--config", "configs/synthetic_smoke.yaml", f"run_dir={run}", "total_steps=1",
            "method=grpo", "log.progress=false",
            "rollout.max_new_tokens=8", "rollout.max_turns=2"]
    rc = cli_main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "non-finite loss=nan" in err[-1] and "Traceback" not in "\n".join(err)
    assert not (run / "checkpoints").exists()
