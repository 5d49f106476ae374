"""One colour scheme for the credit page (HTML) and plot (PNG): a segment is shaded by what
its tokens get relative to GRPO, the factor A~/A = (1 - lam) + lam * rho * w
(docs/method.md §4: w the segment weight, rho its length factor, lam the mixing weight).
factor > 1 (a stronger update than GRPO's): blue; < 1 (weaker): orange; 1 or no teacher
(GRPO's advantage): white / grey. Intensity: |log factor| relative to the group's largest."""
from __future__ import annotations

import math
from typing import Optional

from sharpo_kernels import effective_coefficient

NO_TEACHER = (238, 238, 238)
_STRONGER = (46, 109, 219)
_WEAKER = (230, 126, 34)
MIN_SCALE = math.log(1.1)      # a group whose factors all lie in [1/1.1, 1.1] stays pale


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def credit_factor(seg: dict, lam: float) -> Optional[float]:
    """(1 - lam) + lam * rho * w of a segment (the kernel's ``effective_coefficient``),
    None when it has no weight (no teacher)."""
    w, rho = seg.get("weight"), seg.get("length_factor")
    if not (_finite(w) and _finite(rho)):
        return None
    return effective_coefficient(w, rho, lam)


def factor_scale(factors) -> float:
    """The |log factor| that gets the full colour: the largest in the group (>= log 1.1)."""
    logs = [abs(math.log(f)) for f in factors if f is not None and f > 0]
    return max([MIN_SCALE] + logs)


def factor_rgb(factor: Optional[float], scale: float) -> tuple[int, int, int]:
    if factor is None or not math.isfinite(factor) or factor <= 0:
        return NO_TEACHER
    t = max(-1.0, min(1.0, math.log(factor) / scale))
    base = _STRONGER if t > 0 else _WEAKER
    a = abs(t)
    r, g, b = (round(255 + (c - 255) * a * 0.85) for c in base)
    return r, g, b


def factor_css(factor: Optional[float], scale: float) -> str:
    return "rgb({},{},{})".format(*factor_rgb(factor, scale))


def group_lam(record: dict) -> float:
    return float((record.get("estimator_config") or {}).get("lam", 0.0))
