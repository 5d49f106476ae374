"""A stand-in Triton driver so that `JITFunction.warmup` compiles for a chosen NVIDIA
architecture on a machine without a GPU or a CUDA driver (triton 3.7: the compiler needs
only `get_current_target`, a device id for its per-device cache and a stream)."""
from __future__ import annotations

import contextlib

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase
from triton.runtime import driver as _driver


class StandInDriver(DriverBase):
    """Reports GPUTarget("cuda", arch, 32); launches are impossible (nothing to launch on)."""

    def __init__(self, arch: int):
        super().__init__()
        self.arch = int(arch)

    @classmethod
    def is_active(cls):
        return False

    def map_python_to_cpp_type(self, ty: str) -> str:
        from triton.backends.nvidia.driver import ty_to_cpp
        return ty_to_cpp(ty)

    def get_current_target(self):
        return GPUTarget("cuda", self.arch, 32)

    def get_current_device(self):
        return self.arch              # one compile cache per architecture

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        import torch
        return torch.device("cpu")

    def get_benchmarker(self):
        raise RuntimeError("the stand-in driver compiles only; it cannot run kernels")


@contextlib.contextmanager
def compiling_for(arch: int):
    """Within the block, Triton compiles for sm_<arch> whatever the machine has."""
    previous = _driver._active
    _driver.set_active(StandInDriver(arch))
    try:
        yield
    finally:
        _driver._active = previous
