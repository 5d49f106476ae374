"""How sure a success rate is, and whether one policy beat another on the same tasks.

* ``wilson_interval(k, n)``: the 95% Wilson score interval of a rate k/n (it stays inside
  [0, 1] and is sensible at k=0 or k=n, unlike the normal approximation).
* ``paired_difference(before, after)``: two evaluations of the same tasks ({task id: 0/1},
  eval.json's "per_task") compared game by game: the difference of rates, its 95% bootstrap
  interval (tasks resampled with replacement, the pairs kept together), and the exact
  two-sided sign test (McNemar) on the discordant games: games only ``after`` won vs games
  only ``before`` won. Pairing removes the tasks' own difficulty from the noise, so it tells
  a real change from a lucky draw with fewer games than two independent intervals do.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% (z=1.96) Wilson score interval of the rate k/n; (0, 1) when n == 0."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_test_p(wins: int, losses: int) -> float:
    """Exact two-sided binomial (sign / McNemar) test of wins vs losses at p = 1/2."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class PairedDifference:
    """``after`` minus ``before`` on the tasks both played."""

    n: int                # tasks in both evaluations
    before: float         # success rate of ``before`` on them
    after: float          # success rate of ``after`` on them
    diff: float           # after - before
    lo: float             # 95% paired bootstrap interval of diff
    hi: float
    gained: int           # tasks only ``after`` won
    lost: int             # tasks only ``before`` won
    p_value: float        # exact two-sided sign test on gained vs lost

    def describe(self, unit: str = "games") -> str:
        one = unit[:-1] if unit.endswith("s") else unit
        return (f"{100 * self.diff:+.1f} points (95% paired bootstrap "
                f"{100 * self.lo:+.1f} to {100 * self.hi:+.1f}; {self.gained} "
                f"{one if self.gained == 1 else unit} gained, "
                f"{self.lost} lost, sign test p = {self.p_value:.3g}; n = {self.n})")


def paired_difference(before: Mapping[str, float], after: Mapping[str, float],
                      n_boot: int = 10000, seed: int = 0) -> PairedDifference:
    """Compare two per-task outcome maps on their common task ids (values 0/1 or scores in
    [0, 1]; gained/lost count tasks whose value went up/down). Raises ValueError when they
    share no task."""
    for name, m in (("before", before), ("after", after)):
        if not isinstance(m, Mapping):
            raise TypeError(f"{name}: expected a mapping task id -> outcome, got "
                            f"{type(m).__name__}")
    ids = sorted(set(before) & set(after))
    if not ids:
        raise ValueError("paired_difference: the two evaluations share no task id")
    b = [float(before[i]) for i in ids]
    a = [float(after[i]) for i in ids]
    n = len(ids)
    d = [x - y for x, y in zip(a, b)]
    import numpy as np
    diffs = np.asarray(d, dtype=float)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    boots = np.sort(diffs[idx].mean(axis=1))          # one vectorised draw of all resamples
    lo = float(boots[int(0.025 * (n_boot - 1))])
    hi = float(boots[int(round(0.975 * (n_boot - 1)))])
    gained, lost = sum(x > 0 for x in d), sum(x < 0 for x in d)
    return PairedDifference(n=n, before=sum(b) / n, after=sum(a) / n, diff=sum(d) / n,
                            lo=lo, hi=hi, gained=gained, lost=lost,
                            p_value=sign_test_p(gained, lost))
