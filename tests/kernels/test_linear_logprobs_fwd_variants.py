"""The sm_90 forward candidates of linear_logprobs (linear_fwd_variants.py, issue 45 item 3)
in the Triton interpreter: each candidate's switches (base-2 epilogue, tensor-descriptor
loads, fused loops, grouped program order) with small tiles, ragged rows and vocabulary,
splits, -inf bias entries, ignored rows, temperature, entropy, fp32 and bf16, against the
float64 reference, with poisoned allocations. Tiles, stages and wave-filling splits of a
candidate are GPU-only; their launch choices are tested here without a GPU."""
import pytest
import torch

from sharpo_kernels._backend import backend_runs_on
from sharpo_kernels.logprobs.linear_fwd_variants import (FWD_VARIANTS, FwdVariant,
                                                         fwd_variant, wave_splits)
from sharpo_kernels.logprobs.reference import linear_logprobs_reference

interp = pytest.mark.skipif(not backend_runs_on("triton", torch.device("cpu"))[0],
                            reason="triton needs TRITON_INTERPRET=1 on CPU")

# a grouped order with several groups at the test's 3 row tiles (group_n=16 covers them all)
_G2 = FwdVariant("test_group2", (16, 16, 16, 4), 3, exp2=True, desc=True, group_n=2)


def _problem(seed, dtype, h):
    gen = torch.Generator().manual_seed(seed)
    n, v = 37, 203                              # 3 row tiles, 13 vocabulary tiles of 16
    hidden = torch.randn(n, h, generator=gen).to(dtype)
    weight = (torch.randn(v, h, generator=gen) * 0.7).to(dtype)
    bias = torch.randn(v, generator=gen).to(dtype)
    bias[:20] = float("-inf")                   # a whole leading tile and more at -inf
    bias[[101, 202]] = float("-inf")
    labels = torch.randint(20, v, (n,), generator=gen)
    labels[labels == 101] = 102
    labels[labels == 202] = 200
    labels[[0, 5, 36]] = -100
    labels[7] = v - 2                           # in the ragged last tile
    g_lp, g_ent = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    return hidden, weight, bias, labels, g_lp, g_ent


@interp
@pytest.mark.parametrize("name", sorted(FWD_VARIANTS) + ["test_group2"])
@pytest.mark.parametrize("dtype,h", [(torch.float32, 32), (torch.float32, 21),
                                     (torch.bfloat16, 40)])
def test_candidate_against_float64(name, dtype, h, monkeypatch, poisoned_alloc):
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                       linear_logprobs_triton)
    from sharpo_kernels.logprobs import linear_triton as lt
    monkeypatch.setitem(FWD_VARIANTS, _G2.name, _G2)
    made = []                                   # the descriptor loads really run
    real = lt._descriptors
    monkeypatch.setattr(lt, "_descriptors", lambda *a: made.append(real(*a)) or made[-1])
    hidden, weight, bias, labels, g_lp, g_ent = _problem(len(name) + h, dtype, h)
    cfg = LinearTritonConfig(block_n=16, block_v=16, block_h=16, splits=3, fwd_variant=name,
                             chunk_bytes=37 * 4 * 128)     # cublas: 2 chunks of 128 columns
    chunks = []
    real_stats = lt.cublas_chunk_stats
    monkeypatch.setattr(lt, "cublas_chunk_stats",
                        lambda *a: chunks.append(a[-1]) or real_stats(*a))
    leaves = [t.detach().clone().requires_grad_() for t in (hidden, weight, bias)]
    lp, ent = linear_logprobs_triton(*leaves[:2], labels, leaves[2], 0.8, -100, True, cfg)
    (lp * g_lp.to(lp.dtype) + ent * g_ent.to(ent.dtype)).sum().backward()
    refs = [t.detach().double().requires_grad_() for t in (hidden, weight, bias)]
    rlp, rent = linear_logprobs_reference(refs[0], refs[1], labels, bias=refs[2],
                                          temperature=0.8, return_entropy=True)
    (rlp * g_lp.double() + rent * g_ent.double()).sum().backward()
    torch.testing.assert_close(lp.double(), rlp, rtol=2e-6, atol=2e-5)
    torch.testing.assert_close(ent.double(), rent, rtol=2e-6, atol=2e-5)
    tol = 2e-5 if dtype == torch.float32 else 1.6e-2
    for nm, leaf, ref in zip(("hidden", "weight", "bias"), leaves, refs):
        assert torch.isfinite(leaf.grad).all(), nm
        torch.testing.assert_close(leaf.grad.double(), ref.grad, rtol=tol,
                                   atol=tol * max(1.0, ref.grad.abs().max().item()), msg=nm)
    assert (lp[[0, 5, 36]] == 0).all()
    wants_desc = FWD_VARIANTS[name].desc and (h * hidden.element_size()) % 16 == 0
    assert len(made) == wants_desc
    assert chunks == ([128] if FWD_VARIANTS[name].cublas else [])
    assert all(type(d).__name__ == "TensorDescriptor" for pair in made for d in pair)


