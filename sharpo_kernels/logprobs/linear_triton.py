"""Triton kernels for `linear_logprobs`: logits tile = hidden tile @ weight tile^T, never [N, V].

Only the non-ignored rows take part: the launcher gathers their indices (`rows`) once and
the kernels read hidden rows through them, so rows at ignore_index cost nothing.

Forward (`_linear_fwd_kernel`), grid (row tiles, vocabulary splits): each program walks its
share of the vocabulary in BLOCK_V tiles, computes the [BLOCK_N, BLOCK_V] logits with
`tl.dot` over BLOCK_H slices of H (linear_tiles.py), and carries the online statistics per
row (m = raw max, s = sum exp(d), t = sum exp(d) d, d = (z - m) / T; see token_triton.py).
The label's logit comes from a second, row-wise kernel (`_label_logit_kernel`: h . W[label],
N H reads), which keeps a [BLOCK_N, BLOCK_V] mask and its reductions out of the vocabulary
loop: with them the wide sm_90 tiles spilled registers. The splits' partial (m, s, t)
are merged in PyTorch (O(splits x N)); the splits give a GPU enough programs when N is small.
The sm_90 forward candidates (issue 45 item 3: the base-2 epilogue, TMA loads, fused loops,
grouped program order, whole waves, or cuBLAS chunks instead of the kernel) are named in
linear_fwd_variants.py and picked by `LinearTritonConfig(fwd_variant=)`; the default is
today's kernel until a GPU run chooses (docs/gpu_kernels.md).

Backward: linear_backward_triton.py (vocabulary chunks: a Triton kernel writes dL/dz for
the chunk, cuBLAS forms grad_W and grad_h from it; every gradient written once, no
atomics; docs/gpu_kernels.md).

Precision: fp32 inputs use IEEE fp32 products (no TF32) unless `allow_tf32=True`;
bf16/fp16 inputs multiply in their own dtype with fp32 accumulation on a GPU; in the
interpreter everything is converted to fp32 on load (bf16 `tl.dot` is broken there,
docs/toolchain.md). Tiles per dtype: `LinearTritonConfig.resolve` (fp32 IEEE products run
on FMA units and take smaller tiles, so that no variant spills on sm_80/sm_90).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._backend import triton_interpreting
from .linear_backward_triton import _addmm_f32_, _cublas_tf32, linear_logprobs_triton_backward
from .linear_cublas_fwd import cublas_chunk_stats
from .linear_fwd_variants import FWD_VARIANTS, wave_splits
from .linear_fwd_variants import fwd_variant as _fwd_variant
from .linear_frozen import (frozen_head, frozen_head_backward, frozen_head_finish,
                            frozen_head_forward)
from .linear_tiles import _logits_tile, _logits_tile_desc
from .online_lse import online_lse_rescale
from .online_lse_triton import online_lse_rescale_triton
from .token_triton import _slot_update

__all__ = ["linear_logprobs_triton", "linear_logprobs_triton_forward",
           "linear_logprobs_triton_backward", "LinearLogprobsTriton", "LinearTritonConfig"]


@triton.jit
def _label_logit_kernel(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows_ptr, lab_ptr, xy_ptr,
                        NV, H, HAS_BIAS: tl.constexpr, BLOCK_R: tl.constexpr,
                        BLOCK_H: tl.constexpr):
    """xy[i] = h[rows[i]] . W[lab[i]] (+ b[lab[i]]), fp32 products and sums: the label's
    raw logit, BLOCK_R rows per program (a row-wise dot: N H reads of W, not V H)."""
    offs = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    r_mask = offs < NV
    rows = tl.load(rows_ptr + offs, mask=r_mask, other=0)
    lab = tl.load(lab_ptr + offs, mask=r_mask, other=0)
    acc = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        hk = h0 + tl.arange(0, BLOCK_H)
        m2 = r_mask[:, None] & (hk < H)[None, :]
        x = tl.load(h_ptr + rows[:, None] * stride_h + hk[None, :], mask=m2, other=0.0)
        w = tl.load(w_ptr + lab[:, None] * stride_w + hk[None, :], mask=m2, other=0.0)
        acc += tl.sum(x.to(tl.float32) * w.to(tl.float32), axis=1)
    if HAS_BIAS:
        acc += tl.load(b_ptr + lab, mask=r_mask, other=0.0).to(tl.float32)
    tl.store(xy_ptr + offs, acc, mask=r_mask)


_LABEL_TILES = (16, 128, 4)     # BLOCK_R, BLOCK_H, num_warps of _label_logit_kernel


@triton.jit
def _linear_fwd_kernel(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows_ptr,
                       part_m_ptr, part_s_ptr, part_t_ptr,
                       NV, V, H, v_per_split, temperature,
                       HAS_BIAS: tl.constexpr, NEED_ENTROPY: tl.constexpr,
                       DOT_FP32: tl.constexpr, TF32: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_V: tl.constexpr, BLOCK_H: tl.constexpr,
                       EVEN_H: tl.constexpr = False, EXP2: tl.constexpr = False,
                       DESC: tl.constexpr = False, FLATTEN: tl.constexpr = False,
                       WARP_SPEC: tl.constexpr = False, GROUP_N: tl.constexpr = 0):
    """Per (row tile, vocabulary split): the partial (m, s, t) of its rows over its split.

    The forward candidates (linear_fwd_variants.py, docs/gpu_kernels.md "The sm_90
    forward candidates") switch on:
      EXP2       the base-2 epilogue of the token kernels (`_slot_update`: d = (z - m) c,
                 c = log2(e) / T, exp2; no division, no clamp per logit), the ragged-tile
                 mask only on the split's last tile; t is converted to base e at the store
      DESC       h_ptr / w_ptr are tensor descriptors (TMA loads; h over the scored rows
                 [NV, H], already compacted by the launcher); rows_ptr is unused
      FLATTEN    the vocabulary and H loops fused into one (`tl.range(flatten=True)`), so
                 the pipeline prefetches the next tile's first slices during the epilogue
      WARP_SPEC  Triton's warp specialisation of the vocabulary loop; triton 3.7.1 leaves
                 this loop unchanged on sm_90 (same binary), so no candidate sets it
      GROUP_N    > 0: programs taken in groups of GROUP_N row tiles, the splits of a group
                 before the next group (the L2 reuse order of a grouped matmul); 0: row
                 tiles first, as the grid is laid out
    """
    if GROUP_N > 0:
        n_tiles = tl.num_programs(0)
        splits = tl.num_programs(1)
        lin = tl.program_id(1) * n_tiles + tl.program_id(0)
        first = (lin // (GROUP_N * splits)) * GROUP_N
        size = tl.minimum(n_tiles - first, GROUP_N)
        pid_n = first + lin % size
        pid_s = (lin % (GROUP_N * splits)) // size
    else:
        pid_n = tl.program_id(0)
        pid_s = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < NV
    if not DESC:
        rows = tl.load(rows_ptr + offs_n, mask=n_mask, other=0)
    v_lo = pid_s * v_per_split
    v_hi = tl.minimum(V, v_lo + v_per_split)
    scale = 1.4426950408889634 / temperature        # EXP2: log2(e) / T, once per program
    m = tl.full((BLOCK_N,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_N,), tl.float32)
    t = tl.zeros((BLOCK_N,), tl.float32)
    for v0 in tl.range(v_lo, v_hi, BLOCK_V, flatten=FLATTEN, warp_specialize=WARP_SPEC):
        cols = v0 + tl.arange(0, BLOCK_V)
        v_mask = cols < v_hi
        if DESC:
            z = _logits_tile_desc(h_ptr, w_ptr, pid_n * BLOCK_N, v0, H, DOT_FP32, TF32,
                                  BLOCK_N, BLOCK_V, BLOCK_H)
            if HAS_BIAS:
                z += tl.load(b_ptr + cols, mask=v_mask, other=0.0).to(tl.float32)[None, :]
        else:
            z = _logits_tile(h_ptr, stride_h, w_ptr, stride_w, b_ptr, rows, n_mask, cols,
                             v_mask, H, v_hi - 1, HAS_BIAS, DOT_FP32, TF32, BLOCK_N, BLOCK_V,
                             BLOCK_H, EVEN_H)
        if EXP2:
            if v0 + BLOCK_V > v_hi:                 # the ragged last tile of the split
                z = tl.where(v_mask[None, :], z, float("-inf"))
            m, s, t = _slot_update(z, m, s, t, scale, NEED_ENTROPY)
        else:
            z = tl.where(v_mask[None, :], z, float("-inf"))
            # online (m, s, t)
            m, m_ref, s, t = online_lse_rescale_triton(m, s, t, tl.max(z, axis=1),
                                                       temperature, NEED_ENTROPY)
            d = tl.maximum((z - m_ref[:, None]) / temperature, -1e30)
            e = tl.exp(d)
            s += tl.sum(e, axis=1)
            if NEED_ENTROPY:
                t += tl.sum(e * d, axis=1)
    out = pid_s * NV + offs_n
    tl.store(part_m_ptr + out, m, mask=n_mask)
    tl.store(part_s_ptr + out, s, mask=n_mask)
    if NEED_ENTROPY:
        if EXP2:                                    # base-2 d -> base e: t ln 2
            t = t * 0.6931471805599453
        tl.store(part_t_ptr + out, t, mask=n_mask)


# GPU tiles (BLOCK_N, BLOCK_V, BLOCK_H, num_warps) by how the products run: tensor cores
# (bf16/fp16 operands, or fp32 with allow_tf32) or IEEE fp32 on FMA units, whose operands
# live in registers (the 64 x 128 x 64 tile needed all 255 registers and spilled).
_GPU_TILES = {"mma": (64, 128, 64, 8), "ieee": (64, 64, 32, 8)}
# Hopper (sm_90) tensor-core tiles per kernel for 16-bit operands, measured on an H200
# (triton 3.6, bf16, V=151936; benchmarks/results/linear_tiles_gpu.md) among the tiles that
# compile without spills (tests/kernels/test_compiled_gpu_code.py): the forward 128 x 256 x
# 64 (2.1x the common tile at N=8192 H=4096), the d-logits kernel 128 x 128 x 64 (128 x 256
# spills there). Other archs keep _GPU_TILES (not measured on their GPUs).
# The forward's tile is the "base" candidate's (linear_fwd_variants.py); `fwd_variant`
# picks another one.
_SM90_MMA_TILES = {"fwd": FWD_VARIANTS["base"].tiles, "bwd": (128, 128, 64, 8)}
_DEFAULT_CHUNK_BYTES = 256 << 20


def _cuda_arch(device: torch.device):
    """The compute capability of a CUDA device as 90, 80, ...; None when it cannot be read
    (no GPU here: the compile specs name their arch instead)."""
    try:
        major, minor = torch.cuda.get_device_capability(device)
    except (AssertionError, RuntimeError):
        return None
    return major * 10 + minor


class LinearTritonConfig:
    """Block sizes, vocabulary splits (forward) and the backward's chunk budget.

    None picks the default for the device and dtype. chunk_bytes: the most bytes of the
    backward's dL/dz buffer [N_valid, Vc] (default 256 MiB); the chunk width Vc is a
    multiple of BLOCK_V, at least one tile. num_stages: Triton's software pipelining depth
    for both kernels (None: Triton's default; for the forward, its candidate's).
    fwd_variant: a forward candidate of linear_fwd_variants.py (None: "base", today's
    kernel); it sets the forward's tiles, switches and splits for 16-bit inputs on sm_90,
    and its switches in the interpreter (where the tests give the tiles).
    """

    def __init__(self, block_n=None, block_v=None, block_h=None, splits=None, num_warps=None,
                 chunk_bytes=None, num_stages=None, fwd_variant=None):
        for name, val in (("block_n", block_n), ("block_v", block_v), ("block_h", block_h)):
            if val is not None and (val < 16 or val & (val - 1)):
                raise ValueError(f"{name}: expected a power of two >= 16, got {val}")
        if splits is not None and splits < 1:
            raise ValueError(f"splits: expected >= 1, got {splits}")
        if chunk_bytes is not None and (isinstance(chunk_bytes, bool)
                                        or not isinstance(chunk_bytes, int) or chunk_bytes < 1):
            raise ValueError(f"chunk_bytes: expected a positive int, got {chunk_bytes!r}")
        self.block_n, self.block_v, self.block_h = block_n, block_v, block_h
        if num_stages is not None and (isinstance(num_stages, bool)
                                       or not isinstance(num_stages, int) or num_stages < 1):
            raise ValueError(f"num_stages: expected a positive int, got {num_stages!r}")
        self.splits, self.num_warps = splits, num_warps
        self.chunk_bytes, self.num_stages = chunk_bytes, num_stages
        self.fwd = (_fwd_variant(fwd_variant) if fwd_variant is None
                    or isinstance(fwd_variant, str) else _bad_variant(fwd_variant))

    def fwd_applies(self, device: torch.device, dtype: torch.dtype, arch=None) -> bool:
        """Whether the forward candidate is used: 16-bit inputs on sm_90, or the
        interpreter (CPU tensors); elsewhere the launcher's defaults."""
        if device.type != "cuda":
            return True
        arch = _cuda_arch(device) if arch is None else arch
        return arch == 90 and dtype in (torch.bfloat16, torch.float16)

    def fwd_switches(self, h: int, dtype: torch.dtype, device: torch.device,
                     arch=None) -> dict:
        """The forward kernel's candidate switches (EXP2, DESC, FLATTEN, GROUP_N); all off
        where the candidate does not apply. DESC needs 16-byte aligned rows (TMA)."""
        fv = self.fwd if self.fwd_applies(device, dtype, arch) else FWD_VARIANTS["base"]
        desc = fv.desc and (h * dtype.itemsize) % 16 == 0
        return dict(EXP2=fv.exp2, DESC=desc, FLATTEN=fv.flatten, GROUP_N=fv.group_n)

    def fwd_cublas(self, device: torch.device, dtype: torch.dtype, arch=None) -> bool:
        """Whether the forward takes cuBLAS logit chunks + the token kernel's reduction
        (linear_cublas_fwd.py) instead of `_linear_fwd_kernel`."""
        return self.fwd.cublas and self.fwd_applies(device, dtype, arch)

    def fwd_launch_options(self, device: torch.device, dtype: torch.dtype, arch=None) -> dict:
        """The forward's num_stages: the config's, else its candidate's (base: Triton's)."""
        if self.num_stages is None and self.fwd.name != "base" and \
                self.fwd_applies(device, dtype, arch) and device.type == "cuda":
            return {"num_stages": self.fwd.num_stages}
        return self.launch_options()

    def launch_options(self) -> dict:
        """Triton launch options beyond num_warps: num_stages when set (else Triton's)."""
        return {} if self.num_stages is None else {"num_stages": self.num_stages}

    def tiles(self, nv: int, v: int, h: int, device: torch.device,
              dtype: torch.dtype = torch.bfloat16, tf32: bool = False, *,
              phase: str = "fwd", arch=None):
        """(BLOCK_N, BLOCK_V, BLOCK_H, num_warps) for `dtype` inputs on `device`, for the
        forward kernel (phase "fwd") or the backward's d-logits kernel ("bwd"); arch: the
        compute capability (90, 80, ...), by default the device's."""
        if phase not in ("fwd", "bwd"):
            raise ValueError(f"phase: expected 'fwd' or 'bwd', got {phase!r}")
        if device.type == "cuda":
            kind = "ieee" if dtype == torch.float32 and not tf32 else "mma"
            arch = _cuda_arch(device) if arch is None else arch
            if kind == "mma" and arch == 90 and dtype != torch.float32:   # 16-bit operands
                bn0, bv0, bh0, warps0 = (self.fwd.tiles if phase == "fwd"
                                         else _SM90_MMA_TILES[phase])
            else:
                bn0, bv0, bh0, warps0 = _GPU_TILES[kind]
        else:                           # the interpreter: big tiles, fewer Python steps
            bn0, bv0, bh0, warps0 = 64, 512, 256, 4
        bn = self.block_n or max(16, min(bn0, triton.next_power_of_2(max(nv, 1))))
        bv = self.block_v or max(16, min(bv0, triton.next_power_of_2(v)))
        bh = self.block_h or max(16, min(bh0, triton.next_power_of_2(h)))
        return bn, bv, bh, self.num_warps or warps0

    def unmasked_h(self, h: int, block_h: int, device: torch.device, *, phase: str = "fwd",
                   arch=None) -> bool:
        """EVEN_H for a kernel (linear_tiles.py): H a multiple of BLOCK_H lets the H loop
        load without masks. Not for the sm_90 d-logits kernel: there it took 166 registers
        instead of 128 and halved the resident CTAs (benchmarks/results/compiled_facts.md),
        so it keeps the masked loop; the sm_90 forward went from 254 to 212 registers at the
        same occupancy, 31% fewer instructions per logit."""
        if h % block_h:
            return False
        if phase == "bwd" and device.type == "cuda":
            return (_cuda_arch(device) if arch is None else arch) != 90
        return True

    def resolve(self, nv: int, v: int, h: int, device: torch.device,
                dtype: torch.dtype = torch.bfloat16, tf32: bool = False, *, arch=None):
        """Forward launch: (BLOCK_N, BLOCK_V, BLOCK_H, splits, v_per_split, num_warps)."""
        bn, bv, bh, warps = self.tiles(nv, v, h, device, dtype, tf32, arch=arch)
        n_tiles = triton.cdiv(max(nv, 1), bn)
        v_tiles = triton.cdiv(v, bv)
        if self.splits is not None:
            splits = self.splits
        elif device.type == "cuda":
            sms = torch.cuda.get_device_properties(device).multi_processor_count
            splits = max(1, min(v_tiles, triton.cdiv(2 * sms, n_tiles)))
            if self.fwd.fill_waves and self.fwd_applies(device, dtype, arch):
                splits = wave_splits(n_tiles, v_tiles, sms * self.fwd.ctas_per_sm, splits)
        else:
            splits = 1
        splits = min(splits, v_tiles)
        v_per_split = triton.cdiv(v_tiles, splits) * bv
        splits = triton.cdiv(v, v_per_split)
        return bn, bv, bh, splits, v_per_split, warps

    def chunk_columns(self, nv: int, v: int, block_v: int, elem_bytes: int) -> int:
        """Backward chunk width Vc: a multiple of block_v, at least one tile, at most V
        rounded up to a tile, with nv * Vc * elem_bytes <= chunk_bytes where possible."""
        budget = self.chunk_bytes or _DEFAULT_CHUNK_BYTES
        tiles = max(1, budget // (max(nv, 1) * elem_bytes * block_v))
        return min(tiles, triton.cdiv(v, block_v)) * block_v


def _bad_variant(value):
    raise TypeError(f"fwd_variant: expected a candidate name (str) or None, got {value!r}")


def _dot_fp32(dtype: torch.dtype) -> bool:
    return dtype == torch.float32 or triton_interpreting()


def _tf32(dtype: torch.dtype, allow_tf32: bool) -> bool:
    """TF32 products only for fp32 inputs, only when allowed, never in the interpreter."""
    return bool(allow_tf32) and dtype == torch.float32 and not triton_interpreting()


def _descriptors(hidden, weight, rows, bn: int, bv: int, bh: int):
    """(hidden descriptor over the scored rows [NV, H], block [bn, bh]; weight descriptor
    [V, H], block [bv, bh]) for the DESC forward, or (hidden, weight) when TMA cannot read
    them (a base or row stride not a multiple of 16 bytes). The scored rows are gathered
    into one [NV, H] copy unless every row is scored (NV H elements more memory)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    hv = hidden if rows.numel() == hidden.shape[0] else hidden.index_select(0, rows)
    elt = hidden.element_size()
    if any(t.data_ptr() % 16 or (t.stride(0) * elt) % 16 for t in (hv, weight)):
        return hidden, weight
    return (TensorDescriptor(hv, [hv.shape[0], hv.shape[1]], [hv.stride(0), 1], [bn, bh]),
            TensorDescriptor(weight, list(weight.shape), [weight.stride(0), 1], [bv, bh]))


def linear_logprobs_triton_forward(hidden, weight, bias, rows, lab, temperature: float,
                                   need_entropy: bool, config: LinearTritonConfig,
                                   allow_tf32: bool = False):
    """hidden [N, H], weight [V, H], bias [V]/None (unit last strides); rows, lab [NV] int64.

    Returns (logp [NV], entropy [NV] or None, m, logs, ent) over the compacted rows, fp32.
    """
    nv = rows.numel()
    v, h = weight.shape
    dev = hidden.device
    tf32 = _tf32(hidden.dtype, allow_tf32)
    bn, bv, bh, splits, v_per_split, warps = config.resolve(nv, v, h, dev, hidden.dtype, tf32)
    f32 = dict(dtype=torch.float32, device=dev)
    part_m = torch.empty(splits, nv, **f32)
    part_s = torch.empty(splits, nv, **f32)
    part_t = torch.empty(splits, nv, **f32) if need_entropy else part_s
    xy = torch.empty(nv, **f32)
    if nv and config.fwd_cublas(dev, hidden.dtype):    # the "cublas" candidate
        hv = hidden if nv == hidden.shape[0] else hidden.index_select(0, rows)
        with _cublas_tf32(dev, tf32):
            part_m, part_s, part_t = cublas_chunk_stats(
                hv, weight, bias, temperature, need_entropy,
                config.chunk_columns(nv, v, _FROZEN_BLOCK_V, 4))
        part_t = part_s if part_t is None else part_t
    elif nv:
        grid = (triton.cdiv(nv, bn), splits)
        switches = config.fwd_switches(h, hidden.dtype, dev)
        h_arg, w_arg = hidden, weight
        if switches["DESC"]:
            h_arg, w_arg = _descriptors(hidden, weight, rows, bn, bv, bh)
            switches["DESC"] = h_arg is not hidden
        _linear_fwd_kernel[grid](
            h_arg, hidden.stride(0), w_arg, weight.stride(0),
            bias if bias is not None else weight, rows, part_m, part_s, part_t,
            nv, v, h, v_per_split, float(temperature),
            HAS_BIAS=bias is not None, NEED_ENTROPY=need_entropy,
            DOT_FP32=_dot_fp32(hidden.dtype), TF32=tf32, BLOCK_N=bn, BLOCK_V=bv,
            BLOCK_H=bh, EVEN_H=config.unmasked_h(h, bh, dev), num_warps=warps,
            **switches, **config.fwd_launch_options(dev, hidden.dtype))
    if nv:
        br, bhl, lwarps = _LABEL_TILES
        _label_logit_kernel[(triton.cdiv(nv, br),)](
            hidden, hidden.stride(0), weight, weight.stride(0),
            bias if bias is not None else weight, rows, lab, xy, nv, h,
            HAS_BIAS=bias is not None, BLOCK_R=br, BLOCK_H=min(bhl, triton.next_power_of_2(h)),
            num_warps=lwarps)
    # merge the splits: rescale each partial (m, s, t) to the common max M, then add
    m = part_m.amax(0)
    _, _, s_parts, t_parts = online_lse_rescale(part_m, part_s,
                                                part_t if need_entropy else None, m,
                                                temperature)
    s = s_parts.sum(0)
    logs = s.log()
    # log p <= 0: xy (the label kernel's sum) and m (the tile kernel's) round differently,
    # which at large logits could give a positive value (docs/api.md, "Accepted ranges")
    logp = ((xy - m) / temperature - logs).clamp_(max=0.0)
    ent = None
    if need_entropy:
        ent = logs - t_parts.sum(0) / s
    return logp, ent, m, logs, ent


class _TorchHeadSlices:
    """linear_frozen.HeadSlices of the triton backend: cuBLAS products on a GPU (16-bit
    operands with fp32 output, `_addmm_f32_`; fp32 operands in IEEE fp32 unless allow_tf32),
    upcast products in the interpreter. exp(d) enters the accumulate product in the weight's
    dtype on a GPU (as the backward's dL/dz chunk does), in fp32 in the interpreter."""

    dtype = torch.float32

    def __init__(self, weight, bias):
        self.weight, self.bias = weight, bias
        self.wv = self.bv = None

    def load(self, v0: int, v1: int) -> None:
        self.wv = self.weight[v0:v1]
        self.bv = None if self.bias is None else self.bias[v0:v1].float()

    def logits(self, h):
        z = torch.zeros(h.shape[0], self.wv.shape[0], dtype=torch.float32, device=h.device)
        _addmm_f32_(z, h, self.wv.t())
        return z if self.bv is None else z.add_(self.bv)

    def accumulate(self, acc, e):
        half = self.wv.dtype != torch.float32 and e.is_cuda
        _addmm_f32_(acc, e.to(self.wv.dtype) if half else e, self.wv)

    def scratch(self, rows: int, cols: int):
        return torch.empty(rows, cols, dtype=torch.float32, device=self.weight.device)


_FROZEN_BLOCK_V = 128       # the frozen path's chunk width is a multiple of this


def linear_logprobs_triton_frozen_forward(hidden, weight, bias, rows, lab, temperature: float,
                                          need_entropy: bool, config: LinearTritonConfig,
                                          allow_tf32: bool = False):
    """The frozen-head forward (linear_frozen.py) over vocabulary chunks of at most
    config.chunk_bytes of fp32 logits [NV, Vc]. -> (logp [NV], entropy [NV] or None,
    J [NV, H] fp32)."""
    nv = rows.numel()
    v = weight.shape[0]
    vc = config.chunk_columns(nv, v, _FROZEN_BLOCK_V, 4)
    hv = hidden.index_select(0, rows)
    with _cublas_tf32(hidden.device, _tf32(hidden.dtype, allow_tf32)):
        stats = frozen_head_forward(hv, lab, v, _TorchHeadSlices(weight, bias), max(nv, 1), vc,
                                    temperature, need_entropy)
    logp, ent, _, j = frozen_head_finish(weight, lab, *stats, temperature, need_entropy)
    return logp, ent, j


def _scatter_rows(n: int, rows, lp_v, ent_v):
    """The scored rows' (logp, entropy or None) [NV] -> [N] each, 0 at the other rows."""
    logp = torch.zeros(n, dtype=torch.float32, device=lp_v.device)
    logp.index_copy_(0, rows, lp_v)
    entropy = torch.zeros(n, dtype=torch.float32, device=lp_v.device)
    if ent_v is not None:
        entropy.index_copy_(0, rows, ent_v)
    return logp, entropy


class LinearLogprobsTriton(torch.autograd.Function):
    """autograd.Function over (hidden [N, H], weight [V, H], bias [V] or None)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, temperature, ignore_index, need_entropy,
                config, allow_tf32, frozen=False, grad_filter=0.0):
        # an output nobody uses gets None in backward, not zeros: no entropy backward then
        ctx.set_materialize_grads(False)
        ctx.frozen, ctx.grad_filter = frozen, grad_filter
        n = hidden.shape[0]
        rows = (labels != ignore_index).nonzero().squeeze(1)
        lab = labels.index_select(0, rows).contiguous()
        if frozen:                      # the head needs no gradient: 2 matmuls in all
            lp_v, ent_v, j = linear_logprobs_triton_frozen_forward(
                hidden, weight, bias, rows, lab, temperature, need_entropy, config, allow_tf32)
            logp, entropy = _scatter_rows(n, rows, lp_v, ent_v)
            ctx.mark_non_differentiable(entropy)
            ctx.save_for_backward(hidden, rows, j)
            return logp, entropy
        lp_v, ent_v, m, logs, ent = linear_logprobs_triton_forward(
            hidden, weight, bias, rows, lab, temperature, need_entropy, config, allow_tf32)
        logp, entropy = _scatter_rows(n, rows, lp_v, ent_v)
        if not need_entropy:
            ctx.mark_non_differentiable(entropy)
        ctx.save_for_backward(hidden, weight, bias, rows, lab, m, logs, ent)
        ctx.args = (temperature, need_entropy, config, allow_tf32)
        return logp, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_lp, g_ent):
        if ctx.frozen:
            nones = (None,) * 10
            return (frozen_head_backward(ctx.saved_tensors, g_lp), *nones)
        hidden, weight, bias, rows, lab, m, logs, ent = ctx.saved_tensors
        temperature, need_entropy, config, allow_tf32 = ctx.args
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        g_lp_v = (torch.zeros_like(m) if g_lp is None       # only the entropy is used
                  else g_lp.index_select(0, rows))
        g_ent_v = g_ent.index_select(0, rows) if need_entropy and g_ent is not None else None
        gh, gw, gb = linear_logprobs_triton_backward(
            hidden, weight, bias, rows, lab, m, logs, ent, g_lp_v, g_ent_v, temperature,
            need_h, need_w, need_b and bias is not None, config,
            _tf32(hidden.dtype, allow_tf32), ctx.grad_filter)
        return gh, gw, gb, None, None, None, None, None, None, None, None


def linear_logprobs_triton(hidden, weight, labels, bias=None, temperature=1.0,
                           ignore_index=-100, return_entropy=False,
                           config: LinearTritonConfig | None = None, allow_tf32: bool = False,
                           entropy_grad: bool = True, grad_filter: float = 0.0):
    """Unvalidated op: hidden [N, H], weight [V, H], labels [N] -> (logp [N], entropy [N]).

    allow_tf32: fp32 inputs may use TF32 tensor-core products (forward and backward);
    bf16/fp16 inputs are unaffected. Off by default: IEEE fp32 products.
    entropy_grad=False: the entropy comes back without a gradient (api.py), which lets a
    frozen head take the two-matmul path (linear_frozen.py). grad_filter: the backward's
    opt-in tile filter (grad_filter.py; 0: off)."""
    for name, t in (("hidden", hidden), ("weight", weight), ("bias", bias)):
        if t is not None and t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"{name}: the triton backend takes float32/bfloat16/float16, got "
                            f"{t.dtype} (use backend='cpu' or 'torch' for float64)")
    hidden = hidden if hidden.stride(-1) == 1 else hidden.contiguous()
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    if bias is not None:
        bias = bias.contiguous()
    labels = labels.to(torch.int64).contiguous()
    frozen = frozen_head(hidden, weight, bias, return_entropy, entropy_grad)
    logp, entropy = LinearLogprobsTriton.apply(hidden, weight, bias, labels, float(temperature),
                                               int(ignore_index), bool(return_entropy),
                                               config or LinearTritonConfig(),
                                               bool(allow_tf32), frozen, float(grad_filter))
    return logp, (entropy if entropy_grad else entropy.detach())


# ---------------------------------------------------------------------------------------
# Compile specs (sharpo_kernels/compiled): every variant the launchers above can pick at the
# realistic shapes, with the tiles LinearTritonConfig chooses on a GPU for each dtype and
# allow_tf32, and the backward's chunk width. Keep in step with the launchers: change a
# launcher's arguments, change its spec here.
# ---------------------------------------------------------------------------------------

def compile_specs(arch: int):
    """[KernelVariant] of _linear_fwd_kernel and the backward's _linear_dlogits_kernel
    (linear_backward_triton.py) for sm_<arch>.

    A "linear_bwd" variant is the whole backward: the d-logits kernel's binary, with the
    traffic and tensor-core FLOPs of the kernel plus the cuBLAS products it feeds (grad_W,
    grad_h: 2 N V H each), so that the throughput model bounds the backward, not the kernel
    alone. Its atomics are 0: every gradient is written once (docs/gpu_kernels.md)."""
    from ..compiled.variants import HIDDENS, N_TOKENS, VOCABS, KernelVariant
    from .linear_backward_triton import _linear_dlogits_kernel
    f32, i64 = torch.float32, torch.int64
    cuda = torch.device("cuda")
    out = []
    nv = N_TOKENS
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        dn = str(dtype).split(".")[-1]
        elt = dtype.itemsize
        for tf32 in ((False, True) if dtype == f32 else (False,)):
            tag = " tf32=1" if tf32 else ""
            for v in VOCABS:
                for h in HIDDENS:
                    cfg = LinearTritonConfig(splits=1)  # splits shape the grid, not the binary
                    bn, bv, bh, splits, v_per_split, warps = cfg.resolve(nv, v, h, cuda,
                                                                         dtype, tf32, arch=arch)
                    n_tiles = triton.cdiv(nv, bn)
                    # the backward's d-logits kernel: its own tiles (phase "bwd")
                    bbn, bbv, bbh, bwarps = cfg.tiles(nv, v, h, cuda, dtype, tf32, phase="bwd",
                                                      arch=arch)
                    vc = cfg.chunk_columns(nv, v, bbv, elt)
                    chunks = triton.cdiv(v, vc)
                    b_tiles = triton.cdiv(nv, bbn)
                    shape = f"{dn} N={nv} V={v} H={h}"
                    common = dict(DOT_FP32=dtype == f32, TF32=tf32, BLOCK_N=bn, BLOCK_V=bv,
                                  BLOCK_H=bh, EVEN_H=cfg.unmasked_h(h, bh, cuda, arch=arch))
                    bcommon = dict(common, BLOCK_N=bbn, BLOCK_V=bbv, BLOCK_H=bbh,
                                   EVEN_H=cfg.unmasked_h(h, bbh, cuda, phase="bwd",
                                                         arch=arch))
                    br, bhl, lwarps = _LABEL_TILES
                    for bias in (False, True):
                        out.append(KernelVariant(
                            _label_logit_kernel,
                            (dtype, h, dtype, h, dtype, i64, i64, f32, nv, h),
                            dict(HAS_BIAS=bias, BLOCK_R=br,
                                 BLOCK_H=min(bhl, triton.next_power_of_2(h))),
                            lwarps, 3, (triton.cdiv(nv, br),),
                            f"linear_label {shape} bias={bias:d}{tag}",
                            elements=nv * h, bytes=2 * nv * h * elt + 3 * 8 * nv,
                            loop_trips=(triton.cdiv(h, min(bhl, triton.next_power_of_2(h))),)))
                        for ent in (False, True):
                            out.append(KernelVariant(
                                _linear_fwd_kernel,
                                (dtype, h, dtype, h, dtype, i64, f32, f32, f32,
                                 nv, v, h, v_per_split, 0.7),
                                dict(common, HAS_BIAS=bias, NEED_ENTROPY=ent),
                                warps, 3, (n_tiles, splits),
                                f"linear_fwd {shape} bias={bias:d} entropy={ent:d}{tag}",
                                elements=nv * v, mma_flops=2 * nv * v * h,
                                bytes=(v * h + nv * h) * elt,    # minimal: W and hidden once
                                loop_trips=(triton.cdiv(v_per_split, bv),
                                            triton.cdiv(v_per_split, bv) * triton.cdiv(h, bh)),
                                mufu_per_element=1.0))
                            for need_h, need_w, need_b in ((1, 1, 0), (1, 0, 0), (0, 1, 0),
                                                           (1, 1, 1), (1, 0, 1), (0, 1, 1),
                                                           (0, 0, 1)):
                                if need_b and not bias:
                                    continue
                                # d-logits kernel: W, hidden read; dz written; bias partials
                                # cuBLAS: dz read per product, hidden / W read, grad_W written
                                # once, grad_h (fp32) read + written per chunk
                                nbytes = ((v * h + nv * h) * elt + nv * v * elt
                                          + 4 * b_tiles * v * need_b
                                          + nv * v * elt * (need_h + need_w)
                                          + need_w * (nv * h + v * h) * elt
                                          + need_h * (v * h * elt + chunks * 2 * 4 * nv * h))
                                # grad_filter (grad_filter.py): the kernel also writes
                                # its per-tile keep flags; compiled for the gradient sets
                                # training without a bias uses (h, w) and (h only)
                                filters = (False, True) if not need_b and need_h else (False,)
                                for filt in filters:
                                    out.append(KernelVariant(
                                        _linear_dlogits_kernel,
                                        (dtype, h, dtype, h, dtype, i64, i64, f32, f32, f32, f32,
                                         f32, dtype, vc, f32, vc, nv, 0, min(v, vc), h, 0.7,
                                         torch.int32, triton.cdiv(vc, bbv), 0.0),
                                        dict(bcommon, HAS_BIAS=bias, NEED_ENTROPY=ent,
                                             NEED_B=bool(need_b), FILTER=filt),
                                        bwarps, 3, (b_tiles, triton.cdiv(min(v, vc), bbv) * chunks),
                                        f"linear_bwd {shape} bias={bias:d} entropy={ent:d} "
                                        f"h={need_h} w={need_w} b={need_b}{tag}"
                                        f"{' filter=1' if filt else ''}",
                                        elements=nv * v,
                                        mma_flops=2 * nv * v * h * (1 + need_h + need_w),
                                        bytes=nbytes, atomics=0, mufu_per_element=1.0,
                                        loop_trips=(triton.cdiv(h, bbh),),
                                        extra=dict(chunk_columns=vc, chunks=chunks,
                                                   cublas_flops=2 * nv * v * h
                                                   * (need_h + need_w))))
    if arch == 90:
        out += fwd_candidate_specs()
    return out


H200_SMS = 132      # the splits of the candidate specs: an H200's (or an H100 SXM's) SMs


def fwd_candidate_specs(names=None, sms: int = H200_SMS):
    """[KernelVariant] of the sm_90 forward candidates (linear_fwd_variants.py) other than
    "base" (the default spec above), bf16 at the issue-45 shape N=8192 V=151936 H=4096,
    plain, with entropy, with bias + entropy; the grid is the launch's on `sms` SMs (wave-filling
    splits where the candidate asks for them). extra: the candidate's name and splits."""
    from triton.runtime.jit import MockTensor
    from triton.tools.tensor_descriptor import TensorDescriptor

    from ..compiled.variants import N_TOKENS, KernelVariant
    f32, i64, bf = torch.float32, torch.int64, torch.bfloat16
    nv, v, h = N_TOKENS, 151936, 4096
    out = []
    for name in names or [k for k, fv in FWD_VARIANTS.items()
                          if k != "base" and not fv.cublas]:    # cublas: no kernel of its own
        cfg = LinearTritonConfig(fwd_variant=name)
        cuda = torch.device("cuda")
        bn, bv, bh, warps = cfg.tiles(nv, v, h, cuda, bf, arch=90)
        n_tiles, v_tiles = triton.cdiv(nv, bn), triton.cdiv(v, bv)
        least = max(1, min(v_tiles, triton.cdiv(2 * sms, n_tiles)))
        splits = (wave_splits(n_tiles, v_tiles, sms * cfg.fwd.ctas_per_sm, least)
                  if cfg.fwd.fill_waves else least)
        v_per_split = triton.cdiv(v_tiles, splits) * bv
        splits = triton.cdiv(v, v_per_split)
        switches = cfg.fwd_switches(h, bf, cuda, arch=90)
        if switches["DESC"]:
            h_arg = TensorDescriptor(MockTensor(bf, [nv, h]), [nv, h], [h, 1], [bn, bh])
            w_arg = TensorDescriptor(MockTensor(bf, [v, h]), [v, h], [h, 1], [bv, bh])
        else:
            h_arg = w_arg = bf
        stages = cfg.fwd_launch_options(cuda, bf, arch=90)["num_stages"]
        for bias, ent in ((False, False), (False, True), (True, True)):
            out.append(KernelVariant(
                _linear_fwd_kernel,
                (h_arg, h, w_arg, h, bf, i64, f32, f32, f32, nv, v, h, v_per_split, 0.7),
                dict(HAS_BIAS=bias, NEED_ENTROPY=ent, DOT_FP32=False, TF32=False,
                     BLOCK_N=bn, BLOCK_V=bv, BLOCK_H=bh,
                     EVEN_H=cfg.unmasked_h(h, bh, cuda, arch=90), **switches),
                warps, stages, (n_tiles, splits),
                f"linear_fwd bfloat16 N={nv} V={v} H={h} bias={bias:d} entropy={ent:d} "
                f"cand={name}",
                elements=nv * v, mma_flops=2 * nv * v * h, bytes=(v * h + nv * h) * 2,
                loop_trips=(triton.cdiv(v_per_split, bv),
                            triton.cdiv(v_per_split, bv) * triton.cdiv(h, bh)),
                mufu_per_element=1.0, extra=dict(candidate=name, splits=splits)))
    return out
