"""Backend selection for every kernel of `sharpo_kernels`: the one place that knows which
op implements which backend and where each backend can run.

Backends (implementations of an op):

    torch   plain PyTorch, the readable reference; any device. Every op.
    cpp     the C++ CPU kernels of the native module `_sharpo_native` (csrc/); CPU tensors.
            segment_advantage.
    cpu     the chunked CPU autograd path (sharpo_kernels/logprobs/token_cpu.py, linear_cpu.py); CPU tensors.
            token_logprobs, linear_logprobs.
    triton  Triton kernels; CUDA tensors, or CPU tensors when TRITON_INTERPRET=1 was set
            before triton was imported (the CPU test setup, see tests/conftest.py). Every op.
    cuda    the CUDA kernels of `_sharpo_native`; CUDA tensors, only when the module was
            built with nvcc (`native_has_cuda()`). segment_advantage.

`OP_BACKENDS[op]` lists an op's backends in its automatic order. `resolve_backend(name,
device, available)` picks one: the caller's explicit choice (checked), else the first of
`available` that can run on `device`. It raises a ValueError naming the `backend` argument
for unknown names and for backends that cannot run here. `available_backends()` reports
what this machine can run.

The native module is a top-level module (so an installed copy is found even when the
`sharpo_kernels` source tree shadows the installed package); it is imported lazily, once.
"""
from __future__ import annotations

import importlib
import os
from typing import Iterable, Optional, Sequence

import torch

BACKENDS = ("torch", "cpp", "cpu", "triton", "cuda")

# Each op's backends, in the order the automatic choice tries them.
OP_BACKENDS = {
    "segment_advantage": ("cpp", "cuda", "triton", "torch"),
    "token_logprobs": ("cpu", "triton", "torch"),
    "linear_logprobs": ("cpu", "triton", "torch"),
}

_NATIVE_UNSET = object()
_native = _NATIVE_UNSET
_native_error: Optional[str] = None
_triton_ok: Optional[bool] = None
_triton_error: Optional[str] = None


def native_module():
    """The `_sharpo_native` extension module, or None when it is not built/installed."""
    global _native, _native_error
    if _native is _NATIVE_UNSET:
        try:
            _native = importlib.import_module("_sharpo_native")
        except ImportError as exc:  # not built: the torch backend still works
            _native, _native_error = None, f"{type(exc).__name__}: {exc}"
    return _native


def native_has_cuda() -> bool:
    """True when `_sharpo_native` was compiled with its CUDA kernels (nvcc was found)."""
    mod = native_module()
    return bool(mod is not None and mod.has_cuda())


def triton_interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def triton_available() -> bool:
    """True when `import triton` works (it needs numpy at run time, see docs/toolchain.md)."""
    global _triton_ok, _triton_error
    if _triton_ok is None:
        try:
            importlib.import_module("triton")
            importlib.import_module("triton.language")
            _triton_ok = True
        except Exception as exc:  # ImportError, or a broken install raising at import
            _triton_ok, _triton_error = False, f"{type(exc).__name__}: {exc}"
    return _triton_ok


def backend_runs_on(name: str, device: torch.device) -> tuple[bool, str]:
    """(can run, reason when it cannot) for backend `name` on tensors of `device`."""
    dev = torch.device(device).type
    if name == "torch":
        return True, ""
    if name == "cpp":
        if native_module() is None:
            return False, f"the native module _sharpo_native is not built ({_native_error})"
        if dev != "cpu":
            return False, f"it runs on CPU tensors, got {dev} tensors"
        return True, ""
    if name == "cpu":
        if dev != "cpu":
            return False, f"it runs on CPU tensors, got {dev} tensors"
        return True, ""
    if name == "triton":
        if not triton_available():
            return False, f"triton cannot be imported ({_triton_error})"
        if dev == "cuda" or (dev == "cpu" and triton_interpreting()):
            return True, ""
        return False, (f"it runs on CUDA tensors (or CPU tensors with TRITON_INTERPRET=1), "
                       f"got {dev} tensors")
    if name == "cuda":
        if not native_has_cuda():
            return False, "_sharpo_native was built without CUDA (nvcc not found at build time)"
        if dev != "cuda":
            return False, f"it runs on CUDA tensors, got {dev} tensors"
        return True, ""
    return False, f"unknown backend {name!r}"


def resolve_backend(name: Optional[str], device: torch.device,
                    available: Sequence[str]) -> str:
    """Backend to run a kernel with.

    name: the user's choice, or None for automatic. device: where the inputs live.
    available: the backends this kernel implements, in order of preference.
    """
    if name is None:
        for cand in available:
            if backend_runs_on(cand, device)[0]:
                return cand
        raise ValueError(f"backend: none of {list(available)} can run on {device} tensors")
    if not isinstance(name, str):
        raise TypeError(f"backend: expected a str or None, got {type(name).__name__}")
    if name not in available:
        raise ValueError(f"backend: unknown backend {name!r}; choose one of {list(available)}")
    ok, why = backend_runs_on(name, device)
    if not ok:
        raise ValueError(f"backend: {name!r} is not available here: {why}")
    return name


def usable_backends(device: torch.device, available: Iterable[str] = BACKENDS) -> list[str]:
    """The subset of `available` that can run on tensors of `device`, in order."""
    return [b for b in available if backend_runs_on(b, device)[0]]


def _machine_devices() -> list[torch.device]:
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    return devices


def available_backends(op: Optional[str] = None) -> dict[str, bool]:
    """{backend: usable here} for every backend name of BACKENDS.

    op: None, or one of OP_BACKENDS ("segment_advantage", "token_logprobs",
    "linear_logprobs"). With an op, a backend is True when that op implements it and it can
    run on some device of this machine (CPU tensors, or CUDA tensors when a GPU is
    visible), i.e. when `op(..., backend=name)` succeeds on tensors of that device. Without
    an op, a backend is True when it is usable for at least one op.
    """
    if op is None:
        per_op = [available_backends(o) for o in OP_BACKENDS]
        return {b: any(av[b] for av in per_op) for b in BACKENDS}
    if not isinstance(op, str):
        raise TypeError(f"op: expected a str or None, got {type(op).__name__}")
    if op not in OP_BACKENDS:
        raise ValueError(f"op: unknown op {op!r}; choose one of {list(OP_BACKENDS)}")
    devices = _machine_devices()
    return {b: b in OP_BACKENDS[op] and any(backend_runs_on(b, d)[0] for d in devices)
            for b in BACKENDS}
