"""Backend selection (sharpo_kernels/_backend.py) and available_backends(), checked
against real calls of every op."""
import pytest
import torch

import sharpo_kernels as sk
from sharpo_kernels import _backend, available_backends
from sharpo_kernels.testing import random_batch

CPU = torch.device("cpu")


def test_automatic_choice_is_first_runnable():
    assert _backend.resolve_backend(None, CPU, ("cuda", "torch")) == "torch"
    want = "cpp" if _backend.native_module() is not None else "torch"
    assert _backend.resolve_backend(None, CPU, ("cpp", "cuda", "triton", "torch")) == want


def test_explicit_choice_is_checked():
    assert _backend.resolve_backend("torch", CPU, ("torch",)) == "torch"
    with pytest.raises(ValueError, match=r"^backend: unknown backend 'numba'"):
        _backend.resolve_backend("numba", CPU, ("torch", "cpp"))
    with pytest.raises(ValueError, match=r"^backend: unknown backend 'cpp'"):
        _backend.resolve_backend("cpp", CPU, ("torch",))          # not implemented by this op
    with pytest.raises(ValueError, match=r"^backend: 'cuda' is not available here"):
        _backend.resolve_backend("cuda", CPU, ("cuda", "torch"))
    with pytest.raises(TypeError, match=r"^backend: "):
        _backend.resolve_backend(1, CPU, ("torch",))
    with pytest.raises(ValueError, match=r"^backend: none of"):
        _backend.resolve_backend(None, CPU, ("cuda",))


def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    if not _backend.triton_available():
        pytest.skip("triton not installed")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    ok, why = _backend.backend_runs_on("triton", CPU)
    assert not ok and "TRITON_INTERPRET" in why
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _backend.backend_runs_on("triton", CPU)[0]


def test_cpp_rejects_non_cpu_tensors():
    if _backend.native_module() is None:
        pytest.skip("native module not built")
    ok, why = _backend.backend_runs_on("cpp", torch.device("meta"))
    assert not ok and "CPU tensors" in why


# The backends README.md's API section names.
README_BACKENDS = {"torch", "cpp", "cpu", "triton", "cuda"}
OPS = ("segment_advantage", "token_logprobs", "linear_logprobs")


def _devices():
    return [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])


def _call(op, backend, device):
    """One real call of `op` with backend=NAME on small random tensors of `device`."""
    gen = torch.Generator().manual_seed(3)
    labels = torch.randint(0, 13, (5,), generator=gen).to(device)
    if op == "segment_advantage":
        batch = random_batch(3, 11, segments=(1, 3), seed=4, traj_groups=2)
        batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        out = sk.segment_advantage(**batch, backend=backend).advantages
    elif op == "token_logprobs":
        out = sk.token_logprobs(torch.randn(5, 13, generator=gen).to(device), labels,
                                backend=backend)
    else:
        out = sk.linear_logprobs(torch.randn(5, 7, generator=gen).to(device),
                                 torch.randn(13, 7, generator=gen).to(device), labels,
                                 backend=backend)
    assert torch.isfinite(out).all()


def _call_succeeds(op, backend):
    for device in _devices():
        try:
            _call(op, backend, device)
            return True
        except ValueError as exc:      # refused: the message names the backend argument
            assert str(exc).startswith("backend:"), exc
    return False


@pytest.mark.parametrize("op", OPS)
def test_available_backends_match_real_calls(op):
    """available_backends(op) lists every backend the README names, and says True exactly
    for those a real call with backend=NAME succeeds on (on some device of this machine)."""
    av = available_backends(op)
    assert set(av) == README_BACKENDS
    assert av == {name: _call_succeeds(op, name) for name in README_BACKENDS}


def test_available_backends_without_op_is_any_op():
    av = available_backends()
    assert set(av) == README_BACKENDS and av["torch"] is True and av["cpu"] is True
    assert av == {b: any(available_backends(op)[b] for op in OPS) for b in README_BACKENDS}


def test_available_backends_names_a_bad_op():
    with pytest.raises(ValueError, match=r"^op: unknown op 'softmax'"):
        available_backends("softmax")
    with pytest.raises(TypeError, match=r"^op: "):
        available_backends(1)


# --- the automatic choice on a GPU the native module has no code for ---
# Faked on CPU: a stand-in `_sharpo_native` (its compiled architecture list and runtime probe)
# and a stand-in device capability.

import logging
import types

CUDA0 = torch.device("cuda", 0)
SEG = _backend.OP_BACKENDS["segment_advantage"]


