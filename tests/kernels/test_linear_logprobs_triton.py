"""Triton linear_logprobs kernels with small tiles on CPU (interpreter): several row tiles,
vocabulary tiles, H slices and vocabulary splits, ragged edges everywhere, -inf logits
(through the bias), poisoned allocations, and the split merge."""
import pytest
import torch

from sharpo_kernels._backend import backend_runs_on
from sharpo_kernels.logprobs.reference import linear_logprobs_reference

pytestmark = pytest.mark.skipif(not backend_runs_on("triton", torch.device("cpu"))[0],
                                reason="triton needs TRITON_INTERPRET=1 on CPU")




def _run(fn, hidden, weight, bias, g_lp, g_ent, dt=None):
    leaves = [(t.detach().clone() if dt is None else t.detach().to(dt)).requires_grad_()
              for t in (hidden, weight, bias)]
    lp, ent = fn(*leaves)
    cast = (lambda t: t) if dt is None else (lambda t: t.to(dt))
    (lp * cast(g_lp) + ent * cast(g_ent)).sum().backward()
    return lp, ent, [t.grad for t in leaves]


def _against_reference(gen, cfg, hidden, weight, bias, labels, temperature):
    """(logp, entropy, grads) of the triton op with `cfg` and of the float64 reference,
    under random upstream gradients of both outputs."""
    from sharpo_kernels.logprobs.linear_triton import linear_logprobs_triton
    n = hidden.shape[0]
    g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    got = _run(lambda a, w, b: linear_logprobs_triton(
        a, w, labels, b, temperature, -100, True, cfg), hidden, weight, bias, g_lp, g_ent)
    want = _run(lambda a, w, b: linear_logprobs_reference(
        a, w, labels, bias=b, temperature=temperature, return_entropy=True),
        hidden, weight, bias, g_lp, g_ent, dt=torch.float64)
    return got, want


def _assert_grads(grads, rgrads, g_tol):
    """Finite, and within g_tol (absolute: relative to the largest reference entry)."""
    for name, g, rg in zip(("hidden", "weight", "bias"), grads, rgrads):
        assert torch.isfinite(g).all(), name
        tol = g_tol * max(1.0, rg.abs().max().item())
        torch.testing.assert_close(g.double(), rg, rtol=g_tol, atol=tol, msg=name)


@pytest.mark.parametrize("dtype,g_tol", [(torch.float32, 2e-5), (torch.bfloat16, 1.6e-2)])
@pytest.mark.parametrize("splits", [1, 3, 100])
def test_small_tiles(dtype, g_tol, splits, poisoned_alloc):
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                           linear_logprobs_triton)
    gen = torch.Generator().manual_seed(splits)
    n, h, v = 37, 21, 203                      # 3 row tiles, 2 H slices, 13 vocab tiles of 16
    hidden = torch.randn(n, h, generator=gen).to(dtype)
    weight = (torch.randn(v, h, generator=gen) * 0.7).to(dtype)
    bias = torch.randn(v, generator=gen).to(dtype)
    bias[:40] = float("-inf")                  # whole leading vocabulary tiles at -inf
    bias[101] = float("-inf")
    labels = torch.randint(40, v, (n,), generator=gen)
    labels[labels == 101] = 102
    labels[[0, 5, 36]] = -100
    labels[7] = v - 1                          # label in the ragged last tile
    cfg = LinearTritonConfig(block_n=16, block_v=16, block_h=16, splits=splits)
    (lp, ent, grads), (rlp, rent, rgrads) = _against_reference(
        gen, cfg, hidden, weight, bias, labels, 0.9)
    torch.testing.assert_close(lp.double(), rlp, rtol=2e-6, atol=2e-5)
    torch.testing.assert_close(ent.double(), rent, rtol=2e-6, atol=2e-5)
    _assert_grads(grads, rgrads, g_tol)
    assert (grads[1][:40] == 0).all() and (grads[2][:40] == 0).all()
    assert (lp[[0, 5, 36]] == 0).all() and (grads[0][[0, 5, 36]] == 0).all()


