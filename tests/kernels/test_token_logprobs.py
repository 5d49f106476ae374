"""token_logprobs on every backend against a float64 PyTorch reference.

The oracle is the reference evaluated in float64 on the *same rounded* inputs (a bf16 input
is upcast exactly), so the tolerance only has to cover the kernels' fp32 arithmetic and,
for gradients, the rounding of the result to the input dtype.
"""
import math
import zlib

import pytest
import torch

from sharpo_kernels._backend import backend_runs_on
from sharpo_kernels import token_logprobs
from sharpo_kernels.logprobs.cpu_tiles import ChunkOptions
from sharpo_kernels.logprobs.token_cpu import token_logprobs_cpu
from sharpo_kernels.logprobs.reference import token_logprobs_reference

BACKENDS = ["torch", "cpu", pytest.param("triton", marks=pytest.mark.skipif(
    not backend_runs_on("triton", torch.device("cpu"))[0],
    reason="triton needs TRITON_INTERPRET=1 on CPU"))]
# (dtype, rtol/atol of the log-prob, rtol/atol of the gradient): the outputs are fp32 in
# every case; the gradient comes back in the input dtype and carries its rounding.
DTYPES = [
    (torch.float32, 2e-6, 1e-5, 1e-5, 1e-6),
    (torch.bfloat16, 2e-6, 1e-5, 1.6e-2, 1e-5),
    (torch.float16, 2e-6, 1e-5, 2e-3, 1e-6),
]




def _make(n, v, dtype, gen, scale=3.0, n_ignored=3, ignore_index=-100):
    logits = (torch.randn(n, v, generator=gen) * scale).to(dtype)
    labels = torch.randint(0, v, (n,), generator=gen)
    if n_ignored:
        labels[torch.randperm(n, generator=gen)[:n_ignored]] = ignore_index
    return logits, labels


def _oracle(logits, labels, g_lp, g_ent, **kw):
    x = logits.detach().double().requires_grad_()
    lp, ent = token_logprobs_reference(x, labels, return_entropy=True, **kw)
    (lp * g_lp.double() + ent * g_ent.double()).sum().backward()
    return lp, ent, x.grad


def _run(backend, logits, labels, g_lp, g_ent, **kw):
    x = logits.detach().clone().requires_grad_()
    lp, ent = token_logprobs(x, labels, return_entropy=True, backend=backend, **kw)
    (lp * g_lp + ent * g_ent).sum().backward()
    return lp, ent, x.grad


