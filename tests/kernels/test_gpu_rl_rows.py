"""benchmarks/gpu_rl.py (the RL rows of benchmarks/gpu.py) without a GPU: every row is
built and run once at a tiny shape on CPU tensors (sharpo's rows through the Triton
interpreter), the per-token upstream gradient reaches the inputs, the competitors that are
not installed get a "not installed" row, the peaked inputs are peaked, and gpu.py refuses a
bad --budget-s before any work."""
import importlib.util
import os
import sys

import pytest
import torch

from sharpo_kernels._backend import backend_runs_on

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks")


def _load(name):
    spec = importlib.util.spec_from_file_location(f"sharpo_bench_{name}",
                                                  os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rl():
    mod = _load("gpu_rl")
    yield mod
    sys.modules.pop(mod.__name__, None)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.skipif(not backend_runs_on("triton", torch.device("cpu"))[0],
                    reason="triton needs TRITON_INTERPRET=1 on CPU")
def test_every_row_runs_once_on_cpu(rl):
    dev = torch.device("cpu")
    rand = rl.random_inputs(24, 8, 97, torch.float32, dev)
    peak = rl.peaked_inputs(24, 8, 97, torch.float32, dev)
    cases = rl.rl_cases(rand, peak, "tiny")
    names = {(c.suite, c.impl) for c in cases}
    for impl in ("sharpo triton, trainable head", "sharpo triton, frozen head",
                 "naive torch, frozen head", "sharpo triton, entropy on",
                 "sharpo triton, bias", "liger fused linear CE none, trainable head",
                 "cut cross-entropy none filter off, frozen head"):
        assert ("rl logprobs tiny", impl) in names, impl
    for impl in ("cut cross-entropy none filter high", "cut cross-entropy none filter off",
                 "liger fused linear CE none", "sharpo triton",
                 "sharpo triton, grad_filter 2^-12"):
        assert ("rl peaked tiny", impl) in names, impl
    for impl in ("sharpo fused linear_policy_loss, trainable head",
                 "sharpo fused linear_policy_loss, frozen head",
                 "sharpo linear_logprobs then loss, frozen head",
                 "naive torch then loss, trainable head", "liger GRPO loss (dapo)"):
        assert ("rl policy loss tiny", impl) in names, impl
    have = {"liger": _installed("liger_kernel"), "cut cross": _installed("cut_cross_entropy")}
    ran = 0
    for c in cases:
        other = [k for k in have if c.impl.startswith(k)]
        if other and not have[other[0]]:
            assert c.fn is None and c.note.startswith("not installed"), c.impl
            continue
        if c.fn is None:
            continue
        c.fn()
        h, w = c.leaves[0], c.leaves[1]
        assert h.grad is not None and bool(h.grad.isfinite().all()), c.impl
        assert (w.grad is None) == (not w.requires_grad), c.impl
        c.release()
        assert h.grad is None
        ran += 1
    assert ran >= 19 + 4 * have["liger"] + 4 * have["cut cross"]


@pytest.mark.skipif(not backend_runs_on("triton", torch.device("cpu"))[0],
                    reason="triton needs TRITON_INTERPRET=1 on CPU")
def test_fused_and_unfused_rows_compute_the_same_gradient(rl):
    """The policy-loss rows time the same loss: equal hidden gradients (fp32, CPU)."""
    dev = torch.device("cpu")
    rand = rl.random_inputs(20, 8, 61, torch.float32, dev)
    cases = {c.impl: c for c in rl.rl_cases(rand, rand, "t") if c.suite == "rl policy loss t"}
    grads = []
    for impl in ("sharpo fused linear_policy_loss, trainable head",
                 "sharpo linear_logprobs then loss, trainable head",
                 "naive torch then loss, trainable head"):
        cases[impl].fn()
        grads.append(cases[impl].leaves[0].grad.clone())
    for g in grads[1:]:
        torch.testing.assert_close(g, grads[0], rtol=1e-4, atol=1e-7)
    assert grads[0].abs().max() > 0


def test_peaked_inputs_are_peaked(rl):
    dev = torch.device("cpu")
    peak = rl.logit_stats(rl.peaked_inputs(64, 32, 20000, torch.float32, dev), rows=64)
    flat = rl.logit_stats(rl.random_inputs(64, 32, 20000, torch.float32, dev), rows=64)
    assert peak["entropy"] < 4.0 < flat["entropy"]
    assert peak["p_label"] > 100 * flat["p_label"]
    assert peak["below"] > 0.99


def test_budget_and_shapes():
    gpu = _load("gpu")
    try:
        assert gpu.main(["--budget-s", "0"]) == 2
        assert gpu.main(["--budget-s", "nan"]) == 2
        assert gpu.rl_shapes(True) == [(2048, 896, 151936)]
        assert gpu.rl_shapes(False)[0] == (8192, 4096, 151936)
    finally:
        sys.modules.pop(gpu.__name__, None)


def test_sigterm_keeps_the_rows_timed_so_far(rl, monkeypatch):
    """gpu_session.sh's `timeout` sends SIGTERM: the rows so far come back with a note and
    the previous handler is restored (no GPU: the timing loop is replaced)."""
    import signal

    def fake(shapes, deadline, bench, peak_extra, row_cls, rows, notes):
        rows.append(row_cls("s", "first"))
        signal.raise_signal(signal.SIGTERM)
        rows.append(row_cls("s", "never"))
    monkeypatch.setattr(rl, "_time_shapes", fake)
    before = signal.getsignal(signal.SIGTERM)
    gpu = _load("gpu")
    try:
        rows, notes = rl.run_rl_timings([(1, 1, 1)], 0.0, None, None, gpu.Row)
    finally:
        sys.modules.pop(gpu.__name__, None)
    assert [r.impl for r in rows] == ["first", "-"] and "SIGTERM" in rows[1].note
    assert signal.getsignal(signal.SIGTERM) == before