def test_forward_without_entropy_and_label_at_neg_inf(poisoned_alloc):
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                           linear_logprobs_triton)
    gen = torch.Generator().manual_seed(2)
    hidden = torch.randn(9, 20, generator=gen)
    weight = torch.randn(70, 20, generator=gen)
    bias = torch.zeros(70)
    bias[3] = float("-inf")
    labels = torch.tensor([3, 1, 2, 69, 0, 5, 6, 7, 8])
    cfg = LinearTritonConfig(block_n=16, block_v=32, block_h=16, splits=2)
    lp, _ = linear_logprobs_triton(hidden, weight, labels, bias, 1.0, -100, False, cfg)
    want = linear_logprobs_reference(hidden.double(), weight.double(), labels,
                                     bias=bias.double())
    assert lp[0] == float("-inf") and want[0] == float("-inf")
    torch.testing.assert_close(lp[1:].double(), want[1:], rtol=2e-6, atol=2e-5)


@pytest.mark.parametrize("dtype,g_tol", [(torch.float32, 2e-5), (torch.bfloat16, 1.6e-2)])
def test_unmasked_inner_loop(dtype, g_tol, poisoned_alloc):
    """H a multiple of BLOCK_H: the H loop of both kernels loads without masks (masked-out
    rows read row rows[0]'s index 0, masked-out columns the last valid one, and their
    logits are discarded). Ragged rows and vocabulary, splits, several backward chunks,
    -inf bias entries, ignored rows, entropy: the float64 reference."""
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                           linear_logprobs_triton)
    gen = torch.Generator().manual_seed(21)
    n, h, v = 37, 32, 203                      # 2 H slices of 16, no H tail
    hidden = torch.randn(n, h, generator=gen).to(dtype)
    weight = (torch.randn(v, h, generator=gen) * 0.6).to(dtype)
    bias = torch.randn(v, generator=gen).to(dtype)
    bias[[0, 17, 202]] = float("-inf")
    labels = torch.randint(18, v - 1, (n,), generator=gen)
    labels[[1, 30]] = -100
    labels[2] = v - 2                          # in the ragged last tile
    hidden[0] *= 1e4                           # row 0's logits are large: a masked-out row
    cfg = LinearTritonConfig(block_n=16, block_v=16, block_h=16, splits=3,
                             chunk_bytes=n * 4 * 48)
    (lp, ent, grads), (rlp, rent, rgrads) = _against_reference(
        gen, cfg, hidden, weight, bias, labels, 0.8)
    torch.testing.assert_close(lp.double(), rlp, rtol=2e-6, atol=2e-5 * 1e4)
    torch.testing.assert_close(lp[1:].double(), rlp[1:], rtol=2e-6, atol=2e-5)
    torch.testing.assert_close(ent[1:].double(), rent[1:], rtol=2e-6, atol=2e-5)
    _assert_grads(grads, rgrads, g_tol)
    assert (grads[1][[0, 17, 202]] == 0).all() and (grads[0][[1, 30]] == 0).all()


def test_unmasked_h_choice():
    """EVEN_H where H is a multiple of BLOCK_H, except the sm_90 d-logits kernel (its
    registers would halve the resident CTAs: results/compiled_facts.md)."""
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    cfg, cuda, cpu = LinearTritonConfig(), torch.device("cuda"), torch.device("cpu")
    assert cfg.unmasked_h(4096, 64, cuda, arch=90) and cfg.unmasked_h(896, 64, cuda, arch=80)
    assert not cfg.unmasked_h(4096, 64, cuda, phase="bwd", arch=90)
    assert cfg.unmasked_h(4096, 64, cuda, phase="bwd", arch=80)
    assert not cfg.unmasked_h(21, 16, cpu) and cfg.unmasked_h(32, 16, cpu, phase="bwd")


def test_config_validation():
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    with pytest.raises(ValueError, match="block_v"):
        LinearTritonConfig(block_v=24)
    with pytest.raises(ValueError, match="splits"):
        LinearTritonConfig(splits=0)


# --- the backward in vocabulary chunks (linear_backward_triton.py) ---

