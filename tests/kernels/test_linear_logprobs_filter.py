"""linear_logprobs' opt-in gradient filter (sharpo_kernels/logprobs/grad_filter.py) against
the float64 reference: the skipped blocks are exactly those the criterion allows, and the
gradients stay within the stated bound; off by default (bit-identical to no filter)."""
import math

import pytest
import torch

from sharpo_kernels import linear_logprobs
from sharpo_kernels._backend import backend_runs_on
from sharpo_kernels.logprobs.grad_filter import FILTER_BLOCK, kept_columns
from sharpo_kernels.logprobs.reference import (linear_logprobs_reference,
                                               token_logprobs_reference)

TRITON_CPU = backend_runs_on("triton", torch.device("cpu"))[0]
needs_triton = pytest.mark.skipif(not TRITON_CPU, reason="triton needs TRITON_INTERPRET=1")
TAU = 2.0 ** -12


def _case(seed, dtype, n=37, h=19, v=1100):
    """Peaked rows: a shifted bias makes whole vocabulary blocks improbable (p ~ e^-14),
    as a real model's rare tokens are; ignored rows; a label in a low block."""
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, h, generator=gen).to(dtype)
    weight = (torch.randn(v, h, generator=gen) * 0.5).to(dtype)
    bias = torch.zeros(v)
    bias[200:900] = -14.0
    bias = bias.to(dtype)
    labels = torch.randint(0, 200, (n,), generator=gen)
    labels[[2, 9]] = -100
    labels[4] = v // 2                               # a scored label in a low block
    return gen, hidden, weight, bias, labels


def _run(fn, hidden, weight, bias, g_lp, g_ent):
    x, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    lp, ent = fn(x, w, bias)
    (lp * g_lp + ent * g_ent).sum().backward()
    return lp, ent, x.grad, w.grad


def _reference_dz(hidden, weight, bias, labels, g_lp, g_ent, temperature):
    """float64 dL/dz [N, V] (0 at ignored rows)."""
    z = (hidden.double() @ weight.double().t() + bias.double()).requires_grad_()
    lp, ent = token_logprobs_reference(z, labels, temperature=temperature,
                                       return_entropy=True)
    (lp * g_lp.double() + ent * g_ent.double()).sum().backward()
    return z.grad


