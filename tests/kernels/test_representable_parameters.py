"""Parameters and values at the edge of float32 (docs/api.md "Accepted ranges"): every
backend on CPU (torch, cpp/cpu, the Triton interpreter) refuses the same inputs with a
ValueError naming the argument, raised by the shared checks before any backend runs, or
returns the same finite result. Before these checks, rho_max=1e308 was a RuntimeError in
torch/triton and accepted by cpp, fp64 advantages of 1e300 became inf silently, and
temperature=1e-300 / 1e-40 / 3.5e38 gave NaN or -inf even with check_finite."""
import math

import numpy as np
import pytest
import torch

from sharpo_kernels import _backend, linear_logprobs, segment_advantage, token_logprobs

CPU = torch.device("cpu")
SEG_BACKENDS = _backend.usable_backends(CPU, ("torch", "cpp", "triton"))
LP_BACKENDS = _backend.usable_backends(CPU, ("torch", "cpu", "triton"))
T_MIN, T_MAX = 2.0 ** -126, 2.0 ** 126
BELOW_MIN = float(np.nextafter(T_MIN, 0.0))
ABOVE_MAX = float(np.nextafter(T_MAX, math.inf))


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    t, s = -torch.rand(3, 7, generator=g), -torch.rand(3, 7, generator=g)
    ids = torch.tensor([[0, 0, 1, 1, 1, -1, -1], [0, 1, 2, 2, 2, 2, 2], [-1, 0, 0, 0, 0, 0, 1]])
    return t, s, ids, torch.tensor([1.0, -0.5, 0.25])


@pytest.mark.parametrize("backend", SEG_BACKENDS)
@pytest.mark.parametrize("name,value", [
    ("rho_max", 1e308), ("rho_max", 1e39), ("rho_max", ABOVE_MAX), ("tau", 1e-300),
    ("tau", BELOW_MIN), ("tau", 1e300), ("rho_min", 1e-300), ("rho_min", BELOW_MIN)])
def test_segment_parameters_outside_float32_are_refused(backend, name, value):
    t, s, ids, adv = _batch()
    kw = {name: value}
    if name == "rho_min":
        kw["rho_max"] = 4.0
    with pytest.raises(ValueError, match=rf"^{name}: must lie in \[2\*\*-126, 2\*\*126\]"):
        segment_advantage(t, s, ids, adv, backend=backend, **kw)


@pytest.mark.parametrize("adv", [
    torch.tensor([1e300, 1.0, 1.0], dtype=torch.float64),      # finite, not in float32
    torch.tensor([1.0, 3e38, 1.0]),                            # finite fp32, A~ overflows
    torch.tensor([1.0, 1.0, -1e38])])
@pytest.mark.parametrize("backend", SEG_BACKENDS)
def test_advantages_whose_product_overflows_float32_are_refused(backend, adv):
    t, s, ids, _ = _batch()
    with pytest.raises(ValueError, match=r"^advantages: .* at row \d times the largest"):
        segment_advantage(t, s, ids, adv, backend=backend)


def test_segment_parameters_at_the_edges_agree_across_backends():
    t, s, ids, adv = _batch(1)
    adv = adv * 1e-30                                          # room for rho_max = 2**126
    for kw in ({"tau": T_MIN}, {"tau": T_MAX}, {"rho_min": T_MIN, "rho_max": T_MAX},
               {"rho_max": T_MAX, "lam": 1.0}):
        outs = [segment_advantage(t, s, ids, adv, backend=b, **kw) for b in SEG_BACKENDS]
        for o in outs:
            assert torch.isfinite(o.advantages).all(), kw
        for o in outs[1:]:
            torch.testing.assert_close(o.advantages, outs[0].advantages, rtol=1e-5, atol=0)
    big = torch.tensor([1e38, -1e37, 5e37])                   # |A| * 1.6 < 1.7e38: accepted
    outs = [segment_advantage(t, s, ids, big, backend=b, rho_max=1.0) for b in SEG_BACKENDS]
    for o in outs:
        assert torch.isfinite(o.advantages).all()
        torch.testing.assert_close(o.advantages, outs[0].advantages, rtol=1e-5, atol=0)