@pytest.fixture
def fake_gpu(monkeypatch):
    """fake_gpu(capability, archs, probe=None): a CUDA device of that compute capability and
    a native module built for `archs` (cuda_archs() string); probe(device) -> cudaError."""
    if not _backend.triton_available():
        pytest.skip("triton not installed")

    def make(capability, archs, probe=None):
        calls = []
        mod = types.SimpleNamespace(has_cuda=lambda: True, cuda_archs=lambda: archs)
        if probe is not None:
            def status(device):
                calls.append(device)
                return probe(device)
            mod.cuda_kernel_image_status = status
        monkeypatch.setattr(_backend, "_native", mod)
        monkeypatch.setattr(_backend, "_cuda_code", {}, raising=False)
        monkeypatch.setattr(_backend, "_logged_choices", set(), raising=False)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: capability)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        return calls
    return make


def test_auto_falls_back_when_the_module_has_no_code_for_the_gpu(fake_gpu, caplog):
    """An A100 (sm_80) and a module built for sm_90 only (main's old default): the automatic
    choice is triton, not cuda (main picked cuda: a kernel-image error at the first launch),
    and it says so once, naming the architectures."""
    fake_gpu((8, 0), "90")
    with caplog.at_level(logging.INFO, logger="sharpo_kernels"):
        assert _backend.resolve_backend(None, CUDA0, SEG) == "triton"
        assert _backend.resolve_backend(None, torch.device("cuda"), SEG) == "triton"
    lines = [r for r in caplog.records if r.name == "sharpo_kernels"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING, lines
    msg = lines[0].getMessage()
    assert "segment_advantage" in msg and "'triton'" in msg and "sm_90 SASS" in msg, msg
    assert "sm_80" in msg


def test_auto_falls_back_to_torch_without_triton(fake_gpu, monkeypatch):
    fake_gpu((8, 6), "90")
    monkeypatch.setattr(_backend, "triton_available", lambda: False)
    assert _backend.resolve_backend(None, CUDA0, SEG) == "torch"


def test_explicit_cuda_without_code_names_backend_and_archs(fake_gpu):
    fake_gpu((8, 0), "90-real")
    with pytest.raises(ValueError, match=r"^backend: 'cuda' is not available here") as exc:
        _backend.resolve_backend("cuda", CUDA0, SEG)
    assert "sm_90 SASS" in str(exc.value) and "sm_80" in str(exc.value)
    assert "SHARPO_CUDA_ARCHS" in str(exc.value)


@pytest.mark.parametrize("capability,archs,want", [
    ((8, 0), "80-real,86-real,89-real,90", "cuda"),     # the default build: A100
    ((8, 6), "80-real,86-real,89-real,90", "cuda"),     # RTX 30xx / A10 / A40
    ((8, 7), "80-real,86-real,89-real,90", "cuda"),     # sm_86 SASS runs on 8.7
    ((8, 9), "80-real,86-real,89-real,90", "cuda"),     # L4 / L40S / RTX 40xx
    ((9, 0), "80-real,86-real,89-real,90", "cuda"),     # H100 / H200
    ((10, 0), "80-real,86-real,89-real,90", "cuda"),    # newer: the compute_90 PTX
    ((12, 0), "80-real,86-real,89-real,90-real", "triton"),   # no PTX: nothing runs
    ((7, 5), "80-real,86-real,89-real,90", "triton"),   # older than every target
    ((8, 6), "80", "cuda"),                             # sm_80 SASS runs on 8.6
    ((9, 0), "90a-real", "cuda"),                       # arch-specific: that GPU only
    ((10, 0), "90a-real", "triton"),
])
def test_auto_choice_follows_the_compiled_architectures(fake_gpu, capability, archs, want):
    fake_gpu(capability, archs)
    assert _backend.resolve_backend(None, CUDA0, SEG) == want


def test_the_runtime_probe_decides_and_runs_once_per_device(fake_gpu):
    """The compiled list says yes, the CUDA runtime says no (e.g. a driver too old to JIT
    the PTX): fallback. A list that is not explicit ("all", "native") defers to the probe.
    Each device is checked once."""
    calls = fake_gpu((10, 0), "80-real,90", probe=lambda d: 209)
    for _ in range(3):
        assert _backend.resolve_backend(None, CUDA0, SEG) == "triton"
    assert calls == [0]
    ok, why = _backend.native_cuda_code_for(CUDA0)
    assert not ok and "cudaError 209" in why
    calls = fake_gpu((8, 9), "native", probe=lambda d: 0)
    assert _backend.resolve_backend(None, CUDA0, SEG) == "cuda" and calls == [0]
    fake_gpu((8, 9), "native")                        # no list, no probe: refuse to guess
    assert _backend.resolve_backend(None, CUDA0, SEG) == "triton"


def test_parse_and_describe_cuda_archs():
    archs = _backend.parse_cuda_archs("80-real;86-real;89-real;90")
    assert archs == [(80, True, False), (86, True, False), (89, True, False), (90, True, True)]
    assert (_backend.describe_cuda_archs(archs, "")
            == "sm_80, sm_86, sm_89, sm_90 SASS + compute_90 PTX")
    assert _backend.parse_cuda_archs("90-virtual") == [(90, False, True)]
    assert _backend.parse_cuda_archs("all") is None and _backend.parse_cuda_archs("") is None
