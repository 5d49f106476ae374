"""The forward candidate "cublas" (linear_fwd_variants.py): cuBLAS logit chunks followed by
the token kernel's reduction, instead of the fused Triton forward.

Per chunk of Vc vocabulary columns (Vc from LinearTritonConfig.chunk_bytes, fp32): the
logits z = h W_c^T (+ b_c) [NV, Vc] in fp32, straight from cuBLAS (16-bit operands, fp32
output; no [N, V] tensor), then `_token_fwd_kernel` (token_triton.py) reduces each row of
the chunk to its (m, ln s, entropy). The chunks are the Triton forward's vocabulary splits
by another name: their partial (m, s, t) merge the same way (linear_triton.py). Its cost
beyond the product: 8 bytes per logit (fp32 written, then read), 10 GB at N=8192
V=151936, about 2.3 ms of HBM time on an H200 (docs/gpu_kernels.md, "The sm_90 forward
candidates"): it wins only where cuBLAS's product runs that much faster than the fused
kernel's.
"""
from __future__ import annotations

import torch

from .linear_backward_triton import _addmm_f32_
from .token_triton import token_logprobs_triton_forward


def _mm_f32(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """out = a @ b in fp32 without reading out: cuBLAS with fp32 output where torch has it
    (`out_dtype`, torch >= 2.8), else through _addmm_f32_ into zeros."""
    if a.is_cuda and a.dtype == b.dtype != torch.float32:
        try:
            torch.mm(a, b, out_dtype=torch.float32, out=out)
            return
        except (TypeError, RuntimeError, NotImplementedError):
            pass
    out.zero_()
    _addmm_f32_(out, a, b)


def cublas_chunk_stats(hv, weight, bias, temperature: float, need_entropy: bool, vc: int):
    """hv [NV, H] (the scored rows), weight [V, H], bias [V] or None -> the per-chunk
    statistics (m, s, t) [chunks, NV] fp32 (t None without the entropy): m the chunk's raw
    max, s = sum exp((z - m) / T), t = sum exp(d) d over the chunk's columns."""
    nv = hv.shape[0]
    v = weight.shape[0]
    chunks = -(-v // vc)
    f32 = dict(dtype=torch.float32, device=hv.device)
    part_m = torch.empty(chunks, nv, **f32)
    part_s = torch.empty(chunks, nv, **f32)
    part_t = torch.empty(chunks, nv, **f32) if need_entropy else None
    z = torch.empty(nv, min(vc, v), **f32)
    first = torch.zeros(nv, dtype=torch.int64, device=hv.device)   # any column: unused logp
    for c in range(chunks):
        v0, v1 = c * vc, min(v, (c + 1) * vc)
        zc = z[:, :v1 - v0]
        _mm_f32(zc, hv, weight[v0:v1].t())
        if bias is not None:
            zc += bias[v0:v1].float()
        _, ent, m, logs, _ = token_logprobs_triton_forward(zc, first, temperature, -100,
                                                           need_entropy)
        part_m[c] = m
        part_s[c] = logs.exp()
        if need_entropy:                # ent = ln s - t / s
            part_t[c] = part_s[c] * (logs - ent)
    return part_m, part_s, part_t
