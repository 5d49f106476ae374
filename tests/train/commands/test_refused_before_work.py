"""Settings that cannot work on this machine or with this data are one line before
anything is made (issue 47: each was a traceback on main): a SHARPO kernel backend that
cannot run on the run's device (it failed at step 1, after the run folder was made), and
`sharpo eval` of a run switched to an environment whose data is not there."""
import shutil

import pytest

from train.commands.test_cli_errors import one_line_error
from train.commands.test_cli_input_errors import FAST, SMOKE


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_a_gpu_backend_on_a_cpu_run_is_refused_before_the_run_folder(
        tmp_path, capsys, monkeypatch, backend):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    run = tmp_path / "run"
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={run}", *FAST,
                            "method=sharpo", "model.device=cpu", f"estimator.backend={backend}"],
                   "estimator.backend", repr(backend), "cpu")
    assert not run.exists()


def test_a_backend_that_runs_here_is_accepted():
    import torch
    from sharpo_train.estimators.device_check import check_backend
    from sharpo_train.estimators.sharpo import SharpoParams
    check_backend(SharpoParams(backend="torch"), torch.device("cpu"))
    check_backend(SharpoParams(backend=None), torch.device("cpu"))


def test_eval_of_a_run_switched_to_alfworld_without_its_games_is_one_line(
        done_run, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    one_line_error(capsys, ["eval", "--run-dir", str(run), "env.name=alfworld"],
                   "env.games_dir", "ALFWORLD_DATA")
    assert not list(run.glob("eval-*.json"))
