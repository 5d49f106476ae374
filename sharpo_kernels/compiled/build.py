"""Compile every variant the launchers can pick, for each architecture, and check the
binaries against the hardware limits: it compiles; registers <= 255; shared memory within
the architecture's per-block limit; no spills (no STL/LDL, no stack). No allow-list.

Identical binaries (same kernel and specialisation) are compiled and analysed once: Triton's
own per-architecture cache dedupes the compile, and the facts are cached by binary hash.
"""
from __future__ import annotations

import importlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

from .variants import ARCHS, KernelVariant

# Kernel modules exposing compile_specs(arch) -> list[KernelVariant].
KERNEL_MODULES = (
    "sharpo_kernels.logprobs.token_triton",
    "sharpo_kernels.logprobs.linear_triton",
    "sharpo_kernels.segment_advantage.triton_kernels",
)

MAX_REGS = 255
# Largest dynamic shared memory one block may use (CUDA programming guide, compute
# capability table): sm_80 163 KB, sm_90 227 KB.
MAX_SHARED = {80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024}
# Per SM: registers, warps, shared memory (for occupancy).
SM_REGS = 65536
SM_WARPS = {80: 64, 86: 48, 89: 48, 90: 64}
SM_SHARED = {80: 164 * 1024, 86: 100 * 1024, 89: 100 * 1024, 90: 228 * 1024}
SM_BLOCKS = {80: 32, 86: 16, 89: 24, 90: 32}


@dataclass
class Compiled:
    variant: KernelVariant
    arch: int
    binary: str = ""                    # Triton's hash of the compiled kernel
    shared: int = 0                     # bytes of shared memory per block (Triton metadata)
    facts: Optional[object] = None      # sass.SassFacts
    error: str = ""
    problems: list = field(default_factory=list)

    @property
    def occupancy_warps(self) -> int:
        """Resident warps per SM allowed by registers, shared memory and the warp limit."""
        if self.facts is None:
            return 0
        w = self.variant.num_warps
        regs_warp = ((max(self.facts.regs, 1) * 32 + 255) // 256) * 256
        by_regs = SM_REGS // (regs_warp * w)
        by_shared = SM_SHARED[self.arch] // (self.shared + 1024)   # 1 KB reserved per block
        blocks = min(by_regs, by_shared, SM_WARPS[self.arch] // w, SM_BLOCKS[self.arch])
        return blocks * w


def variants_for(arch: int, modules=KERNEL_MODULES) -> list:
    out = []
    for name in modules:
        out += importlib.import_module(name).compile_specs(arch)
    return out


def _check(c: Compiled) -> list:
    f = c.facts
    probs = []
    if f.regs > MAX_REGS:
        probs.append(f"{f.regs} registers > {MAX_REGS}")
    if c.shared > MAX_SHARED[c.arch]:
        probs.append(f"{c.shared} B shared > {MAX_SHARED[c.arch]} B (sm_{c.arch})")
    if f.spill_stores or f.spill_loads or f.stack or f.local:
        probs.append(f"spills: {f.spill_stores} STL, {f.spill_loads} LDL, stack {f.stack} B, "
                     f"local {f.local} B")
    return probs


def compile_variants(variants, arch: int, cache_dir: str, log=None) -> list:
    """[Compiled] for `variants` (KernelVariant) at sm_<arch>, checked, in this process."""
    from . import sass
    from .driver import compiling_for
    os.makedirs(cache_dir, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    facts_by_hash: dict = {}
    out = []
    with compiling_for(arch):
        for v in variants:
            c = Compiled(v, arch)
            t0 = time.time()
            try:
                k = v.kernel.warmup(*v.args, grid=v.grid, num_warps=v.num_warps,
                                    num_stages=v.num_stages, **v.constexprs)
            except Exception as exc:          # a compile failure is a finding
                c.error = f"{type(exc).__name__}: {str(exc)[:400]}"
                c.problems = [f"does not compile: {c.error}"]
                out.append(c)
                continue
            c.binary = k.metadata.hash
            c.shared = int(k.metadata.shared)
            if c.binary not in facts_by_hash:
                path = os.path.join(cache_dir, f"sm{arch}-{c.binary}.cubin")
                with open(path, "wb") as fh:
                    fh.write(k.asm["cubin"])
                facts_by_hash[c.binary] = sass.sass_facts(path)
                if log:
                    log(f"sm_{arch} {v.label}: compiled in {time.time() - t0:.1f} s")
            c.facts = facts_by_hash[c.binary]
            c.problems = _check(c)
            out.append(c)
    return out


def _compile_arch(arch: int, modules, cache_dir: str, log=None) -> list:
    from .driver import compiling_for
    with compiling_for(arch):
        variants = variants_for(arch, modules)
    return compile_variants(variants, arch, cache_dir, log)


def _worker(arch: int, modules, cache_dir: str) -> list:
    # runs in a spawned process: return what pickles (the variants hold JIT functions)
    return [(c.binary, c.shared, c.facts, c.error, c.problems)
            for c in _compile_arch(arch, modules, cache_dir)]


def compile_all(archs=ARCHS, modules=KERNEL_MODULES, cache_dir: Optional[str] = None,
                log=None, jobs: int = 1) -> list:
    """[Compiled] for every variant of every module at every arch, checked. jobs > 1
    compiles the architectures in that many spawned processes at once."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("compile_all needs TRITON_INTERPRET unset (the interpreter "
                           "replaces the compiler); run it in a fresh process")
    cache_dir = cache_dir or tempfile.mkdtemp(prefix="sharpo-triton-cache-")
    archs = list(archs)
    if jobs <= 1 or len(archs) == 1:
        out = []
        for arch in archs:
            out += _compile_arch(arch, modules, cache_dir, log)
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(archs)), mp_context=ctx) as pool:
        futures = [pool.submit(_worker, a, tuple(modules), os.path.join(cache_dir, f"sm{a}"))
                   for a in archs]
        out = []
        for arch, fut in zip(archs, futures):
            rows = fut.result()
            from .driver import compiling_for
            with compiling_for(arch):
                variants = variants_for(arch, modules)
            if len(rows) != len(variants):
                raise RuntimeError(f"sm_{arch}: worker compiled {len(rows)} variants, "
                                   f"expected {len(variants)}")
            for v, (binary, shared, facts, error, problems) in zip(variants, rows):
                c = Compiled(v, arch, binary, shared, facts, error, problems)
                out.append(c)
    return out
