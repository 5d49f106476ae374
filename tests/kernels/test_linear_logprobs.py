"""linear_logprobs on every backend against a float64 PyTorch reference.

The oracle is the reference in float64 on the same rounded inputs (bf16/fp16 upcast
exactly); gradients for hidden, weight and bias are compared with autograd's through it.
"""
import math
import zlib

import pytest
import torch

from sharpo_kernels._backend import backend_runs_on
from sharpo_kernels import linear_logprobs, token_logprobs
from sharpo_kernels.logprobs.cpu_tiles import ChunkOptions
from sharpo_kernels.logprobs.linear_cpu import _stash_views, linear_logprobs_cpu
from sharpo_kernels.logprobs.reference import linear_logprobs_reference

BACKENDS = ["torch", "cpu", pytest.param("triton", marks=pytest.mark.skipif(
    not backend_runs_on("triton", torch.device("cpu"))[0],
    reason="triton needs TRITON_INTERPRET=1 on CPU"))]
# (dtype, logp rtol/atol, gradient rtol/atol relative to the largest gradient entry)
DTYPES = [
    (torch.float32, 2e-6, 2e-5, 1e-5, 1e-5),
    (torch.bfloat16, 2e-6, 2e-5, 1.6e-2, 1e-3),
    (torch.float16, 2e-6, 2e-5, 2e-3, 1e-4),
]




def _make(n, h, v, dtype, gen, with_bias=True, n_ignored=4, ignore_index=-100):
    hidden = torch.randn(n, h, generator=gen).to(dtype)
    weight = (torch.randn(v, h, generator=gen) / math.sqrt(h) * 4).to(dtype)
    bias = torch.randn(v, generator=gen).to(dtype) if with_bias else None
    labels = torch.randint(0, v, (n,), generator=gen)
    if n_ignored:
        labels[torch.randperm(n, generator=gen)[:n_ignored]] = ignore_index
    return hidden, weight, bias, labels


def _grads(fn, hidden, weight, bias, g_lp, g_ent, dt=None):
    leaves = [t.detach().clone() if dt is None else t.detach().to(dt)
              for t in (hidden, weight, bias) if t is not None]
    for t in leaves:
        t.requires_grad_()
    b = leaves[2] if bias is not None else None
    lp, ent = fn(leaves[0], leaves[1], b)
    gl, ge = (g_lp, g_ent) if dt is None else (g_lp.to(dt), g_ent.to(dt))
    (lp * gl + ent * ge).sum().backward()
    return lp, ent, [t.grad for t in leaves]


def _reference_grads(hidden, weight, bias, labels, g_lp, g_ent, **kw):
    """(logp, entropy, grads) of the float64 reference on the same inputs (the oracle)."""
    return _grads(
        lambda a, w, b: linear_logprobs_reference(a, w, labels, bias=b, return_entropy=True,
                                                  **kw),
        hidden, weight, bias, g_lp, g_ent, dt=torch.float64)


def _close(got, want, rtol, atol, what):
    got, want = got.double(), want.double()
    assert got.shape == want.shape, what
    assert torch.isfinite(got).all(), f"{what}: non-finite"
    err = (got - want).abs() - (atol + rtol * want.abs())
    assert (err <= 0).all(), f"{what}: worst excess {err.max().item():.3g}"


