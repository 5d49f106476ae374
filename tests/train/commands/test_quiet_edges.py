"""The LOW items of issue 47 on the command line: a reader that stops early
(``sharpo settings | head``), a did-you-mean for a settings prefix."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sharpo_train.cli import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("argv", [["settings"], ["train", "--help"], ["settings", "--markdown"]])
def test_a_closed_pipe_ends_the_output_quietly(argv):
    """stdout's reader is gone before the first write (``| head`` that has exited): no
    BrokenPipeError traceback or "Exception ignored" line, exit 141 (SIGPIPE's)."""
    r, w = os.pipe()
    os.close(r)
    proc = subprocess.run([sys.executable, "-m", "sharpo_train", *argv], stdout=w,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    os.close(w)
    assert proc.stderr == "" and proc.returncode == 141, proc.stderr[-500:]


def test_a_broken_pipe_in_process_is_141(monkeypatch, capsys):
    class Gone:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass
    monkeypatch.setattr(sys, "stdout", Gone())
    assert main(["settings", "rollout."]) == 141


@pytest.mark.parametrize("prefix, near", [("rolout.", "rollout."), ("optim.lrr", "optim.lr"),
                                          ("estimater.", "estimator.")])
def test_a_settings_prefix_gets_a_did_you_mean(capsys, prefix, near):
    assert main(["settings", prefix]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"sharpo settings: no train setting starts with {prefix!r} "
                           f"(did you mean {near!r}?)")
