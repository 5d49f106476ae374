"""Count what one call of an op costs a GPU, measured on CPU tensors (docs/gpu_kernels.md):

    count_dispatch(fn, *args, **kwargs) -> DispatchCount(launches, host_reads, ops, result)

- launches: torch ops that would launch a kernel on CUDA (every dispatched op except
  allocations and views, which only touch metadata), plus one per Triton kernel launch
  (counted at the interpreter's grid executor under TRITON_INTERPRET=1, whose own copies of
  the arguments are not counted, or at JITFunction.run when compiled). Calls into the
  native module (cpp, cuda backends) are not seen.
- host_reads: reads of device memory by the host, each a synchronisation on CUDA:
  `.item()`/`bool()`/`int()`/`float()` (the `_local_scalar_dense` op) and `.tolist()`.

A `TorchDispatchMode` sees every op below autograd, so the count does not depend on the
backend's Python structure. Used by tests/kernels/test_segment_advantage_dispatch.py and the
benchmarks to report launches and host reads per call.
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import Any, NamedTuple
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DispatchCount", "count_dispatch"]

# Allocation ops: they reserve memory and launch nothing (a caching allocator on CUDA).
_ALLOCATIONS = {"empty", "empty_strided", "empty_like", "lift_fresh"}
_HOST_READ_OPS = {"_local_scalar_dense"}


class DispatchCount(NamedTuple):
    launches: int          # ops that launch a kernel on CUDA + Triton kernel launches
    host_reads: int        # device-to-host reads (a synchronisation each on CUDA)
    ops: tuple             # names of the launching ops, in order
    result: Any            # what fn returned


def _is_view(func) -> bool:
    """A view op (slice, select, expand, as_strided, detach, ...): its result aliases its
    input and nothing is written."""
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                 for r in returns)


class _Counter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.host_reads = 0
        self.quiet = 0          # > 0 inside a Triton launch: the interpreter's own copies

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not self.quiet:
            if name in _HOST_READ_OPS:
                self.host_reads += 1
            elif name not in _ALLOCATIONS and not _is_view(func):
                self.ops.append(name)
        return func(*args, **(kwargs or {}))


def _counted(launch, counter):
    """A Triton launch (interpreter grid executor, or compiled JITFunction.run) counted as
    one, with the ops it dispatches itself (the interpreter's argument copies) ignored."""
    def counted_launch(self, *a, **k):
        if k.get("warmup"):
            return launch(self, *a, **k)
        counter.ops.append(f"triton:{getattr(self.fn, '__name__', 'kernel')}")
        counter.quiet += 1
        try:
            return launch(self, *a, **k)
        finally:
            counter.quiet -= 1
    return counted_launch


def count_dispatch(fn, *args, **kwargs) -> DispatchCount:
    """Run fn(*args, **kwargs) once and count its launching ops and host reads."""
    counter = _Counter()
    tolist = torch.Tensor.tolist

    def counted_tolist(self):
        if not counter.quiet:
            counter.host_reads += 1
        return tolist(self)

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(torch.Tensor, "tolist", counted_tolist))
        try:
            from triton.runtime import interpreter
        except ImportError:
            interpreter = None
        if interpreter is not None:
            from triton.runtime.jit import JITFunction
            for cls, method in ((interpreter.GridExecutor, "__call__"), (JITFunction, "run")):
                stack.enter_context(mock.patch.object(
                    cls, method, _counted(getattr(cls, method), counter)))
        stack.enter_context(counter)
        result = fn(*args, **kwargs)
    return DispatchCount(len(counter.ops), counter.host_reads, tuple(counter.ops), result)
