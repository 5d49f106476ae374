"""linear_policy_loss (sharpo_kernels/policy_loss) against the unfused loss in float64: the
reference log-probs (logprobs/reference.py) then the trainer's own loss functions
(sharpo_train/step/losses.py: ppo_clip_loss, kl_low_var, aggregate), through autograd.

Odd shapes, fp32/bf16, ignore_index rows (and a non-default ignore_index), temperature,
bias, trainable and frozen head, several row chunks, poisoned outputs, bad input.
"""
import math
import zlib

import pytest
import torch

from sharpo_kernels import linear_logprobs, linear_policy_loss
from sharpo_kernels._backend import backend_runs_on
from sharpo_kernels.logprobs.reference import linear_logprobs_reference
from sharpo_kernels.policy_loss import FusedOptions
from sharpo_kernels.policy_loss.fused_cpu import DEFAULT_FUSED
from sharpo_kernels.policy_loss.token_terms import LossTerms, token_terms
from sharpo_train.step.losses import aggregate, kl_low_var, ppo_clip_loss

BACKENDS = ["torch", "cpu", pytest.param("triton", marks=pytest.mark.skipif(
    not backend_runs_on("triton", torch.device("cpu"))[0],
    reason="triton needs TRITON_INTERPRET=1 on CPU"))]
# (dtype, loss rtol, gradient tolerance relative to the largest entry)
DTYPES = [(torch.float32, 1e-5, 2e-5), (torch.bfloat16, 1e-5, 1.6e-2)]
COEFS = dict(clip_low=0.2, clip_high=0.28, kl_coef=0.1, entropy_coef=0.01)