def _chunked_case(seed, dtype=torch.float32, with_bias=True):
    gen = torch.Generator().manual_seed(seed)
    n, h, v = 37, 21, 203
    hidden = torch.randn(n, h, generator=gen).to(dtype)
    weight = (torch.randn(v, h, generator=gen) * 0.7).to(dtype)
    bias = torch.randn(v, generator=gen).to(dtype) if with_bias else None
    labels = torch.randint(0, v, (n,), generator=gen)
    labels[[0, 5, 36]] = -100
    labels[7] = v - 1                          # label in the ragged last chunk
    labels[8] = 47                             # last column of the first chunk
    labels[9] = 48                             # first column of the second
    return hidden, weight, bias, labels, torch.randn(n, generator=gen), torch.randn(n, generator=gen)


def _leaves(hidden, weight, bias, wants, dt=None):
    out = []
    for t, want in zip((hidden, weight, bias), wants):
        if t is None:
            out.append(None)
            continue
        t = t.detach().clone() if dt is None else t.detach().to(dt)
        out.append(t.requires_grad_(want))
    return out


@pytest.mark.parametrize("wants,entropy,temperature", [
    ((True, True, True), True, 0.9),        # everything
    ((True, False, False), False, 1.3),     # frozen lm_head: no grad_weight
    ((False, True, True), True, 1.3),       # hidden without grad
    ((False, False, True), False, 0.9),     # the bias only
])
def test_backward_chunks(wants, entropy, temperature, poisoned_alloc):
    """Several vocabulary chunks of 48 columns (3 tiles of 16) and a ragged last one (11):
    each gradient asked for matches the float64 reference; the others are None; every
    element of the NaN-poisoned chunk, bias-partial and grad_weight buffers is written."""
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                       linear_logprobs_triton)
    hidden, weight, bias, labels, g_lp, g_ent = _chunked_case(int(entropy) + 2 * sum(wants))
    nv = int((labels != -100).sum())
    cfg = LinearTritonConfig(block_n=16, block_v=16, block_h=16, chunk_bytes=nv * 4 * 48)
    assert cfg.chunk_columns(nv, 203, 16, 4) == 48
    if not entropy:
        g_ent = torch.zeros_like(g_ent)
    a, w, b = _leaves(hidden, weight, bias, wants)
    lp, ent = linear_logprobs_triton(a, w, labels, b, temperature, -100, entropy, cfg)
    (lp * g_lp + ent * g_ent).sum().backward()
    ra, rw, rb = _leaves(hidden, weight, bias, wants, dt=torch.float64)
    rlp, rent = linear_logprobs_reference(ra, rw, labels, bias=rb, temperature=temperature,
                                          return_entropy=True)
    (rlp * g_lp.double() + (rent * g_ent.double() if entropy else 0)).sum().backward()
    for name, t, r, want in zip(("hidden", "weight", "bias"), (a, w, b), (ra, rw, rb), wants):
        if not want:
            assert t.grad is None, name
            continue
        assert torch.isfinite(t.grad).all(), name
        tol = 2e-5 * max(1.0, r.grad.abs().max().item())
        torch.testing.assert_close(t.grad.double(), r.grad, rtol=2e-5, atol=tol, msg=name)


def test_backward_half_precision_chunk(monkeypatch, poisoned_alloc):
    """The GPU's data path on CPU: dL/dz rounded to bf16 in the chunk buffer, grad_weight
    formed in bf16 (fp32 accumulation), grad_hidden accumulated in fp32 over the chunks;
    within the bf16 tolerance of the float64 reference."""
    import sharpo_kernels.logprobs.linear_backward_triton as lb
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                       linear_logprobs_triton)
    seen = []
    monkeypatch.setattr(lb, "_dz_dtype", lambda dt: seen.append(dt) or dt)
    hidden, weight, bias, labels, g_lp, g_ent = _chunked_case(3, torch.bfloat16)
    cfg = LinearTritonConfig(block_n=16, block_v=16, block_h=16, chunk_bytes=34 * 2 * 64)
    a, w, b = _leaves(hidden, weight, bias, (True, True, True))
    lp, ent = linear_logprobs_triton(a, w, labels, b, 0.8, -100, True, cfg)
    (lp * g_lp.bfloat16() + ent * g_ent.bfloat16()).sum().backward()
    assert seen == [torch.bfloat16]
    ra, rw, rb = _leaves(hidden, weight, bias, (True, True, True), dt=torch.float64)
    rlp, rent = linear_logprobs_reference(ra, rw, labels, bias=rb, temperature=0.8,
                                          return_entropy=True)
    (rlp * g_lp.double() + rent * g_ent.double()).sum().backward()
    for name, t, r in zip(("hidden", "weight", "bias"), (a, w, b), (ra, rw, rb)):
        assert t.grad.dtype == torch.bfloat16 and torch.isfinite(t.grad).all(), name
        tol = 1.6e-2 * max(1.0, r.grad.abs().max().item())
        torch.testing.assert_close(t.grad.double(), r.grad, rtol=1.6e-2, atol=tol, msg=name)


