"""benchmarks/gpu.py without a GPU: it exits cleanly, its counting/report helpers are right,
and its correctness checks pass on CPU tensors through the Triton interpreter."""
import importlib.util
import math
import os
import sys

import pytest
import torch

from sharpo_kernels._backend import backend_runs_on

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def gpu():
    spec = importlib.util.spec_from_file_location("sharpo_bench_gpu",
                                                  os.path.join(ROOT, "benchmarks", "gpu.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up there
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_exits_cleanly_without_cuda(gpu, capsys, tmp_path):
    out = tmp_path / "r.md"
    assert gpu.main(["--out", str(out)]) == 0
    assert "no CUDA device" in capsys.readouterr().out
    assert not out.exists()


def test_peaks_and_counts(gpu):
    assert gpu.device_peaks("NVIDIA H200")[0] == 4800.0
    assert gpu.device_peaks("NVIDIA H100 PCIe") == gpu.DEVICE_PEAKS["H100 PCIe"]
    assert gpu.device_peaks("NVIDIA H100 80GB HBM3") == gpu.DEVICE_PEAKS["H100"]
    assert gpu.device_peaks("Some Other GPU") is None
    assert gpu.linear_flops(2, 3, 5, False) == 60 and gpu.linear_flops(2, 3, 5, True) == 180
    assert gpu.token_traffic_bytes(4, 10, 2, True) == 240
    assert gpu.linear_traffic_bytes(2, 3, 5, 2, False) == 3 * 5 * 2 + 2 * 5 * 2


def test_table(gpu):
    rows = [gpu.Row("s", "a", ms=2.0, extra_bytes=3 << 20, gbps=2400.0, tflops=float("nan")),
            gpu.Row("s", "b", note="failed: X")]
    table = gpu.fmt_table(rows, gpu.device_peaks("H200"))
    lines = table.splitlines()
    assert len(lines) == 4 and "| s | a | 2.000 | 3 | 2400 (50%) | - |" in lines[2]
    assert "failed: X" in lines[3]
    assert "?" in gpu.fmt_table(rows, None).splitlines()[0]


@pytest.mark.skipif(not backend_runs_on("triton", torch.device("cpu"))[0],
                    reason="triton needs TRITON_INTERPRET=1 on CPU")
def test_check_kernels_on_interpreter(gpu):
    checks = gpu.check_kernels(torch.device("cpu"), n=20, v=300, h=17)
    assert len(checks) == 2 * (3 + 5)
    bad = [(c.name, c.err, c.tol) for c in checks if not c.ok]
    assert not bad, bad
    assert all(math.isfinite(c.err) for c in checks)
    assert gpu.Check("x", 2.0, 1.0).ok is False


def test_compiled_bound_columns(gpu):
    """The compiled bound is looked up by shape, scaled in N, summed fwd + bwd; shown in
    the table; the H200/A100 models are used for those devices."""
    from sharpo_kernels.compiled.model import A100, H200, Bound
    fwd = Bound(0.1e-3, 0.2e-3, 0.5e-3, 0.0, 8.0, 128, 8.0)
    bwd = Bound(0.3e-3, 0.2e-3, 1.0e-3, 0.0, 7.0, 112, 7.0)
    bounds = {"token_fwd bfloat16 N=8192 V=151936 entropy=0": fwd,
              "token_bwd bfloat16 N=8192 V=151936 entropy=0": bwd}
    ms, by = gpu.bound_for("token", 2048, 151936, None, False, bounds)
    assert ms == pytest.approx(0.5 / 4) and by == "memory"
    ms, by = gpu.bound_for("token", 8192, 151936, None, True, bounds)
    assert ms == pytest.approx(1.5) and by == "memory+memory"
    assert math.isnan(gpu.bound_for("token", 8192, 32000, None, False, bounds)[0])
    assert math.isnan(gpu.bound_for("linear", 8192, 151936, 896, False, bounds)[0])
    row = gpu.Row("s", "a", ms=2.0, bound_ms=1.25, bound_by="memory")
    assert "| 1.250 (memory) |" in gpu.fmt_table([row], None)
    assert gpu.model_device("NVIDIA H200", 90, 132, 1.98, None) is H200
    assert gpu.model_device("NVIDIA A100-SXM4-80GB", 80, 108, 1.41, None) is A100
    assert gpu.model_device("Other GPU", 89, 100, 2.0, None) is None
    other = gpu.model_device("Other GPU", 89, 100, 2.0, (1000.0, 200.0, 50.0))
    assert other.hbm_gbs == 900.0 and other.arch == 89


def test_bounded_labels_include_the_token_kernels(gpu):
    """The timing rows' compiled bounds: token labels (which name no bias) are kept; the
    H200 run of 2026-12-04 showed no bound on its token rows because the filter asked
    every label for bias=0."""
    from sharpo_kernels.compiled.variants import N_TOKENS
    keys = {f"token_fwd bfloat16 N={N_TOKENS} V=151936 entropy=0",
            f"token_bwd bfloat16 N={N_TOKENS} V=151936 entropy=0",
            f"linear_fwd bfloat16 N={N_TOKENS} V=151936 H=896 bias=0 entropy=0",
            f"linear_bwd bfloat16 N={N_TOKENS} V=151936 H=896 bias=0 entropy=0 h=1 w=1 b=0"}
    assert all(gpu.bounded_label(k) for k in keys)
    for k in ("token_fwd bfloat16 N=8192 V=151936 entropy=1",
              "token_fwd float32 N=8192 V=151936 entropy=0",
              "linear_fwd bfloat16 N=8192 V=151936 H=896 bias=1 entropy=0",
              "linear_bwd bfloat16 N=8192 V=151936 H=896 bias=0 entropy=0 h=1 w=0 b=0",
              "linear_label bfloat16 N=8192 V=151936 H=896 bias=0",
              "linear_fwd bfloat16 N=8192 V=151936 H=4096 bias=0 entropy=0 cand=tma"):
        assert not gpu.bounded_label(k), k
