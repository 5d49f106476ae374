"""The linear_logprobs kernels as a GPU would run them, compiled on this CPU-only machine:
Triton compiles for a named target without a driver (triton.compile with GPUTarget), and
cuobjdump (shipped in triton's backends/nvidia/bin) reads the cubin. Run in a subprocess
without TRITON_INTERPRET. docs/gpu_kernels.md ("linear_logprobs backward").

- the backward's d-logits kernel, every flag on, bf16 on sm_90 and fp32 (IEEE products,
  FMA units) on sm_80: no atomics, no GPU-scope fences, no spills, <= 255 registers;
- allow_tf32 reaches the compiled code: the fp32 forward with TF32 runs `mma` on TF32
  operands, without it none (and no spills)."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _nvidia_tools():
    spec = importlib.util.find_spec("triton")
    if spec is None:
        return None
    bin_dir = Path(spec.origin).parent / "backends" / "nvidia" / "bin"
    ok = (bin_dir / "ptxas").exists() and (bin_dir / "cuobjdump").exists()
    return bin_dir if ok else None


pytestmark = pytest.mark.skipif(_nvidia_tools() is None,
                                reason="triton's NVIDIA backend (ptxas, cuobjdump) not installed")

SCRIPT = r'''
import inspect, json, re, subprocess, sys, tempfile, os
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from sharpo_kernels.logprobs import linear_triton as lt, linear_backward_triton as lb

BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")

def compile_one(fn, dtype, consts, warps, arch):
    sig, attrs = {}, {}
    consts = dict(consts)
    for p in fn.params:                 # constexprs left out: their defaults
        if p.is_constexpr and p.name not in consts and p.default is not inspect.Parameter.empty:
            consts[p.name] = p.default
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name] = "constexpr"
        elif name.endswith("_ptr"):
            sig[name] = ("*" + dtype if name in ("h_ptr", "w_ptr", "b_ptr", "dz_ptr")
                         else "*i64" if name in ("rows_ptr", "lab_ptr") else "*fp32")
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name == "temperature":
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
            attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", arch, 32),
                       options={"num_warps": warps})
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        open(path, "wb").write(k.asm["cubin"])
        res = subprocess.run([BIN + "/cuobjdump", "-res-usage", path], capture_output=True,
                             text=True, check=True).stdout
        sass = subprocess.run([BIN + "/cuobjdump", "-sass", path], capture_output=True,
                              text=True, check=True).stdout
    return dict(reg=int(re.search(r"REG:(\d+)", res).group(1)),
                stack=int(re.search(r"STACK:(\d+)", res).group(1)),
                atomics=len(re.findall(r"\b(?:RED|ATOM|ATOMG)\.", sass)),
                gpu_fences=len(re.findall(r"MEMBAR\.\w+\.(?:GPU|SYS)", sass)),
                tf32_mma=len(re.findall(r"mma[^;\n]*\.tf32", k.asm["ptx"])))

out = {}
flags = dict(HAS_BIAS=True, NEED_ENTROPY=True)
mma, ieee = lt._GPU_TILES["mma"], lt._GPU_TILES["ieee"]
tiles = lambda t: dict(BLOCK_N=t[0], BLOCK_V=t[1], BLOCK_H=t[2])
sm90 = lt._SM90_MMA_TILES["bwd"]
out["dlogits_bf16_sm90"] = compile_one(lb._linear_dlogits_kernel, "bf16",
    dict(flags, NEED_B=True, DOT_FP32=False, TF32=False, **tiles(sm90)), sm90[3], 90)
out["dlogits_fp32_sm80"] = compile_one(lb._linear_dlogits_kernel, "fp32",
    dict(flags, NEED_B=True, DOT_FP32=True, TF32=False, **tiles(ieee)), ieee[3], 80)
out["fwd_fp32_ieee_sm80"] = compile_one(lt._linear_fwd_kernel, "fp32",
    dict(flags, DOT_FP32=True, TF32=False, **tiles(ieee)), ieee[3], 80)
out["fwd_fp32_tf32_sm80"] = compile_one(lt._linear_fwd_kernel, "fp32",
    dict(flags, DOT_FP32=True, TF32=True, **tiles(mma)), mma[3], 80)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def compiled():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["dlogits_bf16_sm90", "dlogits_fp32_sm80"])
def test_backward_kernel_writes_without_atomics(compiled, name):
    k = compiled[name]
    assert k["atomics"] == 0 and k["gpu_fences"] == 0, k
    assert k["stack"] == 0 and k["reg"] <= 255, k


def test_allow_tf32_reaches_the_compiled_code(compiled):
    assert compiled["fwd_fp32_tf32_sm80"]["tf32_mma"] > 0, compiled["fwd_fp32_tf32_sm80"]
    ieee = compiled["fwd_fp32_ieee_sm80"]
    assert ieee["tf32_mma"] == 0 and ieee["stack"] == 0 and ieee["reg"] <= 255, ieee