def _close(got, want, rtol, atol, what):
    got = got.double()
    want = want.double()
    assert got.shape == want.shape, what
    err = (got - want).abs() - (atol + rtol * want.abs())
    assert torch.isfinite(got).all() or not torch.isfinite(want).all(), f"{what}: non-finite"
    assert (err <= 0).all(), f"{what}: worst excess {err.max().item():.3g} at " \
                             f"{err.argmax().item()}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,lp_rtol,lp_atol,g_rtol,g_atol", DTYPES)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_matches_reference(backend, dtype, lp_rtol, lp_atol, g_rtol, g_atol, temperature,
                           poisoned_alloc):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{backend}{dtype}{temperature}".encode()))
    n, v = 47, 1237
    logits, labels = _make(n, v, dtype, gen)
    g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    before = logits.clone()
    lp, ent, grad = _run(backend, logits, labels, g_lp, g_ent, temperature=temperature)
    assert torch.equal(logits, before)  # never modified in place
    rlp, rent, rgrad = _oracle(logits, labels, g_lp, g_ent, temperature=temperature)
    assert lp.dtype == torch.float32 and ent.dtype == torch.float32
    assert grad.dtype == dtype and grad.shape == logits.shape
    _close(lp, rlp, lp_rtol, lp_atol, "logp")
    _close(ent, rent, lp_rtol, lp_atol, "entropy")
    # gradient entries are O(1/V): scale the absolute tolerance by the largest entry
    _close(grad, rgrad, g_rtol, g_atol * max(1.0, rgrad.abs().max().item()), "grad")
    ignored = labels == -100
    assert (lp[ignored] == 0).all() and (ent[ignored] == 0).all()
    assert (grad[ignored] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_large_magnitude_and_neg_inf(backend, poisoned_alloc):
    """|z| ~ 1e4, -inf entries (also at a label), a row where p(label) ~ 1."""
    gen = torch.Generator().manual_seed(7)
    n, v = 9, 301
    logits = torch.randn(n, v, generator=gen) * 4
    labels = torch.randint(0, v, (n,), generator=gen)
    logits[0] = logits[0] * 3000                      # |z| ~ 1e4
    logits[1] = logits[1] + 1e4                       # large common offset
    logits[2, ::3] = float("-inf")                    # -inf lanes
    labels[2] = 1
    logits[3, :-1] = float("-inf")                    # one finite lane only: p = 1
    labels[3] = v - 1
    logits[4, 10] = 40.0                              # p(label) ~ 1 - 3e-16
    labels[4] = 10
    logits[5, 11] = 20.0                              # p(label) ~ 1 - 6e-7: log p ~ -6e-7
    labels[5] = 11
    logits[6, 12] = float("-inf")                     # label at -inf: log p = -inf
    labels[6] = 12
    logits[7] = logits[7] - 1e4
    for temperature in (1.0, 0.37):
        g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
        lp, ent, grad = _run(backend, logits, labels, g_lp, g_ent, temperature=temperature)
        rlp, rent, rgrad = _oracle(logits, labels, g_lp, g_ent, temperature=temperature)
        assert lp[6] == float("-inf") and rlp[6] == float("-inf")
        keep = torch.arange(n) != 6
        # relative to |z|/T: the fp32 inputs carry that much absolute uncertainty
        scale = logits.masked_fill(~torch.isfinite(logits), 0).abs().amax(1) / temperature
        err = (lp[keep].double() - rlp[keep]).abs()
        assert (err <= 1e-7 * scale[keep] + 2e-6).all(), err
        assert (lp[keep] <= 0).all()                     # no bf16-style cancellation > 0
        assert abs(lp[4].item()) < 1e-6 and abs(lp[5].item() - rlp[5].item()) < 2e-7
        assert lp[3].item() == 0.0 and ent[3].item() == 0.0
        assert torch.isfinite(ent).all()
        # the kernels take x - max before dividing by T, so entropy and gradient stay
        # accurate at |z| ~ 1e4; the fp32 reference ("torch") divides first and loses
        # about |z| / T * 2^-24 per logit, which its tolerance has to allow for.
        loose = (1e-7 * scale.max().item()) if backend == "torch" else 0.0
        assert torch.isfinite(ent).all()
        _close(ent, rent, 1e-5, 1e-5 + 3 * loose, "entropy")
        assert torch.isfinite(grad).all()
        _close(grad, rgrad, 1e-5, 1e-5 + loose, "grad")


def test_reference_gradcheck():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(5, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 6, -100, 3, 2])
    for t in (1.0, 0.6):
        fn = lambda x: token_logprobs_reference(x, labels, temperature=t, return_entropy=True)
        assert torch.autograd.gradcheck(fn, (logits,))


