"""segment_advantage: SHARPO's segment-level effective advantage, one folder per op.

    api.py             segment_advantage(), SegmentAdvantage, dispatch to a backend
    coefficients.py    SHARPO's coefficients: their defaults (the one definition), check
                       and the factor (1 - lam) + lam * rho * w
    checks.py          argument and data checks (ValueError/TypeError naming the argument)
    segment_table.py   the [B, Kmax] segment-table math (docs/method.md §4) the torch,
                       triton and cuda backends share
    reference.py       `torch` backend: plain vectorised PyTorch, any device
    native.py          `cpp` (CPU) and `cuda` backends: wrappers of `_sharpo_native` (csrc/)
    triton_kernels.py  `triton` backend: kernels and launcher
"""
from .api import SEGMENT_ADVANTAGE_BACKENDS, SegmentAdvantage, segment_advantage
from .coefficients import (COEFFICIENT_NAMES, SHARPO_DEFAULTS, SharpoCoefficients,
                     effective_coefficient, with_coefficients)

__all__ = ["segment_advantage", "SegmentAdvantage", "SEGMENT_ADVANTAGE_BACKENDS",
           "SHARPO_DEFAULTS", "SharpoCoefficients", "COEFFICIENT_NAMES", "with_coefficients",
           "effective_coefficient"]