def _lp(fn, backend, temperature, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    if fn == "token":
        x, lab = torch.rand(5, 11, generator=g) * scale, torch.randint(0, 11, (5,), generator=g)
        return token_logprobs(x, lab, temperature=temperature, backend=backend,
                              check_finite=True)
    h, w = torch.rand(5, 3, generator=g) * scale, torch.rand(11, 3, generator=g)
    lab = torch.randint(0, 11, (5,), generator=g)
    return linear_logprobs(h, w, lab, temperature=temperature, backend=backend,
                           check_finite=True)


@pytest.mark.parametrize("fn", ["token", "linear"])
@pytest.mark.parametrize("backend", LP_BACKENDS)
@pytest.mark.parametrize("temperature", [1e-300, 1e-40, BELOW_MIN, ABOVE_MAX, 3.5e38, 1e300])
def test_temperature_outside_float32_is_refused(fn, backend, temperature):
    with pytest.raises(ValueError, match=r"^temperature: must lie in \[2\*\*-126, 2\*\*126\]"):
        _lp(fn, backend, temperature)


@pytest.mark.parametrize("fn", ["token", "linear"])
def test_temperature_at_the_edges_agrees_across_backends(fn):
    for temperature, scale in ((T_MAX, 1.0), (T_MIN, 1e-2), (1e-30, 1e-2)):
        outs = [_lp(fn, b, temperature, scale=scale) for b in LP_BACKENDS]
        for o in outs:
            assert torch.isfinite(o).all(), (fn, temperature, o)
        for o in outs[1:]:
            torch.testing.assert_close(o, outs[0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("backend", LP_BACKENDS)
def test_token_logits_that_overflow_once_scaled_are_refused(backend):
    x = torch.zeros(3, 5)
    x[1, 2] = 1e30                                   # max/T = 1e40: not a float32
    lab = torch.tensor([0, 0, 4])
    with pytest.raises(ValueError, match=r"^logits: row 1 \(label 0\) overflows once scaled"):
        token_logprobs(x, lab, temperature=1e-10, backend=backend)
    x = torch.zeros(2, 4)
    x[0, 1], x[0, 3] = 3e38, -3e38                   # max - label = 6e38 even at T = 10
    with pytest.raises(ValueError, match=r"^logits: row 0 \(label 3\) overflows"):
        token_logprobs(x, torch.tensor([3, 0]), temperature=10.0, backend=backend)
    lab = torch.tensor([0, -100, 4])                 # the overflowing row at ignore_index
    x = torch.zeros(3, 5)
    x[1, 2] = 1e30
    out = token_logprobs(x, lab, temperature=1e-10, backend=backend)
    assert torch.isfinite(out).all() and out[1] == 0


@pytest.mark.parametrize("backend", LP_BACKENDS)
def test_linear_logits_that_may_overflow_are_refused(backend):
    h, w = torch.ones(2, 3), torch.ones(4, 3)
    h[1] = 1e20                                      # logits ~ 1e40 even at T = 1
    w[2] = 1e19
    with pytest.raises(ValueError, match=r"^hidden: row 1 \(label 1\) may give logits"):
        linear_logprobs(h, w, torch.tensor([0, 1]), backend=backend)
    with pytest.raises(ValueError, match=r"^hidden: row 0 \(label 0\) may give logits"):
        linear_logprobs(torch.ones(1, 3), torch.ones(4, 3), torch.tensor([0]),
                        temperature=1e-38 * 2, backend=backend)
    out = linear_logprobs(h, w, torch.tensor([0, -100]), backend=backend)   # row 1 ignored
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("backend", SEG_BACKENDS)
@pytest.mark.parametrize("name", ["lam", "alpha", "tau", "rho_min", "rho_max"])
def test_an_int_beyond_float64_is_a_value_error(backend, name):
    """10**400 made float() raise OverflowError (not a ValueError naming the argument)."""
    t, s, ids, adv = _batch()
    with pytest.raises(ValueError, match=rf"^{name}: must be finite, got an int of 401 digits"):
        segment_advantage(t, s, ids, adv, backend=backend, **{name: 10 ** 400})


@pytest.mark.parametrize("fn", ["token", "linear"])
@pytest.mark.parametrize("backend", LP_BACKENDS)
def test_a_temperature_int_beyond_float64_is_a_value_error(fn, backend):
    with pytest.raises(ValueError, match=r"^temperature: must be finite and > 0, got an int"):
        _lp(fn, backend, 10 ** 400)


@pytest.mark.parametrize("backend", SEG_BACKENDS)
def test_log_probs_whose_segment_sum_overflows_are_refused(backend):
    """+inf and -inf deltas in one segment made gap and every advantage of the row NaN."""
    t = torch.tensor([[3e38, 3e38, -3e38, -3e38], [-1.0, -2.0, -1.0, -1.0]])
    s = torch.tensor([[-3e38, -3e38, 3e38, 3e38], [-1.5, -1.0, -1.0, -1.0]])
    ids = torch.tensor([[0, 0, 0, 0], [0, 0, 1, 1]])
    adv = torch.tensor([1.0, -1.0])
    with pytest.raises(ValueError, match=r"^teacher_logp: 3e\+38 at row 0, position 0 is too "
                                         r"large in magnitude"):
        segment_advantage(t, s, ids, adv, backend=backend)
    # where unused (no segment, masked, or no teacher) any magnitude is allowed
    for kw in ({"has_teacher": torch.tensor([False, True])},
               {"response_mask": torch.tensor([[0, 0, 0, 0], [1, 1, 1, 1]])}):
        if "response_mask" in kw:
            ids2 = torch.tensor([[-1, -1, -1, -1], [0, 0, 1, 1]])
        else:
            ids2 = ids
        out = segment_advantage(t, s, ids2, adv, backend=backend, **kw)
        assert torch.isfinite(out.advantages).all()


def _outcome(backend, *args, **kw):
    try:
        return segment_advantage(*args, backend=backend, **kw)
    except ValueError as e:
        return str(e)


def test_log_prob_and_advantage_bounds_agree_at_the_edge():
    """The two data bounds of "Accepted ranges", exactly at the edge and one float32 step
    past it: every backend accepts the same values (and gives the same result) and refuses
    the same ones with the same message. The single-pass kernels check them inside the
    kernel, the others on the host."""
    from sharpo_kernels.segment_advantage.checks import _FP32_HALF, logp_bound, max_coefficient
    L = 4
    edge = float(np.float32(logp_bound(L)))          # the bound as float32 compares it
    past = float(np.nextafter(np.float32(edge), np.float32(math.inf)))
    ids = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])
    s = -torch.rand(2, L, generator=torch.Generator().manual_seed(5))
    adv = torch.tensor([1.0, -1.0])
    for value, ok in ((edge, True), (-edge, True), (past, False), (-past, False)):
        t = s.clone()
        t[1, 2] = value
        outs = [_outcome(b, t, s, ids, adv) for b in SEG_BACKENDS]
        assert all(isinstance(o, str) != ok for o in outs), (value, outs)
        if ok:
            for o in outs[1:]:
                torch.testing.assert_close(o.advantages, outs[0].advantages, rtol=1e-5, atol=0)
        else:
            assert len(set(outs)) == 1 and outs[0].startswith("teacher_logp: "), outs
    c = max_coefficient(0.2, 0.5, 4.0)
    a_edge = _FP32_HALF / c                          # |A| * c == half the range: accepted
    for a, ok in ((a_edge, True), (float(np.nextafter(a_edge, math.inf)) * (1 + 1e-12), False)):
        advs = torch.tensor([a, -1.0], dtype=torch.float64)
        if torch.tensor(a).abs().double().item() * c > _FP32_HALF:
            ok = False
        outs = [_outcome(b, s, s, ids, advs) for b in SEG_BACKENDS]
        assert all(isinstance(o, str) != ok for o in outs), (a, outs)
        if not ok:
            assert len(set(outs)) == 1 and outs[0].startswith("advantages: "), outs


def test_nan_padding_keeps_the_log_prob_range_check_to_one_read():
    """check_logp_range (the torch reference's host check): NaN padding, which is legal,
    no longer defeats its one-read fast path (aminmax propagated NaN; issue 44)."""
    from sharpo_kernels.dispatch_count import count_dispatch
    from sharpo_kernels.segment_advantage.checks import check_logp_range
    t, s, ids, _ = _batch()
    t[0, 6] = s[0, 5] = float("nan")                 # padding: outside any segment
    c = count_dispatch(check_logp_range, t, s, ids, None, None)
    assert c.host_reads == 1, c.ops


def test_remembered_parameters_still_refuse_their_look_alikes():
    """check_params remembers accepted plain-float tuples (a repeated call's fast path):
    after one is remembered, a bool, an int, numpy or a NaN that compares or hashes like it
    is still checked and refused or converted as before, and a rejected tuple is never
    remembered."""
    from sharpo_kernels.segment_advantage import checks
    good = (1.0, 0.5, 1.0, 0.25, 4.0)
    assert checks.check_params(*good) == good
    assert good in checks._ACCEPTED_PARAMS
    with pytest.raises(TypeError, match="^lam: expected a real number, got bool"):
        checks.check_params(True, 0.5, 1.0, 0.25, 4.0)     # True == 1.0, same hash
    out = checks.check_params(1, 0.5, np.float64(1.0), 0.25, 4)
    assert out == good and all(type(x) is float for x in out)
    with pytest.raises(TypeError, match="^tau: expected a real number, got list"):
        checks.check_params(1.0, 0.5, [1.0], 0.25, 4.0)      # unhashable: no TypeError of set
    for bad in [(1.5, 0.5, 1.0, 0.25, 4.0), (1.0, 0.5, math.nan, 0.25, 4.0)]:
        for _ in range(2):
            with pytest.raises(ValueError):
                checks.check_params(*bad)
        assert bad not in checks._ACCEPTED_PARAMS
