"""benchmarks/gpu_segment.py without a GPU: it exits cleanly, its checks pass on the CPU
backends here, and a backend that is off by a little or writes NaN where the reference has
a number is reported as failing."""
import importlib.util
import os
import sys

import pytest
import torch

import sharpo_kernels as sk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location(
        "sharpo_bench_gpu_segment", os.path.join(ROOT, "benchmarks", "gpu_segment.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_exits_cleanly_without_cuda(script, capsys):
    assert script.main([]) == 0
    assert "no CUDA device" in capsys.readouterr().out


def test_checks_pass_against_torch_on_cpu(script):
    rows = script.check_backends(torch.device("cpu"), ["torch"])
    assert len(rows) == len(script.CHECK_CASES) * (len(script.FIELDS) + 1)
    assert all(ok for *_, ok in rows)


@pytest.mark.parametrize("fault", ["offset", "nan"])
def test_a_wrong_backend_fails_its_check(script, monkeypatch, fault):
    real = sk.segment_advantage

    def wrong(*args, backend=None, **kw):
        res = real(*args, backend="torch", **kw)
        if backend == "torch":
            return res
        adv = res.advantages.clone()
        if fault == "offset":
            adv[0, 0] += 1e-3
        else:
            adv[0, 0] = float("nan")
        return res._replace(advantages=adv)

    monkeypatch.setattr(sk, "segment_advantage", wrong)
    rows = script.check_backends(torch.device("cpu"), ["fake"])
    bad = [(case, f) for case, b, f, e, ok in rows if not ok]
    assert bad and all(f == "advantages" for _c, f in bad)
    assert len(bad) == len(script.CHECK_CASES)


def test_touched_bytes_counts_inputs_and_the_output(script):
    batch = script.batch_on(torch.device("cpu"), 2, 8, (1, 2), torch.float32, None, seed=0)
    # teacher, student fp32 (2*8*4 each), ids int64 (2*8*8), advantages (2*4),
    # has_teacher bool (2), mask bool (2*8); written: 2*8*4
    assert script.touched_bytes(batch) == 64 + 64 + 128 + 8 + 2 + 16 + 64


def test_tile_sweep_script_without_cuda(capsys):
    """benchmarks/gpu_linear_tiles.py: every candidate is a valid LinearTritonConfig, and
    without CUDA the script exits cleanly."""
    spec = importlib.util.spec_from_file_location(
        "sharpo_bench_gpu_linear_tiles", os.path.join(ROOT, "benchmarks", "gpu_linear_tiles.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfgs = [mod.config_of(c) for c in mod.CANDIDATES]
    assert cfgs[0].launch_options() == {} and cfgs[1].launch_options() == {"num_stages": 3}
    assert mod.label(mod.CANDIDATES[2]) == "128x128x64 w8 s3"
    if not torch.cuda.is_available():
        assert mod.main([]) == 0
        assert "no CUDA device" in capsys.readouterr().out


def test_error_checks_pass_on_cpu_backends(script):
    """check_errors: each broken rule raises torch's message on the CPU backends here, and
    a backend that raises nothing is reported."""
    from sharpo_kernels import _backend
    backends = [b for b in _backend.usable_backends(torch.device("cpu"), ("cpp", "triton"))]
    rows = script.check_errors(torch.device("cpu"), backends)
    assert len(rows) == len(script.ERROR_RULES) * len(backends)
    assert all(ok for *_, ok in rows), rows


def test_a_backend_that_misses_an_error_fails(script, monkeypatch):
    real = sk.segment_advantage

    def lenient(*args, backend=None, **kw):
        if backend == "torch":
            return real(*args, backend="torch", **kw)
        return None

    monkeypatch.setattr(sk, "segment_advantage", lenient)
    rows = script.check_errors(torch.device("cpu"), ["fake"])
    assert rows and not any(ok for *_, ok in rows)
