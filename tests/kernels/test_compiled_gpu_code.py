"""Every Triton kernel variant the launchers can pick, compiled for sm_80 and sm_90 on this
CPU-only machine (sharpo_kernels/compiled, docs/gpu_kernels.md): it compiles, uses at most
255 registers, fits the architecture's shared memory per block, and does not spill. No
allow-list. The compiler replaces the interpreter only in a fresh process without
TRITON_INTERPRET (the test suite's conftest sets it for the kernel tests)."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compiler_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")   # a fresh cache per run
    return env


def _triton_compiles() -> bool:
    try:
        from sharpo_kernels.compiled.sass import cuobjdump
        cuobjdump()
        return True
    except Exception:           # no triton, or a triton without its NVIDIA backend
        return False


pytestmark = pytest.mark.skipif(not _triton_compiles(),
                                reason="triton's NVIDIA backend (ptxas, cuobjdump) is absent")


def test_every_variant_compiles_within_limits(tmp_path):
    res = subprocess.run([sys.executable, "-m", "sharpo_kernels.compiled", "--quiet",
                          "--jobs", "2"], cwd=ROOT, env=_compiler_env(tmp_path),
                         capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert "distinct binaries" in out, out[-4000:]
    assert res.returncode == 0, out[-6000:]


def test_the_check_catches_a_spilling_variant(tmp_path):
    """The same check on a deliberately oversized block (8192 logits per thread)."""
    code = textwrap.dedent("""
        import dataclasses, os, sys, torch
        from sharpo_kernels.compiled.build import compile_variants
        from sharpo_kernels.logprobs import token_triton
        spec = [s for s in token_triton.compile_specs(90) if s.kernel is
                token_triton._token_fwd_kernel][0]
        cols = spec.constexprs["COLS"]
        huge = dataclasses.replace(spec, num_warps=1,
                                   constexprs={**spec.constexprs, "ROWS": 8192 // cols})
        (c,) = compile_variants([huge], 90, os.environ["TRITON_CACHE_DIR"])
        print("PROBLEMS", c.problems)
        sys.exit(0 if any("spills" in p or "registers" in p for p in c.problems) else 3)
    """)
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_compiler_env(tmp_path),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
