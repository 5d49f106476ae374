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
            built with nvcc (`native_has_cuda()`) and holds code for the device's
            architecture (`native_cuda_code_for(device)`: SASS of the same major and a
            minor <= the device's, or PTX of an architecture <= the device's, confirmed by
            the CUDA runtime; checked once per device). segment_advantage.

`OP_BACKENDS[op]` lists an op's backends in its automatic order. `resolve_backend(name,
device, available)` picks one: the caller's explicit choice (checked), else the first of
`available` that can run on `device`. It raises a ValueError naming the `backend` argument
for unknown names and for backends that cannot run here (for `cuda` on a GPU the module
has no code for, the message names the architectures it holds). The automatic choice on a
CUDA device says which backend it took, and why `cuda` was skipped, in one log line per
op and device (logger "sharpo_kernels": INFO when it takes `cuda`, WARNING when it falls
back). `available_backends()` reports what this machine can run.

The native module is a top-level module (so an installed copy is found even when the
`sharpo_kernels` source tree shadows the installed package); it is imported lazily, once.
"""
from __future__ import annotations

import importlib
import logging
import os
import re
from typing import Iterable, Optional, Sequence

import torch

BACKENDS = ("torch", "cpp", "cpu", "triton", "cuda")

# Each op's backends, in the order the automatic choice tries them.
OP_BACKENDS = {
    "segment_advantage": ("cpp", "cuda", "triton", "torch"),
    "token_logprobs": ("cpu", "triton", "torch"),
    "linear_logprobs": ("cpu", "triton", "torch"),
    "linear_policy_loss": ("cpu", "triton", "torch"),
}

_NATIVE_UNSET = object()
_native = _NATIVE_UNSET
_native_error: Optional[str] = None
_triton_ok: Optional[bool] = None
_triton_error: Optional[str] = None
_cuda_code: dict[int, tuple[bool, str]] = {}      # device index -> native_cuda_code_for
_logged_choices: set = set()                        # (device index, ops) already logged
_log = logging.getLogger("sharpo_kernels")


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


def parse_cuda_archs(spec: str) -> Optional[list[tuple[int, bool, bool]]]:
    """CMAKE_CUDA_ARCHITECTURES as baked into the module ("80-real,86-real,89-real,90",
    ';' or ',' separated) -> [(arch, has SASS, has PTX)], e.g. (90, True, True). NN-real:
    SASS only; NN-virtual: PTX only; NN: both; an arch-specific NNa/NNf: code for exactly
    that GPU (stored as -NN, never matched by another minor). None when the list is not
    explicit ("all", "native", empty): then only the CUDA runtime can tell."""
    out = []
    for tok in re.split(r"[;,]", spec.strip()):
        tok = tok.strip()
        m = re.fullmatch(r"(\d+)([af]?)(?:-(real|virtual))?", tok)
        if m is None:
            return None
        arch, kind = int(m.group(1)), m.group(3)
        if m.group(2):              # sm_90a etc.: that exact GPU only (see cuda_archs_hold)
            arch = -arch
        out.append((arch, kind != "virtual", kind != "real"))
    return out or None


def cuda_archs_hold(archs: list[tuple[int, bool, bool]], capability: tuple[int, int]) -> bool:
    """True when a module built for `archs` (parse_cuda_archs) runs on a GPU of compute
    capability (major, minor): SASS for major.m runs on major.minor with m <= minor; PTX for
    an arch <= the device's is JIT-compiled by the driver."""
    major, minor = capability
    sm = 10 * major + minor
    for arch, sass, ptx in archs:
        if arch < 0:                # arch-specific code: the exact GPU only
            if -arch == sm:
                return True
            continue
        if sass and arch // 10 == major and arch % 10 <= minor:
            return True
        if ptx and arch <= sm:
            return True
    return False


def describe_cuda_archs(archs: Optional[list[tuple[int, bool, bool]]], spec: str) -> str:
    """'sm_80, sm_86, sm_89, sm_90 SASS + compute_90 PTX' (or the raw spec)."""
    if archs is None:
        return f"CMAKE_CUDA_ARCHITECTURES={spec!r}"
    name = lambda a: f"{-a}a" if a < 0 else str(a)  # noqa: E731
    sass = ", ".join(f"sm_{name(a)}" for a, s, _ in archs if s)
    ptx = ", ".join(f"compute_{name(a)}" for a, _, p in archs if p)
    return " + ".join(x for x in (sass and f"{sass} SASS", ptx and f"{ptx} PTX") if x)


def _device_index(device: torch.device) -> int:
    device = torch.device(device)
    return device.index if device.index is not None else torch.cuda.current_device()


def native_cuda_code_for(device: torch.device) -> tuple[bool, str]:
    """(True, "") when `_sharpo_native`'s CUDA kernels hold code that runs on CUDA device
    `device`, else (False, why, naming the architectures the module holds). Checked once
    per device: the compiled architecture list (`cuda_archs()`) against the device's
    compute capability, then the CUDA runtime itself (`cuda_kernel_image_status`:
    cudaFuncGetAttributes fails with cudaErrorNoKernelImageForDevice otherwise)."""
    idx = _device_index(device)
    if idx in _cuda_code:
        return _cuda_code[idx]
    mod = native_module()
    major, minor = torch.cuda.get_device_capability(idx)
    here = f"cuda:{idx} (sm_{major}{minor})"
    spec = mod.cuda_archs() if hasattr(mod, "cuda_archs") else None
    archs = parse_cuda_archs(spec) if spec else None
    held = describe_cuda_archs(archs, spec) if spec else "an unknown architecture list"
    ok, why = True, ""
    if archs is not None and not cuda_archs_hold(archs, (major, minor)):
        ok, why = False, (f"_sharpo_native holds CUDA code for {held}, none of which runs on "
                          f"{here}; rebuild with SHARPO_CUDA_ARCHS (docs/toolchain.md)")
    probe = getattr(mod, "cuda_kernel_image_status", None)
    if ok and probe is not None:
        err = int(probe(idx))
        if err != 0:
            ok, why = False, (f"the CUDA runtime finds no kernel image of _sharpo_native for "
                              f"{here} (cudaError {err}); the module holds {held}; rebuild "
                              f"with SHARPO_CUDA_ARCHS (docs/toolchain.md)")
    elif ok and archs is None:
        ok, why = False, (f"_sharpo_native does not say which architectures it holds "
                          f"({held}); rebuild it (pip install .)")
    _cuda_code[idx] = (ok, why)
    return ok, why


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
        return native_cuda_code_for(device)
    return False, f"unknown backend {name!r}"


def resolve_backend(name: Optional[str], device: torch.device,
                    available: Sequence[str]) -> str:
    """Backend to run a kernel with.

    name: the user's choice, or None for automatic. device: where the inputs live.
    available: the backends this kernel implements, in order of preference.
    """
    if name is None:
        skipped = []
        for cand in available:
            ok, why = backend_runs_on(cand, device)
            if ok:
                _log_choice(cand, skipped, device, available)
                return cand
            skipped.append((cand, why))
        raise ValueError(f"backend: none of {list(available)} can run on {device} tensors")
    if not isinstance(name, str):
        raise TypeError(f"backend: expected a str or None, got {type(name).__name__}")
    if name not in available:
        raise ValueError(f"backend: unknown backend {name!r}; choose one of {list(available)}")
    ok, why = backend_runs_on(name, device)
    if not ok:
        raise ValueError(f"backend: {name!r} is not available here: {why}")
    return name


def _log_choice(chosen: str, skipped: list, device: torch.device,
                available: Sequence[str]) -> None:
    """One log line per (CUDA device, op) for the automatic choice of an op with a `cuda`
    backend: which backend it took, and why `cuda` was skipped when it was."""
    device = torch.device(device)
    if device.type != "cuda" or "cuda" not in available:
        return
    key = (_device_index(device), tuple(available))
    if key in _logged_choices:
        return
    _logged_choices.add(key)
    ops = [op for op, backs in OP_BACKENDS.items() if tuple(backs) == tuple(available)]
    what = ops[0] if ops else f"backends {list(available)}"
    where = f"cuda:{key[0]}"
    why = dict(skipped).get("cuda")
    if why is None:
        _log.info("sharpo_kernels: %s on %s uses backend %r", what, where, chosen)
    else:
        _log.warning("sharpo_kernels: %s on %s uses backend %r, not 'cuda': %s", what, where,
                     chosen, why)


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
