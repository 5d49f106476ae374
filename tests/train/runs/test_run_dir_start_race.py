"""Two fresh `sharpo train --run-dir g` at once: whichever loses says the folder is in use
by the other's pid, whatever moment of the winner's start it meets (its lock taken, its
marker being written), never "not a sharpo run"."""
import os
from pathlib import Path

import pytest

from sharpo_train.runs.run_lock import RunLock

from train.commands.test_cli_errors import one_line_error

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["total_steps=1", "log.progress=false", "method=grpo"]


@pytest.mark.parametrize("moment", ["lock only", "marker being written", "config written"])
def test_the_loser_of_a_racing_start_names_the_winners_pid(tmp_path, capsys, moment):
    run = tmp_path / "g"
    run.mkdir()
    lock = RunLock(run).acquire()            # the winner, right after taking the lock
    try:
        if moment != "lock only":
            (run / "..sharpo-run.k2j3.tmp").write_text('{"format": "sharpo-run/1"')
        if moment == "config written":
            (run / ".config.yaml.x.tmp").write_text("method: grpo\n")
        before = sorted(os.listdir(run))
        for argv in (["train", "--config", SMOKE, "--run-dir", str(run), *FAST],
                     ["train", "--resume", "--run-dir", str(run)]):
            one_line_error(capsys, argv, "in use by", f"pid {os.getpid()}")
        assert sorted(os.listdir(run)) == before
    finally:
        lock.release()
    # once the winner is gone, a folder left like that is not a run: refused as before
    if moment != "lock only":
        one_line_error(capsys, ["train", "--config", SMOKE, "--run-dir", str(run), *FAST],
                       "not a sharpo run")
