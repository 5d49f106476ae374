"""A worker of the ALFWorld pool killed between two requests: its episodes end with a
worker fault, not with a fresh worker's "no episode in this slot"."""
import os
import signal

from sharpo_train.envs.alfworld.pool import ProcessEnvPool
from sharpo_train.envs.base import Task


def test_worker_killed_between_requests_is_reported_as_a_worker_fault(tmp_path):
    broken = Task("broken", "Pick", str(tmp_path / "no_such_game"))
    pool = ProcessEnvPool(1, {"max_steps": 5})
    try:
        first = pool.reset([broken, broken])        # a reset answered by worker 0
        assert first[0].done and "no_such_game" in first[0].info["error"]
        worker = pool._workers[0]
        os.kill(worker.proc.pid, signal.SIGKILL)
        worker.proc.join(timeout=30)                # really gone before the next request
        assert not worker.proc.is_alive()
        out = pool.step({0: "look", 1: None})
        for slot in (0, 1):
            err = out[slot].info["error"]
            assert out[slot].done and out[slot].reward == 0.0
            assert "worker 0" in err and "worker fault" in err and "died" in err, err
            assert "no episode" not in err, err
        assert pool.worker_pids() == [None]         # replaced at the next reset
        again = pool.reset([broken])
        assert "no_such_game" in again[0].info["error"] and pool.worker_pids()[0] is not None
    finally:
        pool.close()