def test_chunk_columns():
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    cfg = LinearTritonConfig()
    # Qwen head, 8192 scored bf16 rows, 128-column tiles: 16384 columns = 256 MiB chunks
    assert cfg.chunk_columns(8192, 151936, 128, 2) == 16384
    assert LinearTritonConfig(chunk_bytes=1).chunk_columns(8192, 151936, 128, 2) == 128
    assert cfg.chunk_columns(3, 203, 16, 4) == 208              # the whole (padded) vocabulary
    with pytest.raises(ValueError, match="^chunk_bytes:"):
        LinearTritonConfig(chunk_bytes=0)
    with pytest.raises(ValueError, match="^chunk_bytes:"):
        LinearTritonConfig(chunk_bytes=1.5)


def test_gpu_tiles_per_precision():
    """fp32 IEEE products (FMA units) take the smaller tile; TF32 and bf16/fp16 the tensor-core
    tile (the tiles the compile checks cover, docs/gpu_kernels.md)."""
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    cfg, cuda = LinearTritonConfig(), torch.device("cuda")
    assert cfg.tiles(8192, 151936, 4096, cuda, torch.float32) == (64, 64, 32, 8)
    assert cfg.tiles(8192, 151936, 4096, cuda, torch.float32, tf32=True) == (64, 128, 64, 8)
    assert cfg.tiles(8192, 151936, 4096, cuda, torch.bfloat16, arch=80) == (64, 128, 64, 8)


def test_gpu_tiles_per_arch_and_kernel():
    """On sm_90 the tensor-core tiles are the ones measured on an H200, one per kernel
    (forward 128 x 256 x 64, d-logits 128 x 128 x 64) for 16-bit operands; other archs, the
    IEEE fp32 path and TF32 keep the common tiles; an explicit block size still wins; a bad phase is refused."""
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    cfg, cuda = LinearTritonConfig(), torch.device("cuda")
    bf16 = torch.bfloat16
    assert cfg.tiles(8192, 151936, 4096, cuda, bf16, arch=90) == (128, 256, 64, 8)
    assert cfg.tiles(8192, 151936, 4096, cuda, bf16, phase="bwd", arch=90) == (128, 128, 64, 8)
    assert cfg.tiles(8192, 151936, 4096, cuda, torch.float16, arch=90) == (128, 256, 64, 8)
    assert cfg.tiles(8192, 151936, 4096, cuda, torch.float32, tf32=True,
                     arch=90) == (64, 128, 64, 8)
    assert cfg.tiles(8192, 151936, 4096, cuda, bf16, phase="bwd", arch=80) == (64, 128, 64, 8)
    assert cfg.tiles(8192, 151936, 4096, cuda, torch.float32, arch=90) == (64, 64, 32, 8)
    assert LinearTritonConfig(splits=1).resolve(8192, 151936, 4096, cuda, bf16,
                                                arch=90)[:3] == (128, 256, 64)
    assert LinearTritonConfig(block_v=128).tiles(8192, 151936, 4096, cuda, bf16,
                                                 arch=90) == (128, 128, 64, 8)
    assert cfg.tiles(3, 40, 20, cuda, bf16, phase="bwd", arch=90) == (16, 64, 32, 8)
    assert cfg.tiles(3, 40, 20, cuda, bf16, arch=90) == (16, 64, 32, 8)
    with pytest.raises(ValueError, match="^phase:"):
        cfg.tiles(8, 40, 20, cuda, bf16, phase="backward")


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_num_stages_must_be_a_positive_int(bad):
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    with pytest.raises(ValueError, match="^num_stages: expected a positive int"):
        LinearTritonConfig(num_stages=bad)
    assert LinearTritonConfig(num_stages=4).launch_options() == {"num_stages": 4}
