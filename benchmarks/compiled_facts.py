"""Compiled facts of the Triton kernels, not timings: registers, spills, shared memory,
occupancy, SASS instructions, bytes, atomics, and the bound they imply on an H200 and an
A100 (docs/gpu_kernels.md). CPU-only and deterministic: the kernels are compiled for sm_90
and sm_80 by Triton with a stand-in driver (sharpo_kernels/compiled), no GPU involved.

    python benchmarks/compiled_facts.py [--all] [--out FILE]
    python benchmarks/compiled_facts.py --fwd-candidates [--out FILE]

Without --all: the representative variants at the Qwen2.5 head shapes (N=8192 tokens,
V=151936, H 896 and 4096); with --all: every variant the launchers can pick (slow).
--fwd-candidates: the sm_90 forward candidates of linear_logprobs (issue 45 item 3,
linear_fwd_variants.py) beside today's default, with their loop instruction mix and the
launch model (waves, L2 working set): benchmarks/results/linear_fwd_candidates.md.
Run it without TRITON_INTERPRET (it re-executes itself without it if set).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Representative variants (substrings of KernelVariant.label).
SELECTED = (
    "token_fwd bfloat16 N=8192 V=151936 entropy=0",
    "token_fwd bfloat16 N=8192 V=151936 entropy=1",
    "token_bwd bfloat16 N=8192 V=151936 entropy=0",
    "token_bwd bfloat16 N=8192 V=151936 entropy=1",
    "token_fwd float32 N=8192 V=151936 entropy=1",
    "token_bwd float32 N=8192 V=151936 entropy=1",
    "linear_fwd bfloat16 N=8192 V=151936 H=896 bias=0 entropy=0",
    "linear_fwd bfloat16 N=8192 V=151936 H=4096 bias=0 entropy=0",
    "linear_label bfloat16 N=8192 V=151936 H=4096 bias=0",
    "linear_bwd bfloat16 N=8192 V=151936 H=896 bias=0 entropy=0 h=1 w=1 b=0",
    "linear_bwd bfloat16 N=8192 V=151936 H=4096 bias=0 entropy=0 h=1 w=1 b=0",
    "linear_bwd bfloat16 N=8192 V=151936 H=4096 bias=0 entropy=0 h=1 w=0 b=0",
    "linear_bwd bfloat16 N=8192 V=151936 H=4096 bias=0 entropy=0 h=1 w=1 b=0 filter=1",
    "linear_fwd float32 N=8192 V=151936 H=4096 bias=0 entropy=0",
    "linear_bwd float32 N=8192 V=151936 H=4096 bias=0 entropy=0 h=1 w=1 b=0",
    "linear_bwd float32 N=8192 V=151936 H=4096 bias=0 entropy=0 h=1 w=0 b=0",
    "segment_advantage bfloat16 B=256 L=4096 mask=1",
    "segment_advantage float32 B=256 L=4096 mask=0",
    "segment_scan bfloat16 B=256 L=4096 mask=1",
    "segment_finish B=256 L=4096 mask=1",
)


# linear_logprobs' matmuls of 2 N V H FLOPs per path (docs/gpu_kernels.md), beside the rows
# above: the tensor-core floor of a path is its count times one matmul's (10.3 ms on an
# H200 at N=8192, H=4096, V=151936, bf16: 2 N V H / 989 TFLOP/s).
GEMMS_PER_PATH = """
linear_logprobs, matmuls of 2 N V H per path (triton backend; naive torch beside it):

| path | forward | backward | total | naive torch | floor, H200, N=8192 H=4096 V=151936 bf16 |
|---|---|---|---|---|---|
| scoring (no grad) | 1 (`linear_fwd`) | - | 1 | 1 | 10.3 ms |
| trainable head | 1 | 3 (`linear_bwd` recompute, cuBLAS grad_W, grad_h) | 4 | 3 | 41.2 ms |
| frozen head, entropy with a gradient (general path) | 1 | 2 (recompute, grad_h) | 3 | 2 | 30.9 ms |
| frozen head (`linear_frozen.py`: cuBLAS logits and exp(d) @ W per chunk) | 2 | 0 (g * J) | 2 | 2 | 20.6 ms |
| `grad_filter`, kept share k of the vocabulary blocks | 1 | 1 + 2k | 2 + 2k | 3 | (20.6 + 20.6 k) ms |

