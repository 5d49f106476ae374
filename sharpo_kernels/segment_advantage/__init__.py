"""segment_advantage: SHARPO's segment-level effective advantage, one folder per op.

    api.py             segment_advantage(), SegmentAdvantage, dispatch to a backend
    coefficients.py    SHARPO's coefficients: their defaults (the one definition), check
                       and the factor (1 - lam) + lam * rho * w
    checks.py          argument and data checks (ValueError/TypeError naming the argument)
    segment_table.py   the [B, Kmax] segment-table math (docs/method.md §4) of the torch
                       reference
    reference.py       `torch` backend: plain vectorised PyTorch, any device
    native.py          `cpp` (CPU) and `cuda` backends: wrappers of `_sharpo_native` (csrc/)
    triton_kernels.py  `triton` backend: kernels and launcher
    single_pass.py     host side of the one-pass triton and cuda backends: buffers, the one
                       read of the error word, SegmentCheck (check="deferred")
"""
from .api import SEGMENT_ADVANTAGE_BACKENDS, SegmentAdvantage, SegmentCheck, segment_advantage
from .coefficients import (COEFFICIENT_NAMES, SHARPO_DEFAULTS, SharpoCoefficients,
                     effective_coefficient, with_coefficients)

__all__ = ["segment_advantage", "SegmentAdvantage", "SegmentCheck", "SEGMENT_ADVANTAGE_BACKENDS",
           "SHARPO_DEFAULTS", "SharpoCoefficients", "COEFFICIENT_NAMES", "with_coefficients",
           "effective_coefficient"]