def _case(n, h, v, dtype, gen, with_bias=True, ignore_index=-100, temperature=0.8):
    hidden = torch.randn(n, h, generator=gen).to(dtype)
    weight = (torch.randn(v, h, generator=gen) * 3 / math.sqrt(h)).to(dtype)
    bias = torch.randn(v, generator=gen).to(dtype) if with_bias else None
    labels = torch.randint(0, v, (n,), generator=gen)
    labels[torch.randperm(n, generator=gen)[:max(1, n // 6)]] = ignore_index
    with torch.no_grad():
        lp = linear_logprobs_reference(hidden.double(), weight.double(), labels,
                                       bias=None if bias is None else bias.double(),
                                       temperature=temperature, ignore_index=ignore_index)
    # old/ref near the current policy: some ratios inside the clip range, some outside
    old = (lp + 0.3 * torch.randn(n, generator=gen, dtype=torch.float64)).float()
    ref = (lp + 0.5 * torch.randn(n, generator=gen, dtype=torch.float64)).float()
    adv = torch.randn(n, generator=gen)
    weights = torch.rand(n, generator=gen) * (labels != ignore_index)
    weights /= weights.sum()
    return hidden, weight, bias, labels, adv, old, ref, weights


def _unfused(hidden, weight, bias, labels, adv, old, ref, weights, *, temperature,
             ignore_index=-100, clip_low, clip_high, kl_coef, entropy_coef, need=(1, 1, 1)):
    """float64 oracle: reference log-probs, then the trainer's loss; -> (loss, grads)."""
    leaves = [None if t is None else t.detach().double().requires_grad_(bool(r))
              for t, r in zip((hidden, weight, bias), need)]
    lp, ent = linear_logprobs_reference(leaves[0], leaves[1], labels, bias=leaves[2],
                                        temperature=temperature, ignore_index=ignore_index,
                                        return_entropy=True)
    w = weights.double()
    pg, _ = ppo_clip_loss(lp, old.double(), adv.double(), clip_low, clip_high)
    loss = aggregate(pg, w)
    if kl_coef:
        loss = loss + kl_coef * aggregate(kl_low_var(lp, ref.double()), w)
    if entropy_coef:
        loss = loss - entropy_coef * aggregate(ent, w)
    loss.backward()
    return loss.detach(), [None if t is None else t.grad for t in leaves], lp.detach(), \
        ent.detach()


def _fused(backend, hidden, weight, bias, labels, adv, old, ref, weights, need=(1, 1, 1),
           scale=1.0, **kw):
    leaves = [None if t is None else t.detach().clone().requires_grad_(bool(r))
              for t, r in zip((hidden, weight, bias), need)]
    kw.setdefault("return_entropy", True)
    out = linear_policy_loss(leaves[0], leaves[1], labels, adv, old, weights=weights,
                             bias=leaves[2], ref_logp=ref, backend=backend, **kw)
    if any(t is not None and t.requires_grad for t in leaves):
        (out.loss * scale).backward()
    return out, [None if t is None else t.grad for t in leaves]


def _close(got, want, tol, what):
    assert got is not None and want is not None, what
    assert bool(got.isfinite().all()), f"{what}: non-finite entries"
    err = (got.double() - want).abs().max().item()
    scale = want.abs().max().item()
    assert err <= tol * max(scale, 1e-12), f"{what}: max error {err:.3g} vs scale {scale:.3g}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,loss_tol,g_tol", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("entropy_coef,return_entropy", [(0.01, True), (0.0, True), (0.0, False)],
                         ids=["entropy-bonus", "entropy-logged", "no-entropy"])
def test_matches_unfused_float64(backend, dtype, loss_tol, g_tol, with_bias, temperature,
                                 entropy_coef, return_entropy, poisoned_alloc):
    """Trainable head. With an entropy bonus dL/dz is formed in the tile; without one (the
    trainer's default logs the entropy) the cpu backend folds the row scale into the
    [R, H] side of its products (fused_cpu._products); without the entropy at all its
    statistics skip the entropy's sums."""
    gen = torch.Generator().manual_seed(zlib.crc32(
        f"{backend}{dtype}{with_bias}{temperature}{entropy_coef}".encode()))
    n, h, v = 29, 17, 311
    case = _case(n, h, v, dtype, gen, with_bias, temperature=temperature)
    coefs = dict(COEFS, entropy_coef=entropy_coef)
    want, wgrads, wlp, went = _unfused(*case, temperature=temperature, **coefs)
    # two row chunks of 16 rows + a tail on the chunked backends
    opts = FusedOptions(chunk_bytes=16 * v * 4)
    out, grads = _fused(backend, *case, temperature=temperature, options=opts,
                        return_entropy=return_entropy, **coefs)
    assert abs(out.loss.item() - want.item()) <= loss_tol * max(1.0, abs(want.item()))
    for name, g, w in zip(("hidden", "weight", "bias"), grads, wgrads):
        if w is not None:
            assert g.dtype == dtype, name
            _close(g, w, g_tol, f"grad {name}")
    _close(out.logp, wlp, 2e-6, "logp")
    if return_entropy:
        _close(out.entropy, went, 2e-6, "entropy")
    else:
        assert out.entropy.eq(0).all()
    assert not out.logp.requires_grad and not out.entropy.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("need", [(1, 0, 0), (0, 1, 1), (1, 1, 0)],
                         ids=["frozen-head", "frozen-hidden", "no-bias-grad"])
def test_frozen_inputs(backend, need, poisoned_alloc):
    """A frozen head (LoRA): only grad_hidden is formed (2 GEMMs); the others as asked."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"{backend}{need}".encode()))
    case = _case(23, 13, 157, torch.float32, gen)
    want, wgrads, _, _ = _unfused(*case, temperature=1.0, need=need, **COEFS)
    out, grads = _fused(backend, *case, need=need, temperature=1.0,
                        options=FusedOptions(chunk_bytes=7 * 157 * 4), **COEFS)
    assert abs(out.loss.item() - want.item()) <= 1e-5 * max(1.0, abs(want.item()))
    for name, g, w, r in zip(("hidden", "weight", "bias"), grads, wgrads, need):
        if r:
            _close(g, w, 2e-5, f"grad {name}")
        else:
            assert g is None, name


@pytest.mark.parametrize("backend", ["cpu", BACKENDS[2]])
@pytest.mark.parametrize("dtype,loss_tol,g_tol", DTYPES)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_frozen_head_without_entropy_bonus_takes_the_direction_path(
        backend, dtype, loss_tol, g_tol, temperature, kl_coef, monkeypatch, poisoned_alloc):
    """Frozen head, entropy_coef 0 (the entropy logged, not differentiated): grad_hidden =
    g_lp J through linear_logprobs' frozen-head forward of the backend (fused_cpu.py
    `_frozen_head_loss`; fused_triton.py through linear_logprobs_triton_frozen_forward),
    several vocabulary tiles, against the float64 oracle."""
    from sharpo_kernels.logprobs import linear_cpu, linear_triton
    mod, cols = (linear_cpu, 64) if backend == "cpu" else (linear_triton, 128)
    calls = []
    real = mod.frozen_head_forward
    monkeypatch.setattr(mod, "frozen_head_forward",
                        lambda *a, **k: calls.append(a[4:6]) or real(*a, **k))
    gen = torch.Generator().manual_seed(zlib.crc32(f"{dtype}{temperature}{kl_coef}".encode()))
    case = _case(31, 19, 293, dtype, gen, temperature=temperature)
    coefs = dict(COEFS, entropy_coef=0.0, kl_coef=kl_coef)
    want, wgrads, wlp, went = _unfused(*case, temperature=temperature, need=(1, 0, 0),
                                       **coefs)
    out, grads = _fused(backend, *case, need=(1, 0, 0), temperature=temperature,
                        options=FusedOptions(chunk_bytes=26 * cols * 4), **coefs)
    assert calls == [(26, cols)], calls   # 26 scored rows, vocabulary tiles of `cols`
    assert abs(out.loss.item() - want.item()) <= loss_tol * max(1.0, abs(want.item()))
    assert grads[0].dtype == dtype and grads[1] is None and grads[2] is None
    _close(grads[0], wgrads[0], g_tol, "grad hidden")
    _close(out.logp, wlp, 2e-6, "logp")
    _close(out.entropy, went, 2e-6, "entropy")
    assert out.logp[case[3] == -100].eq(0).all() and out.entropy[case[3] == -100].eq(0).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("coefs", [dict(clip_low=0.1), dict(clip_low=0.3, clip_high=0.5,
                                                           kl_coef=0.4),
                                   dict(clip_low=0.2, entropy_coef=-0.05)],
                         ids=["pg-only", "kl", "entropy"])
def test_terms_and_leading_dims(backend, coefs):
    """Each term alone, [B, L] inputs, a non-default ignore_index, the default (token-mean)
    weights, and an upstream scalar other than 1 (the backward scales)."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"{backend}{sorted(coefs)}".encode()))
    hidden, weight, bias, labels, adv, old, ref, _ = _case(24, 11, 97, torch.float32, gen,
                                                           ignore_index=5)
    weights = (labels != 5).float() / (labels != 5).sum()
    full = dict(clip_low=0.2, clip_high=None, kl_coef=0.0, entropy_coef=0.0)
    full.update(coefs)
    want, wgrads, _, _ = _unfused(hidden, weight, bias, labels, adv, old, ref, weights,
                                  temperature=1.3, ignore_index=5, **full)
    shp = (4, 6)
    out, grads = _fused(backend, hidden.view(*shp, -1), weight, bias, labels.view(shp),
                        adv.view(shp), old.view(shp), ref.view(shp) if full["kl_coef"] else None,
                        None, scale=-2.5, temperature=1.3, ignore_index=5, **full)
    assert out.logp.shape == shp and out.entropy.shape == shp
    assert abs(out.loss.item() - want.item()) <= 1e-5 * max(1.0, abs(want.item()))
    for name, g, w in zip(("hidden", "weight", "bias"), grads, wgrads):
        _close(g.reshape(w.shape), -2.5 * w, 2e-5, f"grad {name}")
    assert out.logp.view(-1)[labels == 5].eq(0).all()


def test_logp_matches_linear_logprobs():
    gen = torch.Generator().manual_seed(3)
    hidden, weight, bias, labels, adv, old, _, _ = _case(19, 9, 131, torch.float32, gen)
    out = linear_policy_loss(hidden, weight, labels, adv, old, bias=bias, temperature=0.9,
                             return_entropy=True, backend="cpu")
    lp, ent = linear_logprobs(hidden, weight, labels, bias=bias, temperature=0.9,
                              return_entropy=True, backend="cpu")
    torch.testing.assert_close(out.logp, lp, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.entropy, ent, rtol=1e-6, atol=1e-6)
    off = linear_policy_loss(hidden, weight, labels, adv, old, bias=bias, backend="cpu")
    assert off.entropy.eq(0).all()


def test_token_terms_match_autograd_at_ties_and_bounds():
    """The closed-form dL/dlogp equals autograd's through the trainer's expressions, at
    ratio = 1 (the max's tie), at clip bounds and with the KL clamps active."""
    old = torch.zeros(9, dtype=torch.float64)
    logp = torch.tensor([0.0, math.log(0.8), math.log(1.28), -3.0, 2.0, 0.1, -0.1, -25.0,
                         25.0], dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0, 1.0, -2.0, 0.5, -0.3, 0.7, 1.0, -1.0], dtype=torch.float64)
    ref = torch.tensor([0.0, 1.0, -1.0, 0.0, 30.0, -30.0, 2.0, 0.0, 0.0], dtype=torch.float64)
    w = torch.rand(9, dtype=torch.float64)
    ent = torch.rand(9, dtype=torch.float64)
    terms = LossTerms(0.2, 0.28, 0.3, 0.05)
    loss, g_lp, g_ent = token_terms(logp, ent, old, adv, w, ref, terms)
    x = logp.clone().requires_grad_()
    e = ent.clone().requires_grad_()
    pg, _ = ppo_clip_loss(x, old, adv, 0.2, 0.28)
    want = aggregate(pg, w) + 0.3 * aggregate(kl_low_var(x, ref), w) - 0.05 * aggregate(e, w)
    want.backward()
    torch.testing.assert_close(loss, want.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g_lp, x.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g_ent, e.grad, rtol=1e-12, atol=1e-12)


def test_backward_twice_and_no_grad():
    gen = torch.Generator().manual_seed(4)
    hidden, weight, bias, labels, adv, old, _, _ = _case(12, 7, 53, torch.float32, gen)
    h = hidden.clone().requires_grad_()
    out = linear_policy_loss(h, weight, labels, adv, old, backend="cpu")
    out.loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice"):
        out.loss.backward()
    with torch.no_grad():
        nog = linear_policy_loss(h, weight, labels, adv, old, backend="cpu")
    assert not nog.loss.requires_grad
    torch.testing.assert_close(nog.loss, out.loss.detach())


def test_all_rows_ignored():
    gen = torch.Generator().manual_seed(5)
    hidden, weight, bias, labels, adv, old, _, _ = _case(6, 5, 17, torch.float32, gen)
    leaves = [t.clone().requires_grad_() for t in (hidden, weight, bias)]
    out = linear_policy_loss(leaves[0], leaves[1], torch.full((6,), -100), adv, old,
                             bias=leaves[2], backend="cpu")
    out.loss.backward()
    assert out.loss.item() == 0.0
    assert all(t.grad is not None and t.grad.eq(0).all() for t in leaves)


def _bad_call(**over):
    gen = torch.Generator().manual_seed(6)
    hidden, weight, bias, labels, adv, old, ref, weights = _case(8, 5, 19, torch.float32, gen)
    kw = dict(hidden=hidden, weight=weight, labels=labels, advantages=adv, old_logp=old,
              weights=weights, bias=bias, ref_logp=ref, kl_coef=0.1, backend="cpu")
    kw.update(over)
    return linear_policy_loss(**kw)


@pytest.mark.parametrize("over,exc,name", [
    (dict(advantages=torch.zeros(7)), ValueError, "advantages"),
    (dict(old_logp=torch.zeros(8, dtype=torch.long)), TypeError, "old_logp"),
    (dict(old_logp=[0.0] * 8), TypeError, "old_logp"),
    (dict(weights=torch.zeros(2, 4)), ValueError, "weights"),
    (dict(ref_logp=None), ValueError, "ref_logp"),
    (dict(ref_logp=torch.zeros(9)), ValueError, "ref_logp"),
    (dict(clip_low=0.0), ValueError, "clip_low"),
    (dict(clip_low=1.0), ValueError, "clip_low"),
    (dict(clip_low="0.2"), TypeError, "clip_low"),
    (dict(clip_high=-0.1), ValueError, "clip_high"),
    (dict(kl_coef=-1.0), ValueError, "kl_coef"),
    (dict(entropy_coef=float("nan")), ValueError, "entropy_coef"),
    (dict(entropy_coef=True), TypeError, "entropy_coef"),
    (dict(options=dict(chunk_bytes=1)), TypeError, "options"),
    (dict(labels=torch.full((8,), 19)), ValueError, "labels"),
    (dict(temperature=0.0), ValueError, "temperature"),
    (dict(weight=torch.zeros(19, 6)), ValueError, "weight"),
    (dict(backend="cuda"), ValueError, "backend"),
])
def test_bad_input(over, exc, name):
    with pytest.raises(exc, match=f"^{name}"):
        _bad_call(**over)


@pytest.mark.skipif(not backend_runs_on("triton", torch.device("cpu"))[0],
                    reason="triton needs TRITON_INTERPRET=1 on CPU")
def test_triton_refuses_float64():
    gen = torch.Generator().manual_seed(8)
    hidden, weight, bias, labels, adv, old, _, _ = _case(6, 5, 17, torch.float64, gen)
    with pytest.raises(TypeError, match="^hidden: the triton backend"):
        linear_policy_loss(hidden, weight, labels, adv, old, bias=bias, backend="triton")
    out = linear_policy_loss(hidden, weight, labels, adv, old, bias=bias, backend="cpu")
    assert out.loss.dtype == torch.float64


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "1"])
def test_bad_options(bad):
    with pytest.raises(ValueError, match="^chunk_bytes"):
        FusedOptions(chunk_bytes=bad)