def _bound_check(grads, rgrads, dz, hidden, weight, labels, g_lp, g_ent, temperature,
                 block, g_rtol):
    """|got - exact| <= the unfiltered tolerance + what the candidate blocks (those the
    criterion may skip, with 1% slack for rounding) contribute."""
    valid = labels != -100
    thr = TAU * (g_lp.abs() + g_ent.abs()).double() / temperature
    thr = torch.where(valid, thr, torch.zeros_like(thr))
    v = dz.shape[1]
    nb = -(-v // block)
    ratio = torch.zeros(nb, dtype=torch.float64)
    for b in range(nb):
        blk = dz[valid, b * block:(b + 1) * block].abs()
        ratio[b] = (blk / thr[valid].unsqueeze(1).clamp(min=1e-300)).max()
    cand = torch.zeros(v, dtype=torch.bool)
    for b in range(nb):
        if ratio[b] <= 1.01:
            cand[b * block:(b + 1) * block] = True
    assert cand.any(), "the case must offer blocks to skip"
    wd, hd = weight.double(), hidden.double()
    gh_slack = (dz[:, cand].abs() @ wd[cand].abs()) * 1.01
    gw_slack = (dz[:, cand].abs().t() @ hd.abs()) * 1.01
    gh, gw = grads
    rgh, rgw = rgrads
    for name, got, want, slack in (("hidden", gh, rgh, gh_slack),
                                   ("weight", gw[cand], rgw[cand], gw_slack),
                                   ("weight kept", gw[~cand], rgw[~cand], 0.0)):
        tol = g_rtol * want.abs() + g_rtol * max(1.0, rgh.abs().max().item()) + slack
        err = (got.double() - want).abs()
        assert (err <= tol).all(), f"{name}: worst excess {(err - tol).max().item():.3g}"
    return cand, ratio


@pytest.mark.parametrize("dtype,g_rtol", [(torch.float32, 1e-5), (torch.bfloat16, 1.6e-2)])
@pytest.mark.parametrize("temperature", [1.0, 0.8])
@pytest.mark.parametrize("backend", ["cpu", pytest.param("triton", marks=needs_triton)])
def test_filter_within_bound_and_skips(backend, dtype, g_rtol, temperature, poisoned_alloc):
    gen, hidden, weight, bias, labels = _case(int(temperature * 10) + len(backend), dtype)
    n = hidden.shape[0]
    g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen) * 0.3
    if backend == "cpu":
        block = FILTER_BLOCK
        fn = lambda tau: lambda x, w, b: linear_logprobs(
            x, w, labels, bias=b, temperature=temperature, return_entropy=True,
            backend="cpu", grad_filter=tau)
    else:
        from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                           linear_logprobs_triton)
        block = 32
        cfg = LinearTritonConfig(block_n=16, block_v=block, block_h=16,
                                 chunk_bytes=35 * 4 * 96)         # 3 tiles a chunk
        fn = lambda tau: lambda x, w, b: linear_logprobs_triton(
            x, w, labels, b, temperature, -100, True, cfg, grad_filter=tau)
    lp, ent, gh, gw = _run(fn(TAU), hidden, weight, bias, g_lp, g_ent)
    _, _, gh0, gw0 = _run(fn(0.0), hidden, weight, bias, g_lp, g_ent)
    xr, wr = hidden.double().requires_grad_(), weight.double().requires_grad_()
    rlp, rent = linear_logprobs_reference(xr, wr, labels, bias=bias.double(),
                                          temperature=temperature, return_entropy=True)
    (rlp * g_lp.double() + rent * g_ent.double()).sum().backward()
    torch.testing.assert_close(lp.double(), rlp, rtol=2e-6, atol=2e-5)   # forward untouched
    dz = _reference_dz(hidden, weight, bias, labels, g_lp, g_ent, temperature)
    cand, ratio = _bound_check((gh, gw), (xr.grad, wr.grad), dz, hidden, weight, labels,
                               g_lp, g_ent, temperature, block, g_rtol)
    skipped = (gw.abs().sum(1) == 0)
    assert skipped.any(), "the filter skipped nothing"
    assert not skipped[~cand].any(), "a block beyond the criterion was skipped"
    assert not (gw0.abs().sum(1) == 0).any()              # off: nothing skipped
    assert (gh[labels == -100] == 0).all()


@pytest.mark.parametrize("backend", ["cpu", pytest.param("triton", marks=needs_triton)])
def test_filter_off_is_exactly_the_unfiltered_op(backend):
    gen, hidden, weight, bias, labels = _case(5, torch.float32, n=11, v=300)
    g = torch.randn(11, generator=gen)
    outs = []
    for kw in ({}, {"grad_filter": 0.0}, {"grad_filter": 0}):
        x, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        (linear_logprobs(x, w, labels, bias=bias, backend=backend, **kw) * g).sum().backward()
        outs.append((x.grad, w.grad))
    for gh, gw in outs[1:]:
        assert torch.equal(gh, outs[0][0]) and torch.equal(gw, outs[0][1])


def test_kept_columns_blocks():
    dz = torch.zeros(3, 300)
    thr = torch.full((3,), 0.5)
    assert kept_columns(dz, thr, 128).numel() == 0                # every block negligible
    dz[1, 130] = 0.6                                               # block 1 kept
    dz[2, 299] = -0.7                                              # the ragged last block
    cols = kept_columns(dz, thr, 128)
    assert cols.tolist() == list(range(128, 256)) + list(range(256, 300))
    dz[0, 0] = 1.0
    assert kept_columns(dz, thr, 128) is None                      # all kept: no filtering


@pytest.mark.parametrize("value,exc", [(-0.1, ValueError), (1.0, ValueError),
                                       (float("nan"), ValueError), ("2e-4", TypeError),
                                       (True, TypeError)])
def test_bad_grad_filter(value, exc):
    h, w = torch.randn(2, 3), torch.randn(5, 3)
    with pytest.raises(exc, match="grad_filter"):
        linear_logprobs(h, w, torch.tensor([0, 1]), grad_filter=value)
