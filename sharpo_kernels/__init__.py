"""sharpo_kernels: SHARPO's segment advantage and fused log-prob kernels (docs/api.md).

Every kernel has a plain PyTorch reference ("torch") and faster backends ("cpp", "cpu",
"triton", "cuda"); see `available_backends()` and sharpo_kernels/_backend.py.

Layout, one folder per op:
    segment_advantage/  segment_advantage, SegmentAdvantage (torch, cpp, triton, cuda)
    logprobs/           token_logprobs, linear_logprobs (torch, cpu, triton)
    policy_loss/        linear_policy_loss: the policy loss fused with linear_logprobs
    _backend.py         backend selection for every op; available_backends()
    testing.py          random inputs and the float64 loop oracle (tests, benchmarks, demo)
    dispatch_count.py   launches and host reads of one call, counted on CPU tensors
"""
from ._backend import available_backends
from .segment_advantage import (COEFFICIENT_NAMES, SHARPO_DEFAULTS, SegmentAdvantage,
                                SharpoCoefficients, effective_coefficient, segment_advantage,
                                with_coefficients)

__all__ = ["segment_advantage", "SegmentAdvantage", "SHARPO_DEFAULTS", "SharpoCoefficients",
           "COEFFICIENT_NAMES", "with_coefficients", "effective_coefficient", "available_backends",
           "token_logprobs", "linear_logprobs", "linear_policy_loss"]

# token_logprobs / linear_logprobs load on first use: logprobs/api.py marks its dispatch
# @torch.compiler.disable, which imports torch._dynamo and with it triton (about 1 s);
# reading SHARPO's defaults or computing a segment advantage needs neither.
_LAZY = {"token_logprobs", "linear_logprobs", "linear_policy_loss"}


def __getattr__(name):
    if name in _LAZY:
        if name == "linear_policy_loss":
            from .policy_loss import linear_policy_loss
            return linear_policy_loss
        from . import logprobs
        return getattr(logprobs, name)
    raise AttributeError(f"module 'sharpo_kernels' has no attribute {name!r}")
