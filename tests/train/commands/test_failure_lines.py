"""One way every command fails (sharpo_train/failures.py, docs/run_directory.md, "When a
command fails"): a full disk, an error of the operating system or a signal is one line on
stderr with what was kept, and a non-zero exit status; never a traceback."""
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sharpo_train.cli import main

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["log.progress=false", "method=grpo",
        "rollout.max_new_tokens=8", "rollout.max_turns=3", "eval.at_end=false",
        "checkpoint.every=1", "log.credit_every=1"]


def failure_line(capsys, argv, status, *needles) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == status, (rc, err)
    lines = [line for line in err.splitlines() if line.startswith("sharpo ")]
    assert "Traceback" not in err and len(lines) == 1 and err.endswith(lines[0] + "\n"), err
    for needle in needles:          # (other lines: a library's warning printed on the way)
        assert needle in lines[0], (needle, err)
    return lines[0]


def _safetensor_error(text):
    from safetensors import SafetensorError
    return SafetensorError(text)


@pytest.mark.parametrize("where, exc", [
    ("sharpo_train.runs.metrics.append_jsonl",
     OSError(errno.ENOSPC, "No space left on device", "metrics.jsonl")),
    ("sharpo_train.loops.trainer.write_credit",
     OSError(errno.EFBIG, "File too large", "credit/step_00001.json")),
    ("sharpo_train.loops.trainer.save_checkpoint",
     "Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
     "message: \"No space left on device\" })"),
])
def test_a_full_disk_is_one_line_that_says_the_run_is_kept(tmp_path, capsys, monkeypatch,
                                                           where, exc):
    import importlib
    module, _, name = where.rpartition(".")

    def full(*a, **k):
        raise exc if isinstance(exc, BaseException) else _safetensor_error(exc)

    monkeypatch.setattr(importlib.import_module(module), name, full)
    run = tmp_path / "run"
    err = failure_line(capsys, ["train", "--config", SMOKE, f"run_dir={run}", "total_steps=1",
                                *FAST], 1, "sharpo train: error: disk full", str(run),
                       "--resume")
    assert "keeps" in err
    assert (run / ".sharpo-run").is_file()           # the run stays, to be resumed


def test_ctrl_c_is_one_line_with_status_130(tmp_path, capsys, monkeypatch):
    import sharpo_train.loops.trainer as trainer

    def interrupted(self, step):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer.Trainer, "step", interrupted)
    run = tmp_path / "run"
    failure_line(capsys, ["train", "--config", SMOKE, f"run_dir={run}", "total_steps=1", *FAST],
                 130, "sharpo train: interrupted (SIGINT)", "--resume")


def test_an_os_error_is_one_line(tmp_path, capsys, monkeypatch):
    import sharpo_train.loops.trainer as trainer

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "x"))

    monkeypatch.setattr(trainer, "write_credit", denied)
    failure_line(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'run'}",
                          "total_steps=1", *FAST], 1, "Permission denied", "keeps")


def test_sft_that_fails_while_saving_leaves_no_temp_folder(tmp_path, capsys, monkeypatch):
    import transformers
    demos = tmp_path / "d.jsonl"
    demos.write_text('{"messages": [{"role": "user", "content": "a"}, '
                     '{"role": "assistant", "content": "b"}]}\n')

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", full)
    failure_line(capsys, ["sft", "--demos", str(demos), "--out", str(tmp_path / "o"),
                          "max_steps=1", "batch_size=1"], 1, "disk full", "--out", "unchanged")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


def _sharpo(args, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "sharpo_train", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_sigterm_and_a_file_size_limit_in_a_real_process(tmp_path):
    """SIGTERM while training: status 143, one line; `ulimit -f` (EFBIG on the checkpoint):
    status 1, one line saying disk full; both runs resume."""
    run = tmp_path / "term"
    p = _sharpo(["train", "--config", SMOKE, f"run_dir={run}", "total_steps=500", *FAST])
    deadline = time.time() + 240
    while not (run / "metrics.jsonl").is_file() and time.time() < deadline and p.poll() is None:
        time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=240)
    assert p.returncode == 143, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("sharpo train: interrupted (SIGTERM)") and "Traceback" not in err
    assert "--resume" in lines[-1]

    import resource
    small = tmp_path / "small"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))    # 64 KiB a file

    p = _sharpo(["train", "--config", SMOKE, f"run_dir={small}", "total_steps=1", *FAST],
                preexec_fn=limit)
    _, err = p.communicate(timeout=240)
    assert p.returncode == 1, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and lines[-1].startswith("sharpo train: error: disk full")
    assert str(small) in lines[-1] and not list((small / "checkpoints").glob("step_*"))
    assert not list((small / "checkpoints").glob(".tmp_step_*"))     # the half checkpoint went
    assert main(["train", "--resume", f"run_dir={small}", "total_steps=1"]) == 0
