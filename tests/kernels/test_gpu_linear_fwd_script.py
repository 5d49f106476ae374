"""benchmarks/gpu_linear_fwd.py (the sm_90 forward candidates side by side) without a GPU:
it exits cleanly, rejects a bad budget, takes every candidate, and its check-then-time loop
runs on CPU tensors through the Triton interpreter (every candidate's log-probs against
fp32 torch; the time budget skips rows; a failing candidate is reported, not fatal)."""
import importlib.util
import os
import sys

import pytest
import torch

from sharpo_kernels._backend import backend_runs_on
from sharpo_kernels.logprobs.linear_fwd_variants import FWD_VARIANTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def fwd():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "sharpo_bench_gpu_linear_fwd", os.path.join(ROOT, "benchmarks", "gpu_linear_fwd.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)
    sys.path.remove(os.path.join(ROOT, "benchmarks"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_exits_cleanly_without_cuda(fwd, capsys, tmp_path):
    out = tmp_path / "r.md"
    assert fwd.main(["--out", str(out)]) == 0
    assert "no CUDA device" in capsys.readouterr().out
    assert not out.exists()
    assert fwd.main(["--budget-s", "0"]) == 2 and fwd.main(["--budget-s", "inf"]) == 2


def test_every_candidate_is_timed_once(fwd):
    assert sorted(fwd.ORDER) == sorted(FWD_VARIANTS) and fwd.ORDER[0] == "base"


def test_table(fwd):
    rows = [fwd.FwdRow("base", 20.0, 1e-6, "5 (128x256 w8)"), fwd.FwdRow("tma", 10.0, 2e-6),
            fwd.FwdRow("cp_2cta", note="skipped: time budget")]
    md = fwd.fmt_table(rows, 8192, 4096, 151936, 989.0)
    lines = md.splitlines()
    assert lines[2].startswith("| base | 20.00 | 510 | 52% | 1.00x | 5 (128x256 w8) | 1.0e-06")
    assert "| tma | 10.00 | 1020 | 103% | 0.50x | - | 2.0e-06 |" in lines[3]
    assert lines[4].startswith("| cp_2cta | nan | nan | - | - | - | - | skipped")


@pytest.mark.skipif(not backend_runs_on("triton", torch.device("cpu"))[0],
                    reason="triton needs TRITON_INTERPRET=1 on CPU")
def test_run_candidates_on_cpu(fwd):
    gen = torch.Generator().manual_seed(4)
    n, h, v = 40, 32, 300
    hid = torch.randn(n, h, generator=gen)
    w = torch.randn(v, h, generator=gen) * 0.5
    y = torch.randint(0, v, (n,), generator=gen)
    calls = []

    def bench(fn):
        calls.append(fn)
        fn()
        return 1.0

    import time
    rows = fwd.run_candidates(hid, w, y, ["base", "tma_waves", "cublas"], time.time() + 600,
                              bench, entropy=True, check_rows=25)
    assert [r.impl for r in rows] == ["naive torch", "torch h @ W^T alone", "base",
                                      "base +entropy", "tma_waves", "tma_waves +entropy",
                                      "cublas", "cublas +entropy"]
    assert rows[6].splits == "1 cuBLAS chunks of 384"
    assert len(calls) == len(rows) and all(r.ms == 1.0 and not r.note for r in rows)
    assert all(r.err < 1e-5 for r in rows if r.impl != "torch h @ W^T alone")
    # past the deadline nothing starts; a failing candidate is a row with its error
    late = fwd.run_candidates(hid, w, y, ["base"], 0.0, bench)
    assert all(r.note == "skipped: time budget" for r in late)
    bad = fwd.run_candidates(hid, w, y, ["exp2"], time.time() + 600,
                             lambda fn: 1 / 0)
    assert bad[-1].note.startswith("failed: ZeroDivisionError")
