"""SHARPO's coefficients (docs/method.md §4): their one definition, defaults and check.

    SharpoCoefficients   lam, alpha, tau, rho_min, rho_max with the paper's defaults and a
                         one-line help each (the names are stated here only)
    SHARPO_DEFAULTS      SharpoCoefficients() -- every default in the project reads it:
                         `segment_advantage`, the trainer's `sharpo` estimator
                         (sharpo_train/estimators), the verl and TRL integrations
    COEFFICIENT_NAMES    the five names, in order
    with_coefficients    class decorator: a settings dataclass gets the five as fields
                         (default and help from here), e.g. the trainer's SharpoParams and
                         TRL's SharpoConfig; ``SharpoCoefficients.of(obj)`` reads them back
    effective_coefficient  (1 - lam) + lam * rho * w, the factor a segment's tokens get on
                         A_i (floats or tensors; the backends and the credit page use it)
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from .checks import check_params

__all__ = ["SharpoCoefficients", "SHARPO_DEFAULTS", "COEFFICIENT_NAMES", "with_coefficients",
           "effective_coefficient"]


def setting(default: float, help: str):
    """A field with its one-line help in ``metadata["help"]``: the help mechanism of every
    settings class of the project (sharpo_train/settings/loader.py ``setting``, which this
    torch-only package cannot import) and what HfArgumentParser reads."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class SharpoCoefficients:
    lam: float = setting(0.2, "SHARPO mixing weight lambda, in [0, 1] (paper: 0.2, 0.05).")
    alpha: float = setting(0.5, "Bound of the segment weight deviation |w - 1| <= alpha, in (0, 1).")
    tau: float = setting(1.0, "Temperature of the gap squashing, > 0.")
    rho_min: float = setting(0.25, "Lower clip of the length factor, > 0.")
    rho_max: float = setting(4.0, "Upper clip of the length factor, >= rho_min.")

    def checked(self) -> "SharpoCoefficients":
        """The same coefficients as floats; ValueError/TypeError naming the first bad one
        (`check_params`: 0 <= lam <= 1, 0 < alpha < 1, tau > 0, 0 < rho_min <= rho_max)."""
        return SharpoCoefficients(*check_params(*dataclasses.astuple(self)))

    @classmethod
    def of(cls, obj) -> "SharpoCoefficients":
        """The coefficients of ``obj``: a mapping with the five keys, or any object with the
        five attributes (a settings dataclass made by ``with_coefficients``)."""
        get = obj.__getitem__ if isinstance(obj, Mapping) else (lambda k: getattr(obj, k))
        return cls(**{k: get(k) for k in COEFFICIENT_NAMES})

    def kwargs(self) -> dict:
        """{name: value}: the keyword arguments of ``segment_advantage``."""
        return dataclasses.asdict(self)


SHARPO_DEFAULTS = SharpoCoefficients()
COEFFICIENT_NAMES = tuple(f.name for f in dataclasses.fields(SharpoCoefficients))


def with_coefficients(cls):
    """Class decorator, under ``@dataclass``: ``cls`` gets the five coefficients as its
    first own fields (type float, the defaults of ``SHARPO_DEFAULTS``, the help text in
    the field's ``metadata["help"]``, as argument parsers such as HfArgumentParser read
    it). A field ``cls`` declares itself is left as it is."""
    own = dict(cls.__dict__.get("__annotations__", {}))
    added = {}
    for f in dataclasses.fields(SharpoCoefficients):
        if f.name not in own:
            added[f.name] = float
            setattr(cls, f.name, field(default=f.default, metadata=dict(f.metadata)))
    cls.__annotations__ = {**added, **own}
    return cls


def effective_coefficient(weight, length_factor, lam):
    """(1 - lam) + lam * rho * w: A~ / A_i on a segment's tokens (docs/method.md §4)."""
    return (1.0 - lam) + lam * length_factor * weight
