"""The GPU path of `linear_policy_loss` (backend "triton"): the chunked algorithm of
fused_cpu.py with cuBLAS products and the Triton token kernels of token_logprobs
(logprobs/token_triton.py) for each chunk's softmax and dL/dz (docs/api.md
"linear_policy_loss"; docs/gpu_kernels.md).

Per chunk of R scored rows:
    z      = h_c W^T (+ b), fp32 out of cuBLAS (bf16/fp16 operands, fp32 accumulation)  GEMM 1
    logp, H, m, log s   token_logprobs_triton_forward(z)
    g_lp, g_H           token_terms.py (elementwise over R)
    dz     = token_logprobs_triton_backward(z, g_lp, g_H), cast to the inputs' dtype
    grad_h[c] = dz W       (fp32 accumulation, one rounding)                            GEMM 2
    grad_W   += dz^T h_c   (fp32 accumulator [V, H])                                    GEMM 3
Extra memory: two fp32 [R, V] tiles and a half one (bf16/fp16), the fp32 [V, H] gradient
accumulator; R from `FusedOptions.budget` (1 GiB of fp32 logits). On CPU tensors it runs
under TRITON_INTERPRET=1 (tests), the products then in fp32.

A frozen head without an entropy bonus (the LoRA default) takes linear_logprobs' triton
frozen-head forward instead, as the cpu backend does (logprobs/linear_frozen.py): per
vocabulary chunk of all scored rows (at most min(256 MiB, the budget) of fp32 logits) the
logits product and exp(d) W accumulated into the fp32 direction J [NV, H], then
grad_h = dL/dlogp * J: the same 2 products, and no [R, V] tile, dL/dz or its cast.
"""
from __future__ import annotations

import torch

from ..logprobs.linear_backward_triton import _addmm_f32_, _cublas_tf32
from ..logprobs.linear_triton import (_DEFAULT_CHUNK_BYTES, LinearTritonConfig,
                                      linear_logprobs_triton_frozen_forward)
from ..logprobs.token_triton import token_logprobs_triton_backward, token_logprobs_triton_forward
from .fused_cpu import (DEFAULT_FUSED, FusedOptions, chunk_rows, frozen_head_case,
                        frozen_head_terms)
from .token_terms import LossTerms, chunk_terms

__all__ = ["fused_policy_loss_triton"]

LN2 = 0.6931471805599453


def _logits_f32(hc: torch.Tensor, weight: torch.Tensor, bias) -> torch.Tensor:
    """[R, V] fp32 logits of one chunk: fp32 accumulation, never rounded to bf16/fp16."""
    z = torch.empty(hc.shape[0], weight.shape[0], dtype=torch.float32, device=hc.device)
    if bias is not None:
        z.copy_(bias.to(torch.float32).expand_as(z))
    else:
        z.zero_()
    _addmm_f32_(z, hc, weight.t())
    return z


def fused_policy_loss_triton(hidden, weight, bias, rows, lab, old, adv, wts, ref,
                             terms: LossTerms, temperature: float, need_entropy: bool,
                             need_h: bool, need_w: bool, need_b: bool,
                             options: FusedOptions = DEFAULT_FUSED, tf32: bool = False):
    """As fused_cpu.fused_policy_loss_chunked (same arguments and results, all fp32),
    for CUDA tensors (or CPU tensors under the Triton interpreter)."""
    v, h = weight.shape
    dev = hidden.device
    if frozen_head_case(need_h, need_w, need_b, terms):
        config = LinearTritonConfig(chunk_bytes=min(_DEFAULT_CHUNK_BYTES, options.budget(dev)))
        logp, ent, j = linear_logprobs_triton_frozen_forward(
            hidden, weight, bias, rows, lab, temperature, need_entropy, config, tf32)
        return frozen_head_terms(logp, ent, j, old, adv, wts, ref, terms)
    f32 = dict(dtype=torch.float32, device=dev)
    nv = rows.numel()
    hv = hidden if nv == hidden.shape[0] else hidden.index_select(0, rows)
    old, adv, wts = old.float(), adv.float(), wts.float()
    ref = None if ref is None else ref.float()
    loss = torch.zeros((), **f32)
    logp = torch.empty(nv, **f32)
    ent_all = torch.empty(nv, **f32) if need_entropy else None
    gh = torch.empty(nv, h, **f32) if need_h else None
    gw = torch.zeros(v, h, **f32) if need_w else None
    gb = torch.zeros(v, **f32) if need_b else None
    rc = chunk_rows(nv, v, 4, options, dev)
    with _cublas_tf32(dev, tf32):
        for r0 in range(0, nv, rc):
            r1 = min(nv, r0 + rc)
            hc, lc = hv[r0:r1], lab[r0:r1]
            z = _logits_f32(hc, weight, bias)
            lp, ent, m, logs, _ = token_logprobs_triton_forward(z, lc, temperature, -100,
                                                                need_entropy)
            part, g_lp, g_ent = chunk_terms(lp, ent, r0, r1, old, adv, wts, ref, terms, logp,
                                           ent_all if need_entropy else None)
            loss += part
            if not (need_h or need_w or need_b):
                continue
            dz = token_logprobs_triton_backward(z, lc, m, logs / LN2, ent, g_lp, g_ent,
                                                temperature, -100)
            del z
            if need_b:
                gb += dz.sum(0)
            if dz.dtype != hidden.dtype and dz.is_cuda:
                dz = dz.to(hidden.dtype)                          # tensor-core products
            if need_h:
                gh[r0:r1].zero_()
                _addmm_f32_(gh[r0:r1], dz, weight)
            if need_w:
                _addmm_f32_(gw, dz.t(), hc)
    return loss, logp, ent_all, gh, gw, gb
