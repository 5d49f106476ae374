"""analysis/report/stats.py: Wilson intervals, the exact sign test, paired differences of two
evaluations of the same tasks (the demo's "beyond noise" line)."""
import math
import random

import pytest

from sharpo_train.analysis.report.stats import paired_difference, sign_test_p, wilson_interval


@pytest.mark.parametrize("k,n,lo,hi", [
    (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (20, 120, 0.1106, 0.2435),
    (5, 10, 0.2366, 0.7634)])
def test_wilson_interval_known_values(k, n, lo, hi):
    got = wilson_interval(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-4)


def test_wilson_interval_bad_counts():
    for k, n in ((-1, 5), (6, 5), (0, -1)):
        with pytest.raises(ValueError, match="k <= n"):
            wilson_interval(k, n)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_sign_test_matches_the_binomial_sum():
    # 9 wins vs 1 loss: 2 * P(X <= 1), X ~ Bin(10, 1/2) = 2 * 11 / 1024
    assert sign_test_p(9, 1) == pytest.approx(22 / 1024)
    assert sign_test_p(1, 9) == sign_test_p(9, 1)
    assert sign_test_p(5, 5) == 1.0 and sign_test_p(0, 0) == 1.0
    for w, l in ((3, 0), (12, 4), (0, 7)):
        n, k = w + l, min(w, l)
        ref = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        assert sign_test_p(w, l) == pytest.approx(ref)


def test_paired_difference_counts_and_interval():
    rng = random.Random(3)
    ids = [f"g{i}" for i in range(150)]
    before = {i: int(rng.random() < 0.2) for i in ids}
    after = dict(before)
    flipped_up = [i for i in ids if before[i] == 0][:12]
    flipped_down = [i for i in ids if before[i] == 1][:2]
    for i in flipped_up:
        after[i] = 1
    for i in flipped_down:
        after[i] = 0
    after["only-after"] = 1                      # not in both: ignored
    d = paired_difference(before, after, n_boot=4000, seed=1)
    assert d.n == 150 and (d.gained, d.lost) == (12, 2)
    assert d.diff == pytest.approx(10 / 150)
    assert d.after - d.before == pytest.approx(d.diff)
    assert d.lo <= d.diff <= d.hi and d.lo > 0   # 12 vs 2 discordant games: beyond noise
    assert d.p_value == pytest.approx(sign_test_p(12, 2))
    assert "+6.7 points" in d.describe() and "12 games gained, 2 lost" in d.describe()


def test_paired_difference_of_identical_evaluations_is_zero():
    m = {f"t{i}": i % 3 == 0 for i in range(30)}
    d = paired_difference(m, dict(m))
    assert (d.diff, d.lo, d.hi, d.gained, d.lost, d.p_value) == (0, 0, 0, 0, 0, 1.0)


def test_paired_difference_bad_input():
    with pytest.raises(ValueError, match="share no task"):
        paired_difference({"a": 1}, {"b": 0})
    with pytest.raises(TypeError, match="before"):
        paired_difference([1, 0], {"a": 1})


def test_demo_change_sentence_pairs_the_same_games():
    from sharpo_train.analysis.report.demo import change_sentence
    ids = [f"g{i}" for i in range(60)]
    before = {i: int(k < 10) for k, i in enumerate(ids)}
    after = {i: int(k < 10 or 30 <= k < 42) for k, i in enumerate(ids)}
    res = lambda m: {"success": sum(m.values()) / len(m), "episodes": len(m), "per_task": m}
    text = change_sentence(res(before), res(after), "SHARPO", "games")
    assert "warm start 16.7% (10/60; 95% Wilson" in text and "after SHARPO 36.7% (22/60" in text
    assert "12 games gained, 0 lost" in text and "beyond noise" in text
    same = change_sentence(res(before), res(before), "GRPO", "games")
    assert "+0.0 points" in same and "within noise" in same
    # evaluations without per-task outcomes (older runs): the intervals only
    old = {"success": 0.25, "episodes": 8}
    assert "Paired" not in change_sentence(old, old, "GRPO", "games")
    assert change_sentence(None, old, "GRPO", "games").startswith("After GRPO: 25.0% (2/8")
