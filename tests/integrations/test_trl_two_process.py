"""The TRL drop-in on 2 processes (torch.distributed.run, gloo on CPU, accelerate's
multi-CPU mode) against 1 process on the same data (tests/integrations/trl_two_process.py):
every group of completions stays on one process (peers are picked inside it), the rows and
their SHARPO advantages are the same, and the ``sharpo/*`` step statistics each process
logs are those of the whole step (gathered over processes), equal to the single process's."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from integrations.trl_support import needs_trl

pytestmark = needs_trl

SCRIPT = Path(__file__).resolve().parent / "trl_two_process.py"
REPO = Path(__file__).resolve().parents[2]
G = 4


def launch(out: Path, nproc: int) -> list[dict]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = [sys.executable, str(SCRIPT), str(out)] if nproc == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(SCRIPT), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]


def ordered(rows):
    """Rows in a fixed order whatever process made them (one row per completion)."""
    return sorted(rows, key=lambda row: (row["prompt"], row["completion"], row["has_teacher"], row["reward"],
                                         row["advantages"]))


def test_two_processes_equal_one_and_never_split_a_group(tmp_path):
    one, = launch(tmp_path / "one", 1)
    two = launch(tmp_path / "two", 2)
    assert [r["world"] for r in two] == [2, 2] and one["world"] == 1
    assert len(one["steps"]) == 2 and all(len(r["steps"]) == 2 for r in two)
    local_coverage = []
    for s in range(2):
        single = ordered(one["steps"][s])
        both = ordered([row for r in two for row in r["steps"][s]])
        assert [(row["prompt"], row["completion"]) for row in both] == \
            [(row["prompt"], row["completion"]) for row in single]           # the same completions
        for r in two:
            rows = r["steps"][s]
            assert len(rows) == G
            assert len({row["prompt"] for row in rows}) == 1                 # one whole group per process
            for row in rows:
                if row["peer"] is not None:                                  # the peer: a local success
                    assert rows[row["peer"]]["prompt"] == row["prompt"] and rows[row["peer"]]["reward"] >= 0.5
            local_coverage.append(sum(row["has_teacher"] for row in rows) / G)
        for row, want in zip(both, single):
            assert row["has_teacher"] == want["has_teacher"] and row["reward"] == want["reward"]
            assert row["advantages"] == pytest.approx(want["advantages"], rel=1e-4, abs=1e-5)
    # the processes' shares differ, so the logged statistics must be gathered to agree
    assert local_coverage[0] != local_coverage[1] or local_coverage[2] != local_coverage[3]
    for r in two:
        assert len(r["logged"]) == 2
        for got, want in zip(r["logged"], one["logged"]):
            assert got.keys() == want.keys()
            for k in want:
                assert got[k] == pytest.approx(want[k], rel=1e-4, abs=1e-6, nan_ok=True), k
