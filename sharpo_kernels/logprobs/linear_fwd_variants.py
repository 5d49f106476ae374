"""The sm_90 forward candidates of `linear_logprobs` (issue 45, item 3): named launch
configurations of `_linear_fwd_kernel` (linear_triton.py) that a GPU run must choose among
(docs/gpu_kernels.md, "The sm_90 forward candidates").

Each candidate fixes the tile (BLOCK_N, BLOCK_V, BLOCK_H, warps, stages) and the kernel's
switches; the compiled facts of every one (registers, spills, shared memory, CTAs per SM,
instruction mix of the loops) are in benchmarks/results/linear_fwd_candidates.md, made
without a GPU by `python benchmarks/compiled_facts.py --fwd-candidates`.

    exp2        the base-2 epilogue of the token kernels: 4 instructions per logit
                (max, d = (z - m) c, exp2, sum) instead of about 15 (a full-precision
                division by T, a clamp, exp's range fix-ups), the ragged-tile mask only on
                the split's last tile
    desc        TMA loads through tensor descriptors (no per-element address arithmetic,
                no cp.async bookkeeping: 212 -> 172 registers at 128 x 256)
    flatten     the vocabulary and H loops fused into one, so the loads of the next
                vocabulary tile are issued while the epilogue of this one runs
    fill_waves  vocabulary splits chosen so that the programs fill whole waves of the
                resident CTAs (`ctas_per_sm` from the compiled facts); the default 2 x SMs
                programs leaves the last wave 42% full at N=8192 on 132 SMs
    cublas      no fused kernel: cuBLAS logit chunks (fp32 output) reduced by the token
                kernel (linear_cublas_fwd.py); 8 bytes of HBM traffic per logit more
    group_n     programs taken in groups of that many row tiles, every split of a group
                before the next group: the hidden rows of a group stay in L2 (128 x 4096
                bf16 is 1 MB per row tile; all 64 row tiles of N=8192 are 64 MB, above
                the 50 MB L2), while the weight tile is shared by the group

The choice is the GPU run's (benchmarks/gpu_linear_fwd.py); the package's default stays
"base" until it has been timed. Candidates apply to 16-bit inputs on sm_90 (and in the
Triton interpreter, where the tests run their switches); elsewhere the launcher's defaults.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FwdVariant:
    name: str
    tiles: tuple                # (BLOCK_N, BLOCK_V, BLOCK_H, num_warps) on sm_90
    num_stages: int
    exp2: bool = False
    desc: bool = False
    flatten: bool = False
    fill_waves: bool = False
    group_n: int = 0
    cublas: bool = False
    ctas_per_sm: int = 1        # compiled fact (sm_90, bf16, H=4096): resident CTAs per SM
    note: str = ""


FWD_VARIANTS = {v.name: v for v in (
    FwdVariant("base", (128, 256, 64, 8), 3,
               note="today's default (timed on an H200 before the unmasked H loop: "
                    "20.8-21.1 ms, 49%)"),
    FwdVariant("exp2", (128, 256, 64, 8), 3, exp2=True,
               note="base + the base-2 epilogue"),
    FwdVariant("tma", (128, 256, 64, 8), 3, exp2=True, desc=True,
               note="exp2 + TMA loads"),
    FwdVariant("tma_waves", (128, 256, 64, 8), 3, exp2=True, desc=True, fill_waves=True,
               group_n=16, note="tma + whole waves + grouped order"),
    FwdVariant("tma_flat", (128, 256, 64, 8), 3, exp2=True, desc=True, flatten=True,
               fill_waves=True, group_n=16, note="tma_waves + fused loops"),
    FwdVariant("tma_2cta", (128, 128, 64, 8), 3, exp2=True, desc=True, fill_waves=True,
               group_n=16, ctas_per_sm=2,
               note="128 x 128 tile at 98 registers: two CTAs per SM, one's epilogue "
                    "under the other's MMA"),
    FwdVariant("cp_2cta", (128, 128, 64, 8), 3, exp2=True, fill_waves=True, group_n=16,
               ctas_per_sm=2, note="tma_2cta with cp.async loads (128 registers)"),
    FwdVariant("tma_w4_2cta", (128, 128, 64, 4), 3, exp2=True, desc=True, fill_waves=True,
               group_n=16, ctas_per_sm=2,
               note="one warpgroup per CTA (168 registers), two CTAs per SM"),
    FwdVariant("tma_k128", (128, 256, 128, 8), 2, exp2=True, desc=True, fill_waves=True,
               group_n=16, note="tma_waves with 128-wide H slices: 8 HGMMA per K step, half "
                                "the loop overhead per HGMMA, but 2 stages (192 KB)"),
    FwdVariant("cublas", (128, 256, 64, 8), 3, cublas=True,
               note="cuBLAS logit chunks (fp32, chunk_bytes) + the token kernel's reduction"),
)}


def fwd_variant(name):
    """The FwdVariant called `name` (None: "base"); ValueError naming fwd_variant else."""
    if name is None:
        return FWD_VARIANTS["base"]
    if name not in FWD_VARIANTS:
        raise ValueError(f"fwd_variant: expected one of {sorted(FWD_VARIANTS)}, got {name!r}")
    return FWD_VARIANTS[name]


def wave_splits(n_tiles: int, v_tiles: int, slots: int, least: int) -> int:
    """Vocabulary splits (>= least, <= v_tiles) whose programs best fill whole waves of
    `slots` resident CTAs: the largest share of busy slot-time

        n_tiles v_tiles / (ceil(n_tiles s / slots) slots ceil(v_tiles / s)),

    every program doing ceil(v_tiles / s) vocabulary tiles; ties go to fewer splits. The
    search stops at 8 x least splits (more only add partial statistics)."""
    best, best_eff = least, -1.0
    for s in range(max(1, least), min(v_tiles, 8 * max(1, least)) + 1):
        per = -(-v_tiles // s)
        s_real = -(-v_tiles // per)          # the launcher rounds splits to whole tiles
        waves = -(-(n_tiles * s_real) // slots)
        eff = n_tiles * v_tiles / (waves * slots * per)
        if eff > best_eff + 1e-9:
            best, best_eff = s, eff
    return best