The sm_90 forward candidates (issue 45 item 3: TMA loads, the base-2 epilogue, two CTAs per
SM, whole waves): [linear_fwd_candidates.md](linear_fwd_candidates.md), from
`python benchmarks/compiled_facts.py --fwd-candidates`.
"""


def _fmt_ms(x):
    return "-" if x is None else f"{x * 1e3:.3f}"


def facts_rows(select_all: bool = False, archs=(90, 80)):
    """[(Compiled, {device name: Bound})] for the chosen variants, sm_90 first."""
    from sharpo_kernels.compiled.build import compile_variants, variants_for
    from sharpo_kernels.compiled.driver import compiling_for
    from sharpo_kernels.compiled.model import DEVICES, bound
    cache = tempfile.mkdtemp(prefix="sharpo-facts-")
    out = []
    for arch in archs:
        with compiling_for(arch):
            variants = variants_for(arch)
        if not select_all:
            variants = [v for v in variants if v.label in SELECTED]
        for c in compile_variants(variants, arch, os.path.join(cache, f"sm{arch}")):
            devs = [d for d in DEVICES if d.arch == arch]
            fp32_dot = bool(c.variant.constexprs.get("DOT_FP32"))
            out.append((c, {d.name: bound(c, d, fp32_dot) for d in devs}
                        if c.facts else {}))
    return out


def table(rows) -> str:
    head = ("| arch | kernel variant | regs | spills (STL/LDL, stack B) | shared KB | "
            "warps/SM | hot-loop instr (per elem) | instr/elem | bytes/elem | atomics | "
            "fences | device | issue ms | MUFU ms | memory ms | tensor ms | bound |")
    lines = [head, "|" + "---|" * head.count("|")[:-1] if False else
             "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for c, bounds in rows:
        f, v = c.facts, c.variant
        if f is None:
            lines.append(f"| sm_{c.arch} | {v.label} | does not compile: {c.error[:80]} |")
            continue
        for dev, b in bounds.items():
            hot = f"{b.hot_loop_instr}" + (f" ({b.hot_loop_per_element:.1f})"
                                           if b.hot_loop_per_element else "")
            ipe = "-" if b.instr_per_element is None else f"{b.instr_per_element:.1f}"
            bpe = v.bytes / v.elements if v.elements else 0
            lines.append(
                f"| sm_{c.arch} | {v.label} | {f.regs} | {f.spill_stores}/{f.spill_loads}, "
                f"{f.stack} | {c.shared / 1024:.1f} | {c.occupancy_warps} | {hot} | {ipe} | "
                f"{bpe:.2f} | {v.atomics:.3g} | {f.fences} | {dev} | {_fmt_ms(b.issue_s)} | "
                f"{_fmt_ms(b.mufu_s)} | {_fmt_ms(b.memory_s)} | {_fmt_ms(b.tensor_s)} | "
                f"{b.bound_by} |")
    return "\n".join(lines)


def loop_mix(facts):
    """(K loop, epilogue loop) of a linear forward binary: the loop with the most HGMMA
    (the H loop's tensor-core step) and the one with the most MUFU (exp2 per logit); the
    same loop when the compiler fused them (FLATTEN)."""
    k_loop = max(facts.loops, key=lambda lp: (lp.opcodes.get("HGMMA", 0)
                                              + lp.opcodes.get("HMMA", 0), -lp.own))
    epi = max(facts.loops, key=lambda lp: (lp.opcodes.get("MUFU", 0), lp.own))
    return k_loop, epi


def launch_model(c, sms: int = 132):
    """Waves and L2 working set of a forward variant's grid on `sms` SMs, from its compiled
    CTAs per SM (reasoning, not timings): (splits, programs, waves, busy share of the
    slot-time, hidden MB that the resident programs read each vocabulary step, weight MB
    new each step)."""
    v = c.variant
    n_tiles = int(v.grid[0])
    bn, bv = v.constexprs["BLOCK_N"], v.constexprs["BLOCK_V"]
    h, vocab = v.args[11], v.args[10]
    v_tiles = -(-vocab // bv)
    # the candidates' specs carry their launch splits; the default spec compiles with one
    # split (the grid does not change the binary): the launcher's 2 x SMs programs then
    splits = v.extra.get("splits") or max(1, min(v_tiles, -(-2 * sms // n_tiles)))
    per = -(-v_tiles // splits)
    splits = -(-v_tiles // per)
    slots = sms * max(1, c.occupancy_warps // v.num_warps)
    programs = n_tiles * splits
    waves = -(-programs // slots)
    busy = n_tiles * v_tiles / (waves * slots * per)
    group = v.constexprs.get("GROUP_N", 0) or n_tiles
    rows = min(group, n_tiles, slots)                   # row tiles among resident programs
    cols = -(-min(slots, programs) // rows)             # vocabulary tiles among them
    return (splits, programs, waves, busy, rows * bn * h * 2 / 2**20,
            cols * bv * h * 2 / 2**20)


def candidates_table(rows) -> str:
    """The forward candidates' compiled facts and launch model (markdown)."""
    from sharpo_kernels.logprobs.linear_fwd_variants import FWD_VARIANTS
    head = ("| candidate | bias, entropy | tile, warps, stages | regs | spills | shared KB | "
            "CTAs/SM | K loop: instr, HGMMA, other per HGMMA | epilogue per tile: instr "
            "(per logit) | splits, programs, waves, busy | hidden in flight MB | W per "
            "step MB |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for c, _ in rows:
        v, f = c.variant, c.facts
        name = v.extra.get("candidate", "base")
        flags = f"{'bias' if v.constexprs['HAS_BIAS'] else '-'}, " \
                f"{'entropy' if v.constexprs['NEED_ENTROPY'] else '-'}"
        tile = (f"{v.constexprs['BLOCK_N']}x{v.constexprs['BLOCK_V']}x"
                f"{v.constexprs['BLOCK_H']} w{v.num_warps} s{v.num_stages}")
        if f is None:
            out.append(f"| {name} | {flags} | {tile} | does not compile: {c.error[:80]} |")
            continue
        k_loop, epi = loop_mix(f)
        mma = k_loop.opcodes.get("HGMMA", 0) + k_loop.opcodes.get("HMMA", 0)
        per_thread = v.constexprs["BLOCK_N"] * v.constexprs["BLOCK_V"] / (32 * v.num_warps)
        if epi is k_loop:
            epi_cell = f"fused into the K loop ({k_loop.own} with it)"
        else:
            epi_cell = f"{epi.own} ({epi.own / per_thread:.1f})"
        other = (k_loop.own - mma) / mma if mma else float("nan")
        splits, programs, waves, busy, hid, wmb = launch_model(c)
        ctas = c.occupancy_warps // v.num_warps
        out.append(
            f"| {name} | {flags} | {tile} | {f.regs} | {f.spill_stores}/{f.spill_loads}, "
            f"{f.stack} | {c.shared / 1024:.1f} | {ctas} | {k_loop.own}, {mma}, "
            f"{other:.1f} | {epi_cell} | {splits}, {programs}, {waves}, {busy:.0%} | "
            f"{hid:.0f} | {wmb:.0f} |")
    notes = "\n".join(f"- **{k}**: {fv.note}" for k, fv in FWD_VARIANTS.items())
    legend = (
        "Columns: CTAs/SM from registers and shared memory; K loop: the SASS loop with the "
        "tensor-core instructions (one H step of a tile), its instructions, HGMMA among them "
        "and the others per HGMMA; epilogue: the loop with the exp2 (MUFU) per vocabulary "
        "tile, and per logit a thread owns (fused: FLATTEN puts it in the K loop under a "
        "branch, so its count is no longer per step). The last three columns are a launch "
        "model, not compiled facts: splits, programs, waves of resident CTAs and the share "
        "of slot-time busy (every program of equal work); the hidden rows the resident "
        "programs read each vocabulary step (1 MB per 128-row tile at H=4096) and the "
        "weight tiles new each step. docs/gpu_kernels.md, \"The sm_90 forward "
        "candidates\", reads them.")
    return "\n".join(out) + "\n\n" + legend + "\n\n" + notes + "\n"


def candidate_rows():
    """[(Compiled, {})] of today's sm_90 bf16 forward at the issue-45 shape (plain, with
    entropy, with bias + entropy) and every forward candidate."""
    from sharpo_kernels.compiled.build import compile_variants, variants_for
    from sharpo_kernels.compiled.driver import compiling_for
    from sharpo_kernels.logprobs.linear_triton import fwd_candidate_specs
    base = [f"linear_fwd bfloat16 N=8192 V=151936 H=4096 bias={b} entropy={e}"
            for b, e in ((0, 0), (0, 1), (1, 1))]
    with compiling_for(90):
        variants = [v for v in variants_for(90, ("sharpo_kernels.logprobs.linear_triton",))
                    if v.label in base]
        variants += fwd_candidate_specs()
    cache = tempfile.mkdtemp(prefix="sharpo-facts-")
    return [(c, {}) for c in compile_variants(variants, 90, cache)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="every variant (slow)")
    ap.add_argument("--fwd-candidates", action="store_true",
                    help="the sm_90 linear forward candidates (issue 45 item 3)")
    ap.add_argument("--out", help="also write the markdown table here")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)]
                  + list(argv if argv is not None else sys.argv[1:]), env)
    import triton
    t0 = time.time()
    if args.fwd_candidates:
        rows = candidate_rows()
        md = (f"Compiled facts and a launch model, not timings: triton {triton.__version__}, "
              f"sm_90, bf16, N=8192 V=151936 H=4096, without a GPU; `python "
              f"benchmarks/compiled_facts.py --fwd-candidates` ({time.time() - t0:.0f} s). "
              f"Waves and working sets for 132 SMs (H200, H100 SXM) and a 50 MB L2.\n\n"
              + candidates_table(rows))
        print(md)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(md)
        return 1 if any(c.problems for c, _ in rows) else 0
    rows = facts_rows(args.all)
    md = (f"Compiled facts, not timings: triton {triton.__version__}, compiled for sm_90 "
          f"(H200 model) and sm_80 (A100 model) without a GPU; `python "
          f"benchmarks/compiled_facts.py{' --all' if args.all else ''}` "
          f"({time.time() - t0:.0f} s).\n\n" + table(rows) + "\n" + GEMMS_PER_PATH)
    print(md)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(md)
    bad = [c for c, _ in rows if c.problems]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
