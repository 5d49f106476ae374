"""Throughput model of a compiled variant on a given GPU: the time each resource needs at
the variant's shape; the largest is the bound (docs/gpu_kernels.md, "The model").

    issue    warp instructions executed / (SMs x 4 schedulers x clock): each scheduler
             issues at most one warp instruction per cycle. Executed instructions are read
             from the SASS: straight-line code once per program, each loop's own body times
             its trips (KernelVariant.loop_trips), times the warps of a program.
    mufu     transcendental thread ops (MUFU.EX2/LG2/RCP) / (16 per SM per cycle).
    memory   the variant's minimal HBM bytes / sustained bandwidth.
    tensor   mma FLOPs / dense tensor-core peak (bf16/fp16), or / the FP32 FMA peak for
             fp32 IEEE dots (they run on the FMA units).

Not modelled (cannot be known without a GPU): latency and occupancy stalls, L2 hit rates,
the half-rate pipes (integer, FMNMX, conversions), atomic throughput in L2, clocks under
load. So the bound is a floor on the time, not a prediction.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Device:
    name: str
    arch: int
    sms: int
    clock_ghz: float          # boost clock
    hbm_gbs: float            # sustained bandwidth used by the model (GB/s)
    hbm_datasheet_gbs: float
    tensor_tflops: float      # dense bf16/fp16 tensor cores
    fp32_tflops: float        # FP32 FMA (non-tensor)
    mufu_per_sm_clk: int = 16


# Datasheet figures; sustained HBM is taken as about 90% of the datasheet bandwidth.
H200 = Device("H200 SXM", 90, 132, 1.98, 4300.0, 4800.0, 989.0, 67.0)
A100 = Device("A100 SXM4 80GB", 80, 108, 1.41, 1840.0, 2039.0, 312.0, 19.5)
DEVICES = (H200, A100)


@dataclass
class Bound:
    issue_s: Optional[float]
    mufu_s: Optional[float]
    memory_s: float
    tensor_s: float
    instr_per_element: Optional[float]     # executed thread instructions / elements
    hot_loop_instr: int                    # SASS instructions of the largest loop body
    hot_loop_per_element: Optional[float]  # ... per element it covers per thread

    @property
    def bound_s(self) -> float:
        return max(x for x in (self.issue_s, self.mufu_s, self.memory_s, self.tensor_s)
                   if x is not None)

    @property
    def bound_by(self) -> str:
        named = {"issue": self.issue_s, "MUFU": self.mufu_s, "memory": self.memory_s,
                 "tensor": self.tensor_s}
        return max((k for k, v in named.items() if v is not None), key=lambda k: named[k])


def _executed(facts, variant, key=None) -> Optional[float]:
    """Warp instructions (or only opcode `key`) one program executes."""
    loops = facts.loops
    trips = list(variant.loop_trips)
    if not loops:
        per_loop = []
    elif len(loops) == len(trips):
        per_loop = list(zip(loops, trips))
    elif trips:        # the compiler split or moved loops: the largest body takes the trips
        hot = max(loops, key=lambda lp: lp.own)
        per_loop = [(lp, max(trips) if lp is hot else 0) for lp in loops]
    else:
        return None
    def count(lp):
        return lp.own if key is None else lp.opcodes.get(key, 0)
    total = facts.instructions if key is None else facts.mufu
    straight = total - sum(count(lp) for lp in loops)
    return straight + sum(count(lp) * t for lp, t in per_loop)


def bound(compiled, device: Device, fp32_dot: bool = False) -> Bound:
    v, f = compiled.variant, compiled.facts
    clock = device.clock_ghz * 1e9
    per_prog = _executed(f, v)
    issue = None if per_prog is None else \
        per_prog * v.num_warps * v.programs / (device.sms * 4 * clock)
    mufu_prog = _executed(f, v, "MUFU")
    mufu = None if mufu_prog is None else \
        mufu_prog * v.num_warps * 32 * v.programs / (device.sms * device.mufu_per_sm_clk * clock)
    memory = v.bytes / (device.hbm_gbs * 1e9)
    peak = device.fp32_tflops if fp32_dot else device.tensor_tflops
    tensor = v.mma_flops / (peak * 1e12)
    ipe = None if per_prog is None or not v.elements else \
        per_prog * v.num_warps * 32 * v.programs / v.elements
    hot = max(f.loops, key=lambda lp: lp.own) if f.loops else None
    loop_elems = v.extra.get("loop_elements")
    hpe = None
    if hot is not None and loop_elems:
        hpe = hot.own / (loop_elems / (32 * v.num_warps))
    return Bound(issue, mufu, memory, tensor, ipe, hot.own if hot else 0, hpe)
