"""Facts read from a cubin with `cuobjdump` (shipped with triton in backends/nvidia/bin):
registers, stack, spill instructions, and the instruction counts of its loops.

Loops: a branch to a lower address closes a loop whose body runs from the target to the
branch (inclusive). Branches to one target are merged (the widest wins); a loop's own count
excludes the loops nested in it. NOPs (alignment padding) are not counted.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field

_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_TARGET = re.compile(r"0x([0-9a-f]+)")
_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def cuobjdump() -> str:
    """Path of triton's cuobjdump."""
    import triton
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    if not os.path.exists(path):
        raise FileNotFoundError(f"cuobjdump not found at {path} (triton's NVIDIA backend)")
    return path


@dataclass
class Loop:
    start: int
    end: int
    own: int = 0                       # instructions in the body, nested loops excluded
    opcodes: dict = field(default_factory=dict)


@dataclass
class SassFacts:
    regs: int
    stack: int
    local: int
    spill_stores: int                  # STL instructions
    spill_loads: int                   # LDL instructions
    instructions: int                  # whole kernel, NOPs excluded
    outside_loops: int
    loops: list
    mufu: int                          # MUFU instructions, whole kernel
    atomics_sass: int                  # RED / ATOM / ATOMG instructions
    fences: int                        # MEMBAR instructions


def _run(args) -> str:
    res = subprocess.run(args, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {res.stderr.strip()[:500]}")
    return res.stdout


def parse_instructions(sass: str) -> list:
    """[(address, opcode, operands)] of one kernel's SASS text."""
    out = []
    for line in sass.splitlines():
        m = _INSTR.search(line)
        if m:
            out.append((int(m.group(1), 16), m.group(3), m.group(4).strip()))
    return out


def find_loops(instrs: list) -> list:
    """Loops (sorted by start) from backward branches; own counts exclude nested loops."""
    spans: dict = {}
    for addr, op, operands in instrs:
        if op.split(".")[0] != "BRA":
            continue
        t = _TARGET.search(operands)
        if t and int(t.group(1), 16) < addr:
            start = int(t.group(1), 16)
            spans[start] = max(spans.get(start, addr), addr)
    loops = [Loop(s, e) for s, e in sorted(spans.items())]
    for addr, op, _ in instrs:
        if op.startswith("NOP"):
            continue
        inner = [lp for lp in loops if lp.start <= addr <= lp.end]
        if inner:
            lp = min(inner, key=lambda x: x.end - x.start)      # the innermost
            lp.own += 1
            key = op.split(".")[0]
            lp.opcodes[key] = lp.opcodes.get(key, 0) + 1
    return loops


def sass_facts(cubin_path: str) -> SassFacts:
    tool = cuobjdump()
    res = _RES.search(_run([tool, "-res-usage", cubin_path]))
    if res is None:
        raise RuntimeError(f"cuobjdump -res-usage: no resource line for {cubin_path}")
    regs, stack, _static_shared, local = (int(g) for g in res.groups())
    instrs = parse_instructions(_run([tool, "-sass", cubin_path]))
    if not instrs:
        raise RuntimeError(f"cuobjdump -sass: no instructions in {cubin_path}")
    ops = [op for _, op, _ in instrs if not op.startswith("NOP")]
    loops = find_loops(instrs)
    in_loops = sum(lp.own for lp in loops)
    # the kernel's trailing `BRA self` (the end-of-program trap loop) is not a real loop
    loops = [lp for lp in loops if lp.end > lp.start]
    base = [op.split(".")[0] for op in ops]
    return SassFacts(
        regs=regs, stack=stack, local=local,
        spill_stores=base.count("STL"), spill_loads=base.count("LDL"),
        instructions=len(ops), outside_loops=len(ops) - in_loops, loops=loops,
        mufu=base.count("MUFU"),
        atomics_sass=sum(base.count(k) for k in ("RED", "ATOM", "ATOMG", "REDG")),
        fences=base.count("MEMBAR"))
