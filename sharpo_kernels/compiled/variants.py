"""KernelVariant: one compiled configuration of a Triton kernel, described without tensors.

Each Triton kernel module exposes `compile_specs(arch) -> list[KernelVariant]`, built from the
same configuration function its launcher calls (block sizes, warps, stages, constexpr flags
at the realistic shapes of `SHAPES`), so that the compile check (build.py) follows the
launchers when they change.

`args` are the kernel's positional arguments as the launcher passes them, with every tensor
replaced by its torch dtype (Triton's `warmup` turns a dtype into a 16-byte aligned mock
pointer) and every scalar given by value (ints specialise on divisibility by 16 and on 1,
exactly as at a real launch).

The traffic fields feed the throughput model (model.py) and describe one launch:
    elements     what "per element" means (e.g. N*V logits), for instructions per element
    bytes        HBM bytes the kernel must move (minimal: each input read once, outputs once)
    mma_flops    tensor-core FLOPs (2 per multiply-add), 0 for elementwise kernels
    atomics      atomic operations issued (element count), 0 when none
    loop_trips   trips of each SASS loop per program, in the order the loops appear in the
                 binary (outermost first when nested); () for straight-line kernels
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The shapes of docs/gpu_kernels.md: Qwen2.5 and Llama-style heads.
N_TOKENS = 8192
VOCABS = (151936, 32000)
HIDDENS = (896, 4096)
ARCHS = (80, 90)


@dataclass(frozen=True)
class KernelVariant:
    kernel: Any                    # the @triton.jit function
    args: tuple                    # torch dtypes for pointers, Python scalars by value
    constexprs: dict               # constexpr keyword arguments
    num_warps: int
    num_stages: int
    grid: tuple
    label: str                     # "token_fwd bf16 V=151936 entropy"
    elements: int = 0
    bytes: int = 0
    mma_flops: int = 0
    atomics: int = 0
    mufu_per_element: float = 0.0  # transcendental ops per element (exp2, log2, rcp)
    loop_trips: tuple = ()
    extra: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.kernel.fn.__name__

    @property
    def programs(self) -> int:
        total = 1
        for g in self.grid:
            total *= int(g)
        return total