def test_default_chunk_budget():
    """CPU: a quarter of the [N, V] logits, within [256 MiB, 1 GiB]; GPU: 1 GiB; an explicit
    chunk_bytes wins everywhere."""
    from sharpo_kernels.policy_loss.fused_cpu import chunk_rows
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert FusedOptions().budget(cpu) == 256 << 20
    assert FusedOptions().budget(cpu, 2 << 30) == 512 << 20
    assert FusedOptions().budget(cpu, 16 << 30) == 1 << 30
    assert FusedOptions().budget(cuda) == FusedOptions().budget(cuda, 64 << 30) == 1 << 30
    assert FusedOptions(chunk_bytes=4096).budget(cuda) == 4096
    assert FusedOptions(chunk_bytes=4096).budget(cpu, 16 << 30) == 4096
    row = 151936 * 4                                   # the Qwen2.5-0.5B head's logits, fp32
    assert chunk_rows(1000, 151936, 4, DEFAULT_FUSED, cpu) == (256 << 20) // row   # 441
    assert chunk_rows(4096, 151936, 4, DEFAULT_FUSED, cpu) == 1024                  # N / 4
    assert chunk_rows(8192, 151936, 4, DEFAULT_FUSED, cpu) == (1 << 30) // row     # 1766
    assert chunk_rows(8192, 151936, 4, DEFAULT_FUSED, cuda) == (1 << 30) // row
    assert chunk_rows(3, 151936, 4, FusedOptions(chunk_bytes=1), cpu) == 1