@interp
def test_descriptor_fallback_for_unaligned_rows(poisoned_alloc):
    """TMA needs 16-byte aligned bases and row strides: a hidden whose rows start 4 bytes
    off falls back to pointer loads (same results), and H * 2 bytes not a multiple of 16
    turns DESC off in the switches."""
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                       linear_logprobs_triton)
    cfg = LinearTritonConfig(block_n=16, block_v=16, block_h=16, fwd_variant="tma")
    cpu = torch.device("cpu")
    assert cfg.fwd_switches(32, torch.bfloat16, cpu)["DESC"]
    assert not cfg.fwd_switches(21, torch.bfloat16, cpu)["DESC"]
    gen = torch.Generator().manual_seed(3)
    buf = torch.randn(19 * 33, generator=gen)
    hidden = buf[1:1 + 19 * 32].view(19, 32)            # base 4 bytes past an aligned one
    weight = torch.randn(50, 32, generator=gen)
    labels = torch.randint(0, 50, (19,), generator=gen)
    lp, _ = linear_logprobs_triton(hidden, weight, labels, None, 1.3, -100, False, cfg)
    want = linear_logprobs_reference(hidden.double(), weight.double(), labels,
                                     temperature=1.3)
    torch.testing.assert_close(lp.double(), want, rtol=2e-6, atol=2e-5)


def test_candidates_apply_to_sm90_16bit_only():
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    cuda = torch.device("cuda")
    cfg = LinearTritonConfig(fwd_variant="tma_2cta")
    assert cfg.tiles(8192, 151936, 4096, cuda, torch.bfloat16, arch=90) == (128, 128, 64, 8)
    assert cfg.tiles(8192, 151936, 4096, cuda, torch.bfloat16, arch=90, phase="bwd") == \
        (128, 128, 64, 8)
    assert cfg.fwd_switches(4096, torch.bfloat16, cuda, arch=90) == dict(
        EXP2=True, DESC=True, FLATTEN=False, GROUP_N=16)
    assert cfg.fwd_launch_options(cuda, torch.bfloat16, arch=90) == {"num_stages": 3}
    for dtype, arch in ((torch.bfloat16, 80), (torch.float32, 90)):
        assert cfg.fwd_switches(4096, dtype, cuda, arch=arch) == dict(
            EXP2=False, DESC=False, FLATTEN=False, GROUP_N=0)
        assert cfg.fwd_launch_options(cuda, dtype, arch=arch) == {}
    base = LinearTritonConfig()
    assert base.fwd.name == "base"
    assert base.tiles(8192, 151936, 4096, cuda, torch.bfloat16, arch=90) == (128, 256, 64, 8)
    assert base.fwd_switches(4096, torch.bfloat16, cuda, arch=90) == dict(
        EXP2=False, DESC=False, FLATTEN=False, GROUP_N=0)
    assert base.fwd_launch_options(cuda, torch.bfloat16, arch=90) == {}


def test_variant_names_are_checked():
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    assert fwd_variant(None) is FWD_VARIANTS["base"]
    with pytest.raises(ValueError, match="^fwd_variant"):
        LinearTritonConfig(fwd_variant="fastest")
    with pytest.raises(TypeError, match="^fwd_variant"):
        LinearTritonConfig(fwd_variant=3)


@pytest.mark.parametrize("n_tiles,v_tiles,slots,least", [
    (64, 594, 132, 5), (64, 1187, 264, 5), (16, 1187, 264, 17), (7, 40, 132, 19),
    (3, 5, 8, 1), (64, 594, 264, 5)])
def test_wave_splits_fill_waves(n_tiles, v_tiles, slots, least):
    """The chosen splits give the largest busy share of slot-time among least..8 least
    splits (brute force over the same formula, written out here), never fewer than least,
    never more tiles' worth than the vocabulary has."""
    def busy(s):
        per = -(-v_tiles // s)
        real = -(-v_tiles // per)
        return n_tiles * v_tiles / (-(-(n_tiles * real) // slots) * slots * per)

    got = wave_splits(n_tiles, v_tiles, slots, least)
    assert least <= got <= v_tiles or got == least
    cands = range(least, min(v_tiles, 8 * least) + 1)
    assert all(busy(got) >= busy(s) - 1e-9 for s in cands)
    if (n_tiles, v_tiles, slots) == (64, 594, 132):
        assert got == 33 and busy(got) == 1.0 and busy(5) < 0.81   # today: 5 splits


@interp
def test_cublas_chunk_all_neg_inf(poisoned_alloc):
    """The "cublas" candidate with a whole chunk of -inf logits (the token kernel's chunk
    statistics are m = -inf, s = 0 there): log-probs and entropy still match float64."""
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                       linear_logprobs_triton)
    gen = torch.Generator().manual_seed(9)
    n, h, v = 9, 16, 300
    hidden, weight = torch.randn(n, h, generator=gen), torch.randn(v, h, generator=gen)
    bias = torch.randn(v, generator=gen)
    bias[:128] = float("-inf")                  # chunk 0 (128 columns) is all -inf
    labels = torch.randint(128, v, (n,), generator=gen)
    cfg = LinearTritonConfig(fwd_variant="cublas", chunk_bytes=n * 4 * 128)
    lp, ent = linear_logprobs_triton(hidden, weight, labels, bias, 0.7, -100, True, cfg)
    rlp, rent = linear_logprobs_reference(hidden.double(), weight.double(), labels,
                                          bias=bias.double(), temperature=0.7,
                                          return_entropy=True)
    torch.testing.assert_close(lp.double(), rlp, rtol=2e-6, atol=2e-5)
    torch.testing.assert_close(ent.double(), rent, rtol=2e-6, atol=2e-5)