@pytest.mark.parametrize("backend", ["cpu", "torch"])
def test_public_fp64_gradcheck(backend):
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(2, 3, 11, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([[0, 10, -1], [4, 4, 9]])
    fn = lambda x: token_logprobs(x, labels, temperature=1.3, ignore_index=-1,
                                  return_entropy=True, backend=backend)
    assert torch.autograd.gradcheck(fn, (logits,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_shapes_flags_and_partial_outputs(backend):
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 3, 50, generator=gen)
    labels = torch.randint(0, 50, (2, 3), generator=gen)
    labels[1, 2] = 7
    lp = token_logprobs(logits, labels, ignore_index=7, backend=backend)
    assert isinstance(lp, torch.Tensor) and lp.shape == (2, 3) and lp[1, 2] == 0
    want = token_logprobs_reference(logits.double(), labels, ignore_index=7)
    _close(lp, want, 1e-6, 1e-6, "logp")
    # gradient through the entropy alone, and through logp alone
    for which in (0, 1):
        x = logits.clone().requires_grad_()
        out = token_logprobs(x, labels, ignore_index=7, return_entropy=True, backend=backend)
        out[which].sum().backward()
        xr = logits.double().requires_grad_()
        token_logprobs_reference(xr, labels, ignore_index=7, return_entropy=True)[which] \
            .sum().backward()
        _close(x.grad, xr.grad, 1e-5, 1e-6, f"grad of output {which}")
    # no rows
    empty = token_logprobs(torch.randn(0, 50), torch.zeros(0, dtype=torch.long),
                           return_entropy=True, backend=backend)
    assert empty[0].shape == (0,) and empty[1].shape == (0,)


@pytest.mark.parametrize("rows_per_tile", [1, 5, 23])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_tiles(rows_per_tile, dtype, poisoned_alloc):
    """The chunked CPU path gives the same answer whatever its tiling (1, 5, all rows),
    also with an ignored row of all -inf logits (it must come out as exact zeros)."""
    gen = torch.Generator().manual_seed(rows_per_tile)
    logits, labels = _make(23, 1237, dtype, gen)
    logits[4] = float("-inf")
    labels[4] = -100
    g_lp, g_ent = torch.randn(23, generator=gen), torch.randn(23, generator=gen)
    x = logits.clone().requires_grad_()
    opts = ChunkOptions(token_tile_bytes=4 * 1237 * rows_per_tile)
    lp, ent = token_logprobs_cpu(x, labels, 0.9, -100, True, opts)
    (lp * g_lp + ent * g_ent).sum().backward()
    rlp, rent, rgrad = _oracle(logits, labels, g_lp, g_ent, temperature=0.9)
    keep = labels != -100
    _close(lp[keep], rlp[keep], 2e-6, 1e-5, "logp")
    _close(ent[keep], rent[keep], 2e-6, 1e-5, "entropy")
    g_tol = 1e-5 if dtype == torch.float32 else 1.6e-2
    _close(x.grad[keep], rgrad[keep], g_tol, 1e-6, "grad")
    assert lp[4] == 0 and ent[4] == 0 and (x.grad[4] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_under_torch_compile(backend):
    gen = torch.Generator().manual_seed(6)
    logits = torch.randn(13, 97, generator=gen)
    labels = torch.randint(0, 97, (13,), generator=gen)

    def loss_fn(x):
        lp, ent = token_logprobs(x * 1.5, labels, temperature=0.8, return_entropy=True,
                                 backend=backend)
        return (lp.exp() * 2 - 0.1 * ent).sum()

    x1 = logits.clone().requires_grad_()
    eager = loss_fn(x1)
    eager.backward()
    compiled = torch.compile(loss_fn, backend="aot_eager")
    x2 = logits.clone().requires_grad_()
    out = compiled(x2)
    out.backward()
    torch.testing.assert_close(out, eager, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x2.grad, x1.grad, rtol=1e-6, atol=1e-7)


def test_default_backend_on_cpu_is_chunked(monkeypatch):
    import sharpo_kernels.logprobs.api as mod
    seen = []
    real = mod.token_logprobs_cpu
    monkeypatch.setattr(mod, "token_logprobs_cpu", lambda *a, **k: seen.append(1) or real(*a, **k))
    token_logprobs(torch.randn(3, 5), torch.tensor([0, 1, 2]))
    assert seen == [1]


@pytest.mark.parametrize("call,exc,name", [
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(5, dtype=torch.long)),
     ValueError, "labels"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.tensor([0, 1, 9, 2])), ValueError,
     "labels"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.tensor([0, 1, -5, 2])), ValueError,
     "labels"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4)), TypeError, "labels"),
    (lambda: token_logprobs(torch.randint(0, 3, (4, 9)), torch.zeros(4, dtype=torch.long)),
     TypeError, "logits"),
    (lambda: token_logprobs([[0.0]], torch.zeros(1, dtype=torch.long)), TypeError, "logits"),
    (lambda: token_logprobs(torch.randn(4, 0), torch.zeros(4, dtype=torch.long)),
     ValueError, "logits"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            temperature=0.0), ValueError, "temperature"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            temperature=-1), ValueError, "temperature"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            temperature=math.nan), ValueError, "temperature"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            temperature="1"), TypeError, "temperature"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            ignore_index=1.5), TypeError, "ignore_index"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            ignore_index=2**70), ValueError, "^ignore_index:"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            ignore_index=-2**63 - 1), ValueError, "^ignore_index:"),
    (lambda: token_logprobs(torch.randn(4, 9, device="meta"),
                            torch.zeros(4, dtype=torch.long, device="meta")), ValueError,
     "^logits:"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            return_entropy=1), TypeError, "return_entropy"),
    (lambda: token_logprobs(torch.randn(4, 9), torch.zeros(4, dtype=torch.long),
                            backend="cuda-magic"), ValueError, "backend"),
])
def test_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_contiguous_logits(backend):
    """A vocabulary-padded view (row stride > V) and a transposed copy give the same."""
    gen = torch.Generator().manual_seed(8)
    padded = torch.randn(9, 130, generator=gen)
    logits = padded[:, :101]                           # stride(0) = 130
    labels = torch.randint(0, 101, (9,), generator=gen)
    x = logits.clone().requires_grad_()
    want = token_logprobs(x, labels, temperature=1.1, backend="torch")
    want.sum().backward()
    v = padded.clone().requires_grad_()
    got = token_logprobs(v[:, :101], labels, temperature=1.1, backend=backend)
    got.sum().backward()
    _close(got, want, 1e-6, 1e-6, "logp")
    _close(v.grad[:, :101], x.grad, 1e-5, 1e-7, "grad")
    assert (v.grad[:, 101:] == 0).all()
    t = logits.t().contiguous().t()                    # column-major
    _close(token_logprobs(t, labels, temperature=1.1, backend=backend), want, 1e-6, 1e-6,
           "logp column-major")