@pytest.mark.parametrize("entropy_coef,return_entropy", [(0.0, True), (0.03, False)],
                         ids=["entropy-logged", "entropy-bonus"])
def test_cpu_entropy_column_blocks(monkeypatch, entropy_coef, return_entropy, poisoned_alloc):
    """The cpu backend's entropy sums (and, with the bonus, dL/dz) over several column
    blocks of a small workspace, a ragged last block, several row chunks."""
    from sharpo_kernels.policy_loss import fused_cpu
    monkeypatch.setattr(fused_cpu, "_BLOCK_BYTES", 7 * 4 * 23)    # 23 columns of 7 rows
    gen = torch.Generator().manual_seed(9 + int(entropy_coef * 100))
    case = _case(25, 9, 211, torch.float32, gen)
    coefs = dict(COEFS, entropy_coef=entropy_coef)
    want, wgrads, _, went = _unfused(*case, temperature=0.9, **coefs)
    leaves = [t.detach().clone().requires_grad_() for t in case[:3]]
    out = linear_policy_loss(leaves[0], leaves[1], case[3], case[4], case[5],
                             weights=case[7], bias=leaves[2], ref_logp=case[6],
                             temperature=0.9, return_entropy=return_entropy, backend="cpu",
                             options=FusedOptions(chunk_bytes=7 * 211 * 4), **coefs)
    out.loss.backward()
    assert abs(out.loss.item() - want.item()) <= 1e-5 * max(1.0, abs(want.item()))
    _close(out.entropy, went, 2e-6, "entropy")
    for name, g, w in zip(("hidden", "weight", "bias"), [t.grad for t in leaves], wgrads):
        _close(g, w, 2e-5, f"grad {name}")
