"""Ctrl-C reaches every process of the terminal's group: an ALFWorld pool worker ignores it
(the parent prints the one line and closes the pool), so no worker dies with a traceback
of its own and the pool still answers."""
import os
import signal
import time

from sharpo_train.envs.alfworld.pool import ProcessEnvPool
from sharpo_train.envs.base import Task


def test_a_worker_survives_ctrl_c_silently(tmp_path, capfd):
    broken = Task("broken", "Pick", str(tmp_path / "no_such_game"))
    pool = ProcessEnvPool(1, {"max_steps": 5})
    try:
        pool.reset([broken])                         # the worker is up
        worker = pool._workers[0]
        os.kill(worker.proc.pid, signal.SIGINT)
        time.sleep(2)
        assert worker.proc.is_alive()
        again = pool.reset([broken])
        assert "no_such_game" in again[0].info["error"]
        assert "worker fault" not in again[0].info["error"]
    finally:
        pool.close()
    assert "KeyboardInterrupt" not in capfd.readouterr().err
