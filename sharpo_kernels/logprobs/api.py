"""Per-token log-probabilities without the [N, V] softmax: `token_logprobs`, `linear_logprobs`
(docs/api.md): the public functions and the dispatch to a backend.

    token_logprobs(logits, labels, *, temperature=1.0, ignore_index=-100,
                   return_entropy=False, backend=None, check_finite=None) -> logp (, entropy)
    linear_logprobs(hidden, weight, labels, *, bias=None, temperature=1.0,
                    ignore_index=-100, return_entropy=False, backend=None,
                    check_finite=None, allow_tf32=False,
                    entropy_grad=True, grad_filter=0.0) -> logp (, entropy)

Both validate their arguments (checks.py: ValueError/TypeError naming the argument), flatten
the leading dimensions, and dispatch to a backend (chosen by sharpo_kernels/_backend.py),
one module each in this folder:

    torch   reference.py                     the plain PyTorch reference: it holds the full
                                             [N, V] log-softmax; any device.
    cpu     token_cpu.py, linear_cpu.py      the chunked CPU path; the default for CPU tensors.
    triton  token_triton.py, linear_triton.py  the Triton kernels (with online_lse_triton.py);
                                             the default for CUDA tensors; on CPU tensors
                                             only with TRITON_INTERPRET=1 (tests).

Every backend is differentiable (autograd) w.r.t. the floating inputs and returns the same
values (fp32; fp64 for fp64 inputs on the torch/cpu backends). The call is opaque to
`torch.compile` (a graph break around it), which keeps compiled models correct.
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import _backend
from .checks import (check_finite_linear, check_finite_logits, check_float, check_label_values,
                     check_labels, check_linear, check_scalars, resolve_check_finite)
from .grad_filter import check_grad_filter
from .linear_cpu import linear_logprobs_cpu
from .token_cpu import token_logprobs_cpu
from .reference import linear_logprobs_reference, token_logprobs_reference

__all__ = ["token_logprobs", "linear_logprobs", "LOGPROBS_BACKENDS"]

LOGPROBS_BACKENDS = _backend.OP_BACKENDS["token_logprobs"]   # = linear_logprobs'; automatic order


def _finish(logp, entropy, lead, return_entropy):
    logp = logp.reshape(lead)
    if return_entropy:
        return logp, entropy.reshape(lead)
    return logp


@torch.compiler.disable
def _token_dispatch(backend, logits, labels, temperature, ignore_index, return_entropy,
                    check_finite=False):
    check_label_values(labels, logits.shape[-1], ignore_index)
    if check_finite:
        check_finite_logits(logits, labels, ignore_index, temperature)
    if backend == "torch":
        out = token_logprobs_reference(logits, labels, temperature=temperature,
                                       ignore_index=ignore_index, return_entropy=return_entropy)
        return out if return_entropy else (out, None)
    if backend == "cpu":
        return token_logprobs_cpu(logits, labels, temperature, ignore_index, return_entropy)
    from .token_triton import token_logprobs_triton
    return token_logprobs_triton(logits, labels, temperature, ignore_index, return_entropy)


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor, *, temperature: float = 1.0,
                   ignore_index: int = -100, return_entropy: bool = False,
                   backend: Optional[str] = None, check_finite: Optional[bool] = None):
    """log softmax(logits / temperature) at the labels, never materialising [N, V].

    Args:
        logits: [..., V] float32/bfloat16/float16 (float64 on the torch/cpu backends).
        labels: [...] integer, the leading shape of logits; each in [0, V) or ignore_index.
        temperature: > 0; the softmax is taken of logits / temperature.
        ignore_index: label value whose rows give log-prob 0, entropy 0 and no gradient.
        return_entropy: also return the entropy of softmax(logits / temperature).
        backend: None (automatic), "cpu", "triton" or "torch".
        check_finite: refuse (ValueError naming ``logits`` and the row) a scored row that
            holds NaN or +inf or only -inf; -inf entries (masked tokens) are allowed. One
            min/max pass over the logits. None (default): on for CPU tensors, off for
            CUDA tensors (then such rows give NaN log-probs). docs/api.md.

    Returns:
        logp [...] float32 (float64 for float64 logits), and entropy [...] when asked.
        Differentiable w.r.t. logits (through both outputs).
    """
    check_float("logits", logits)
    temperature, ignore_index = check_scalars(temperature, ignore_index, return_entropy)
    vocab = logits.shape[-1]
    if vocab == 0:
        raise ValueError("logits: the vocabulary (last) dimension is empty")
    check_labels(labels, logits.shape[:-1], logits.device)
    check_finite = resolve_check_finite(check_finite, logits.device)
    name = _backend.resolve_backend(backend, logits.device, _backend.OP_BACKENDS["token_logprobs"])
    lead = labels.shape
    logits2 = logits.reshape(-1, vocab)
    labels2 = labels.reshape(-1).long()
    logp, entropy = _token_dispatch(name, logits2, labels2, temperature, ignore_index,
                                    return_entropy, check_finite)
    return _finish(logp, entropy, lead, return_entropy)


@torch.compiler.disable
def _linear_dispatch(backend, hidden, weight, bias, labels, temperature, ignore_index,
                     return_entropy, check_finite=False, allow_tf32=False, entropy_grad=True,
                     grad_filter=0.0):
    check_label_values(labels, weight.shape[0], ignore_index)
    if check_finite:
        check_finite_linear(hidden, weight, bias, labels, ignore_index, temperature)
    if backend == "torch":
        out = linear_logprobs_reference(hidden, weight, labels, bias=bias,
                                        temperature=temperature, ignore_index=ignore_index,
                                        return_entropy=return_entropy)
        if not return_entropy:
            return out, None
        return out[0], (out[1] if entropy_grad else out[1].detach())
    if backend == "cpu":
        return linear_logprobs_cpu(hidden, weight, labels, bias, temperature, ignore_index,
                                   return_entropy, entropy_grad=entropy_grad,
                                   grad_filter=grad_filter)
    from .linear_triton import linear_logprobs_triton
    return linear_logprobs_triton(hidden, weight, labels, bias, temperature, ignore_index,
                                  return_entropy, allow_tf32=allow_tf32,
                                  entropy_grad=entropy_grad, grad_filter=grad_filter)


def linear_logprobs(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, *,
                    bias: Optional[torch.Tensor] = None, temperature: float = 1.0,
                    ignore_index: int = -100, return_entropy: bool = False,
                    backend: Optional[str] = None, check_finite: Optional[bool] = None,
                    allow_tf32: bool = False, entropy_grad: bool = True,
                    grad_filter: float = 0.0):
    """token_logprobs(hidden @ weight.T + bias, labels) without holding the [N, V] logits.

    Args:
        hidden: [..., H] float (the last hidden states).
        weight: [V, H], same dtype and device as hidden (the lm_head weight).
        labels: [...] integer, the leading shape of hidden; each in [0, V) or ignore_index.
        bias: [V] or None, same dtype as weight.
        temperature, ignore_index, return_entropy, backend: as in token_logprobs.
        check_finite: refuse (ValueError naming ``hidden``, ``weight`` or ``bias``) NaN/inf
            in a scored row of hidden, anywhere in weight, or NaN/+inf in bias (-inf bias
            entries mask tokens). One min/max pass over hidden and weight. None
            (default): on for CPU tensors, off for CUDA tensors. docs/api.md.
        allow_tf32: let float32 inputs use TF32 tensor-core products (10-bit mantissa
            operands, fp32 accumulation) on the triton backend, forward and backward: faster
            on a GPU, about 1e-3 relative error in the logits. Off (default): IEEE fp32
            products. bf16/fp16 inputs and the other backends are unaffected. docs/api.md.
        entropy_grad: False returns the entropy without a gradient (a metric). With the
            head frozen (weight and bias need no gradient, hidden does), the op then takes
            its two-matmul path (linear_frozen.py: the forward forms d logp / d hidden, the
            backward scales it); so it does without return_entropy. docs/api.md.
        grad_filter: opt-in, in [0, 1); 0 (default) is exact. The cpu/triton backward
            skips the products of vocabulary blocks whose every |dL/dz_iv| is at most
            grad_filter (|g_i| + |e_i|) / T (g, e: the upstream gradients); the error
            bound is in grad_filter.py and docs/api.md. The torch backend ignores it.

    Returns:
        logp [...] float32 (float64 for float64 inputs), <= 0, and entropy [...] when
        asked. Differentiable w.r.t. hidden, weight and bias (the entropy only with
        entropy_grad). Rows at ignore_index cost nothing.
    """
    check_linear(hidden, weight, bias)
    temperature, ignore_index = check_scalars(temperature, ignore_index, return_entropy)
    for name, flag in (("allow_tf32", allow_tf32), ("entropy_grad", entropy_grad)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name}: expected a bool, got {type(flag).__name__}")
    grad_filter = check_grad_filter(grad_filter)
    check_labels(labels, hidden.shape[:-1], hidden.device)
    check_finite = resolve_check_finite(check_finite, hidden.device)
    name = _backend.resolve_backend(backend, hidden.device,
                                    _backend.OP_BACKENDS["linear_logprobs"])
    lead = labels.shape
    hidden2 = hidden.reshape(-1, hidden.shape[-1])
    labels2 = labels.reshape(-1).long()
    logp, entropy = _linear_dispatch(name, hidden2, weight, bias, labels2, temperature,
                                     ignore_index, return_entropy, check_finite, allow_tf32,
                                     entropy_grad, grad_filter)
    return _finish(logp, entropy, lead, return_entropy)
