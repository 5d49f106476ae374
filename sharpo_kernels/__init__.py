"""sharpo_kernels: SHARPO's segment advantage and fused log-prob kernels (docs/api.md).

Every kernel has a plain PyTorch reference ("torch") and faster backends ("cpp", "cpu",
"triton", "cuda"); see `available_backends()` and sharpo_kernels/_backend.py.

Layout, one folder per op:
    segment_advantage/  segment_advantage, SegmentAdvantage (torch, cpp, triton, cuda)
    logprobs/           token_logprobs, linear_logprobs (torch, cpu, triton)
    _backend.py         backend selection for every op; available_backends()
    testing.py          random inputs and the float64 loop oracle (tests, benchmarks, demo)
"""
from ._backend import available_backends
from .segment_advantage import (SHARPO_DEFAULTS, SegmentAdvantage, SharpoCoefficients,
                                effective_coefficient, segment_advantage)

from .logprobs import linear_logprobs, token_logprobs

__all__ = ["segment_advantage", "SegmentAdvantage", "SHARPO_DEFAULTS", "SharpoCoefficients",
           "effective_coefficient", "available_backends",
           "token_logprobs", "linear_logprobs"]
