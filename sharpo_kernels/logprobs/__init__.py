"""logprobs: `token_logprobs` and `linear_logprobs`, one folder for both ops (they share
the math, the checks and the online log-sum-exp step).

    api.py                public functions, dispatch to a backend
    checks.py             argument checks (ValueError/TypeError naming the argument)
    reference.py          `torch` backend: plain PyTorch, materialises [N, V]; the oracle
    cpu_tiles.py          `cpu` backend: the chunked tile math both ops share, tile sizing
    token_cpu.py          `cpu` backend of token_logprobs: chunked autograd path
    linear_cpu.py         `cpu` backend of linear_logprobs: never holds [N, V] logits
    online_lse.py         the online log-sum-exp rescale step in torch (linear_cpu.py, and the
                          merge of the Triton launcher's vocabulary splits)
    online_lse_triton.py  the same step as a Triton function (both Triton kernels)
    token_triton.py       `triton` backend of token_logprobs: kernels and launcher
    linear_triton.py      `triton` backend of linear_logprobs: forward kernel, launcher, tiles
    linear_tiles.py       the logits tile both linear kernels compute (fp32 / TF32 / half)
    linear_backward_triton.py  its backward: d-logits kernel per vocabulary chunk + cuBLAS
                          products, each gradient written once (no atomics)
    linear_frozen.py      the frozen-head path of both linear backends: the forward forms
                          d logp / d hidden, the backward one product (2 matmuls in all)
    grad_filter.py        the backward's opt-in gradient filter: criterion, kept columns
"""
from .api import LOGPROBS_BACKENDS, linear_logprobs, token_logprobs

__all__ = ["token_logprobs", "linear_logprobs", "LOGPROBS_BACKENDS"]