def _check_all(backend, hidden, weight, bias, labels, g_lp, g_ent, tol, **kw):
    lp_rtol, lp_atol, g_rtol, g_atol = tol
    before = [t.clone() for t in (hidden, weight, bias) if t is not None]
    lp, ent, grads = _grads(
        lambda h, w, b: linear_logprobs(h, w, labels, bias=b, return_entropy=True,
                                        backend=backend, **kw),
        hidden, weight, bias, g_lp, g_ent)
    for a, b in zip(before, (hidden, weight, bias)):
        assert torch.equal(a, b)                       # inputs never modified in place
    rlp, rent, rgrads = _reference_grads(hidden, weight, bias, labels, g_lp, g_ent, **kw)
    assert lp.dtype == torch.float32 and ent.dtype == torch.float32
    _close(lp, rlp, lp_rtol, lp_atol, "logp")
    _close(ent, rent, lp_rtol, lp_atol, "entropy")
    for name, g, rg, inp in zip(("hidden", "weight", "bias"), grads, rgrads, before):
        assert g.dtype == inp.dtype and g.shape == inp.shape, name
        _close(g, rg, g_rtol, g_atol * max(1.0, rg.abs().max().item()), f"grad {name}")
    ignored = labels == -100
    assert (lp[ignored] == 0).all() and (ent[ignored] == 0).all()
    assert (grads[0][ignored] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,lp_rtol,lp_atol,g_rtol,g_atol", DTYPES)
@pytest.mark.parametrize("temperature,with_bias", [(1.0, False), (0.7, True)])
def test_matches_reference(backend, dtype, lp_rtol, lp_atol, g_rtol, g_atol, temperature,
                           with_bias, poisoned_alloc):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{backend}{dtype}{temperature}".encode()))
    n, h, v = 47, 31, 1237
    hidden, weight, bias, labels = _make(n, h, v, dtype, gen, with_bias)
    g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    _check_all(backend, hidden, weight, bias, labels, g_lp, g_ent,
               (lp_rtol, lp_atol, g_rtol, g_atol), temperature=temperature)


@pytest.mark.parametrize("backend", BACKENDS)
def test_large_logits_and_confident_rows(backend):
    """Logits ~ 1e3..1e4 and rows where p(label) ~ 1 (the bf16 cancellation case)."""
    gen = torch.Generator().manual_seed(11)
    n, h, v = 12, 16, 203
    hidden = torch.randn(n, h, generator=gen)
    weight = torch.randn(v, h, generator=gen)
    labels = torch.randint(0, v, (n,), generator=gen)
    hidden[0] *= 300                                    # |z| ~ 1e3..1e4
    weight[5] = hidden[1] * 3                           # z_5 of row 1 dominates: p ~ 1
    labels[1] = 5
    bias = torch.zeros(v)
    bias[7] = 60.0                                      # label 7 wins everywhere it is used
    labels[2] = 7
    g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    lp, ent, grads = _grads(
        lambda a, w, b: linear_logprobs(a, w, labels, bias=b, temperature=0.9,
                                        return_entropy=True, backend=backend),
        hidden, weight, bias, g_lp, g_ent)
    rlp, rent, rgrads = _reference_grads(hidden, weight, bias, labels, g_lp, g_ent,
                                         temperature=0.9)
    assert (lp <= 0).all()
    # the logits themselves are fp32 matmul results: |z| * 2^-24 * sqrt(H) uncertainty
    zmax = (hidden @ weight.t() + bias).abs().amax(1) / 0.9
    err = (lp.double() - rlp).abs()
    assert (err <= 1e-6 * zmax + 1e-5).all(), err
    assert abs(lp[2].item()) < 1e-6
    assert torch.isfinite(ent).all()
    for g, rg in zip(grads, rgrads):
        assert torch.isfinite(g).all()
        scale = rg.abs().max().item()
        assert ((g.double() - rg).abs() <= 1e-5 * scale).all()


def test_reference_gradcheck():
    gen = torch.Generator().manual_seed(12)
    hidden = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(6, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(6, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([5, -100, 0, 2])
    fn = lambda a, w, b: linear_logprobs_reference(a, w, labels, bias=b, temperature=0.8,
                                                   return_entropy=True)
    assert torch.autograd.gradcheck(fn, (hidden, weight, bias))


@pytest.mark.parametrize("options", [ChunkOptions(), ChunkOptions(tile_bytes=4 * 5 * 7,
                                                                  max_rows=5)])
def test_cpu_public_fp64_gradcheck(options):
    gen = torch.Generator().manual_seed(13)
    hidden = torch.randn(9, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(17, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(17, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([16, -100, 0, 2, 3, 3, -100, 9, 1])
    fn = lambda a, w, b: linear_logprobs_cpu(a, w, labels, b, 1.7, -100, True, options)
    assert torch.autograd.gradcheck(fn, (hidden, weight, bias))


@pytest.mark.parametrize("options", [ChunkOptions(tile_bytes=4 * 10 * 100, max_rows=10),
                                     ChunkOptions(tile_bytes=4 * 47 * 1237, max_rows=4096),
                                     ChunkOptions(tile_bytes=4 * 1, max_rows=1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_tiles(options, dtype):
    """Several row tiles, one tile, 1x1 tiles: same answer (fp32 and a bf16 weight)."""
    gen = torch.Generator().manual_seed(options.max_rows)
    n, h, v = (47, 31, 1237) if options.max_rows > 1 else (6, 5, 29)
    hidden, weight, bias, labels = _make(n, h, v, dtype, gen, n_ignored=2)
    g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    lp, ent, grads = _grads(
        lambda a, w, b: linear_logprobs_cpu(a, w, labels, b, 0.8, -100, True, options),
        hidden, weight, bias, g_lp, g_ent)
    rlp, rent, rgrads = _reference_grads(hidden, weight, bias, labels, g_lp, g_ent,
                                         temperature=0.8)
    _close(lp, rlp, 2e-6, 2e-5, "logp")
    _close(ent, rent, 2e-6, 2e-5, "entropy")
    g_rtol = 1e-5 if dtype == torch.float32 else 1.6e-2
    for g, rg in zip(grads, rgrads):
        _close(g, rg, g_rtol, g_rtol * rg.abs().max().item(), "grad")


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("entropy", [False, True])
def test_cpu_stashed_logits(with_bias, entropy, poisoned_alloc):
    """Backward reads the first vocabulary tiles' logits from the grad_weight buffer forward
    filled (`_stash_views`) instead of recomputing them: same answer as recomputing and as
    the fp64 reference, every grad_weight row written (the buffer starts NaN-poisoned)."""
    gen = torch.Generator().manual_seed(15 + 2 * with_bias + entropy)
    n, h, v = 9, 31, 1237                                # 7 valid rows, 13 tiles of 100
    hidden, weight, bias, labels = _make(n, h, v, torch.float32, gen, with_bias, n_ignored=2)
    opts = ChunkOptions(tile_bytes=4 * 7 * 100, max_rows=4096)
    kept = _stash_views(torch.empty(v, h), 7, 100)
    assert len(kept) >= 4, "the case must keep several tiles"
    g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    if not entropy:
        g_ent = torch.zeros(n)
    run = lambda o: lambda a, w, b: linear_logprobs_cpu(a, w, labels, b, 0.7, -100, entropy, o)
    lp, ent, grads = _grads(run(opts), hidden, weight, bias, g_lp, g_ent)
    _, _, plain = _grads(run(ChunkOptions(tile_bytes=opts.tile_bytes, stash_logits=False)),
                         hidden, weight, bias, g_lp, g_ent)
    rlp, rent, rgrads = _reference_grads(hidden, weight, bias, labels, g_lp, g_ent,
                                         temperature=0.7)
    _close(lp, rlp, 2e-6, 2e-5, "logp")
    if entropy:
        _close(ent, rent, 2e-6, 2e-5, "entropy")
    for g, pg, rg in zip(grads, plain, rgrads):
        _close(g, rg, 1e-5, 1e-5 * rg.abs().max().item(), "grad vs reference")
        _close(g, pg, 1e-6, 1e-6 * pg.abs().max().item(), "grad vs recomputed")


def test_cpu_stash_is_used_once():
    """A second backward through the same graph (retain_graph) cannot reuse the stash (the
    first backward overwrote it with grad_weight): it recomputes, and both are right; the
    first call's grad_weight is not written again."""
    gen = torch.Generator().manual_seed(16)
    hidden, weight, _, labels = _make(9, 31, 1237, torch.float32, gen, False, n_ignored=2)
    opts = ChunkOptions(tile_bytes=4 * 7 * 100)
    w = weight.clone().requires_grad_()
    lp, _ = linear_logprobs_cpu(hidden, w, labels, None, 1.0, -100, False, opts)
    g = torch.randn(9, generator=gen)
    first, = torch.autograd.grad(lp, w, g, retain_graph=True)
    kept = first.clone()
    second, = torch.autograd.grad(lp, w, g)
    wr = weight.double().requires_grad_()
    linear_logprobs_reference(hidden.double(), wr, labels).backward(g.double())
    for got in (first, second):
        _close(got, wr.grad, 1e-5, 1e-5 * wr.grad.abs().max().item(), "grad_weight")
    assert torch.equal(first, kept) and second.data_ptr() != first.data_ptr()


@pytest.mark.parametrize("kwargs, exc, name", [
    ({"tile_bytes": 0}, ValueError, "tile_bytes"),
    ({"tile_bytes": 1.5}, ValueError, "tile_bytes"),
    ({"max_rows": -1}, ValueError, "max_rows"),
    ({"token_tile_bytes": "64M"}, ValueError, "token_tile_bytes"),
    ({"stash_logits": 1}, TypeError, "stash_logits"),
])
def test_chunk_options_bad_input(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        ChunkOptions(**kwargs)


def test_stash_views_fit_and_do_not_overlap():
    """Tile j's kept logits lie in grad_weight rows >= v1_j (written only after tile j has
    read them), inside the buffer, disjoint, and one more tile would not have fitted."""
    for nv, h, v, vb in [(7, 31, 1237, 100), (2048, 896, 151936, 8192), (1, 4, 10, 1),
                         (50, 3, 40, 7), (5, 100, 64, 64), (3, 10, 95, 10)]:
        buf = torch.empty(v, h)
        views = _stash_views(buf, nv, vb)
        spans = []
        for j, t in enumerate(views):
            v1 = min(v, (j + 1) * vb)
            assert t.shape == (nv, v1 - j * vb) and t.is_contiguous()
            start = (t.data_ptr() - buf.data_ptr()) // 4
            assert start >= v1 * h and start + t.numel() <= v * h
            spans.append((start, start + t.numel()))
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        s = len(views)
        if s * vb < v:
            v1 = min(v, (s + 1) * vb)
            end = spans[-1][1] if spans else 0
            assert max(end, v1 * h) + nv * (v1 - s * vb) > v * h
    assert len(_stash_views(torch.empty(151936, 896), 2048, 8192)) == 7
    assert len(_stash_views(torch.empty(95, 10), 3, 10)) == 9    # nv <= H: all but the last


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_as_token_logprobs_and_partial_grads(backend):
    gen = torch.Generator().manual_seed(14)
    hidden = torch.randn(2, 5, 8, generator=gen)          # leading dims are flattened
    weight = torch.randn(40, 8, generator=gen)
    labels = torch.randint(0, 40, (2, 5), generator=gen)
    labels[0, 1] = -100
    lp = linear_logprobs(hidden, weight, labels, temperature=1.2, backend=backend)
    assert isinstance(lp, torch.Tensor) and lp.shape == (2, 5)
    want = token_logprobs(hidden @ weight.t(), labels, temperature=1.2, backend="cpu")
    _close(lp, want, 1e-5, 1e-5, "logp")
    # frozen lm_head: gradient for hidden only; and the weight only
    w = weight.clone()
    h = hidden.clone().requires_grad_()
    linear_logprobs(h, w, labels, backend=backend).sum().backward()
    hr = hidden.clone().requires_grad_()
    linear_logprobs_reference(hr, weight, labels).sum().backward()
    _close(h.grad, hr.grad, 1e-5, 1e-6, "grad hidden")
    w = weight.clone().requires_grad_()
    linear_logprobs(hidden, w, labels, backend=backend).sum().backward()
    wr = weight.clone().requires_grad_()
    linear_logprobs_reference(hidden, wr, labels).sum().backward()
    _close(w.grad, wr.grad, 1e-5, 1e-6, "grad weight")
    # all rows ignored, and no rows at all
    none = linear_logprobs(hidden, weight, torch.full((2, 5), -100), return_entropy=True,
                           backend=backend)
    assert (none[0] == 0).all() and (none[1] == 0).all()
    empty = linear_logprobs(torch.randn(0, 8), weight, torch.zeros(0, dtype=torch.long),
                            backend=backend)
    assert empty.shape == (0,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_scoring_and_compile(backend):
    gen = torch.Generator().manual_seed(15)
    hidden = torch.randn(11, 8, generator=gen)
    weight = torch.randn(33, 8, generator=gen, requires_grad=True)
    labels = torch.randint(0, 33, (11,), generator=gen)
    with torch.no_grad():
        lp = linear_logprobs(hidden, weight, labels, backend=backend)
    assert not lp.requires_grad
    _close(lp, linear_logprobs_reference(hidden.double(), weight.detach().double(), labels),
           1e-6, 1e-5, "logp")

    def loss_fn(h, w):
        lp, ent = linear_logprobs(torch.tanh(h), w, labels, temperature=0.9,
                                  return_entropy=True, backend=backend)
        return (lp * 0.5 + ent).mean()

    h1 = hidden.clone().requires_grad_()
    w1 = weight.detach().clone().requires_grad_()
    eager = loss_fn(h1, w1)
    eager.backward()
    h2 = hidden.clone().requires_grad_()
    w2 = weight.detach().clone().requires_grad_()
    out = torch.compile(loss_fn, backend="aot_eager")(h2, w2)
    out.backward()
    torch.testing.assert_close(out, eager, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(h2.grad, h1.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(w2.grad, w1.grad, rtol=1e-5, atol=1e-7)


def _args(**over):
    base = dict(hidden=torch.randn(4, 6), weight=torch.randn(9, 6),
                labels=torch.tensor([0, 8, -100, 3]))
    base.update(over)
    return base


@pytest.mark.parametrize("kwargs,exc,name", [
    (_args(weight=torch.randn(9, 5)), ValueError, "weight"),
    (_args(weight=torch.randn(9)), ValueError, "weight"),
    (_args(weight=torch.randn(9, 6, dtype=torch.float64)), TypeError, "weight"),
    (_args(labels=torch.tensor([0, 9, 1, 1])), ValueError, "labels"),
    (_args(labels=torch.tensor([0, 1, 1])), ValueError, "labels"),
    (_args(labels=torch.tensor([0.0, 1, 1, 1])), TypeError, "labels"),
    (_args(hidden=torch.ones(4, 6, dtype=torch.long)), TypeError, "hidden"),
    (_args(bias=torch.randn(8)), ValueError, "bias"),
    (_args(bias=torch.randn(9, dtype=torch.float16)), TypeError, "bias"),
    (_args(temperature=0), ValueError, "temperature"),
    (_args(temperature=-0.5), ValueError, "temperature"),
    (_args(temperature=math.inf), ValueError, "temperature"),
    (_args(ignore_index=2**70), ValueError, "^ignore_index:"),
    (_args(hidden=torch.randn(4, 0), weight=torch.randn(9, 0)), ValueError, "^hidden:"),
    (_args(hidden=torch.randn(4, 6, device="meta"), weight=torch.randn(9, 6, device="meta"),
           labels=torch.zeros(4, dtype=torch.long, device="meta")), ValueError, "^hidden:"),
    (_args(weight=torch.randn(9, 6, device="meta")), ValueError, "^weight:"),
    (_args(backend="fast"), ValueError, "backend"),
    (_args(backend=3), TypeError, "backend"),
    (_args(allow_tf32=1), TypeError, "^allow_tf32:"),
    (_args(allow_tf32="yes"), TypeError, "^allow_tf32:"),
])
def test_bad_input(kwargs, exc, name):
    hidden, weight, labels = kwargs.pop("hidden"), kwargs.pop("weight"), kwargs.pop("labels")
    with pytest.raises(exc, match=name):
        linear_logprobs(hidden, weight, labels, **kwargs)
