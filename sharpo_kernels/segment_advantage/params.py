"""SHARPO's coefficients (docs/method.md §4): their one definition, defaults and check.

    SharpoCoefficients   lam, alpha, tau, rho_min, rho_max with the paper's defaults
    SHARPO_DEFAULTS      SharpoCoefficients() -- every default in the project reads it:
                         `segment_advantage`, the trainer's `sharpo` estimator
                         (sharpo_train/estimators), the verl and TRL integrations
    effective_coefficient  (1 - lam) + lam * rho * w, the factor a segment's tokens get on
                         A_i (floats or tensors; the backends and the credit page use it)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .checks import check_params

__all__ = ["SharpoCoefficients", "SHARPO_DEFAULTS", "effective_coefficient"]


@dataclass(frozen=True)
class SharpoCoefficients:
    lam: float = 0.2          # mixing weight of the segment reweighting (paper: 0.2, 0.05)
    alpha: float = 0.5        # bound of the weight deviation |w - 1| <= alpha, in (0, 1)
    tau: float = 1.0          # temperature of the gap squashing, > 0
    rho_min: float = 0.25     # length factor clipped to [rho_min, rho_max]
    rho_max: float = 4.0

    def checked(self) -> "SharpoCoefficients":
        """The same coefficients as floats; ValueError/TypeError naming the first bad one
        (`check_params`: 0 <= lam <= 1, 0 < alpha < 1, tau > 0, 0 < rho_min <= rho_max)."""
        return SharpoCoefficients(*check_params(*dataclasses.astuple(self)))


SHARPO_DEFAULTS = SharpoCoefficients()


def effective_coefficient(weight, length_factor, lam):
    """(1 - lam) + lam * rho * w: A~ / A_i on a segment's tokens (docs/method.md §4)."""
    return (1.0 - lam) + lam * length_factor * weight
