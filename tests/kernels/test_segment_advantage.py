"""segment_advantage on every backend available here against the float64 loop oracle and
the torch reference (docs/api.md: same results to 1e-5 relative in fp32).

Outputs of the native and Triton backends are allocated through `_new_output`, which these
tests replace with a NaN-filled buffer: an element a kernel forgets to write stays NaN and
fails the comparison (expected advantages are always finite)."""
import pytest
import torch

import sharpo_kernels as sk
from sharpo_kernels import _backend
from sharpo_kernels.testing import random_batch, segment_advantage_loop

BACKENDS = _backend.usable_backends(torch.device("cpu"), ("torch", "cpp", "triton"))
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(autouse=True)
def poison_outputs(monkeypatch):
    """Every [B, L] result buffer starts as NaN."""
    def nan_buffer(B, L, device):
        return torch.full((B, L), float("nan"), dtype=torch.float32, device=device)

    from sharpo_kernels.segment_advantage import native as segment_advantage_native
    monkeypatch.setattr(segment_advantage_native, "_new_output", nan_buffer)
    if "triton" in BACKENDS:
        from sharpo_kernels.segment_advantage import triton_kernels as segment_advantage_triton
        monkeypatch.setattr(segment_advantage_triton, "_new_output", nan_buffer)


def assert_matches(res, ref):
    out, gap, w, rho, num = ref
    assert res.advantages.dtype == torch.float32 and res.advantages.shape == out.shape
    assert not res.advantages.isnan().any(), "unwritten (NaN) or NaN advantages"
    for got, want in ((res.advantages, out), (res.gap, gap), (res.weight, w),
                      (res.length_factor, rho)):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want.double(), rtol=RTOL, atol=ATOL,
                                   equal_nan=True)
    assert torch.equal(res.num_segments.long(), num)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("B,L,seed", [(1, 1, 0), (3, 7, 1), (9, 61, 2), (17, 129, 3)])
def test_random_vs_loop_oracle(backend, dtype, B, L, seed):
    batch = random_batch(B, L, segments=(0, 9), dtype=dtype, seed=seed + 100 * B)
    batch["traj_index"] = None
    ref = segment_advantage_loop(**batch)
    assert_matches(sk.segment_advantage(**batch, backend=backend), ref)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_traj_index_vs_loop_oracle(backend, seed):
    batch = random_batch(13, 45, segments=(0, 7), seed=seed, traj_groups=4)
    ref = segment_advantage_loop(**batch)
    assert_matches(sk.segment_advantage(**batch, backend=backend), ref)


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameters_vs_loop_oracle(backend):
    batch = random_batch(11, 50, segments=(1, 8), seed=7)
    params = dict(lam=0.05, alpha=0.3, tau=0.5, rho_min=0.5, rho_max=1.5)
    ref = segment_advantage_loop(**batch, **params)
    assert_matches(sk.segment_advantage(**batch, **params, backend=backend), ref)


@pytest.mark.parametrize("backend", BACKENDS)
def test_edge_rows(backend):
    """Rows with no segment, one-token segments, adjacent segments, a whole-row segment,
    a row without a teacher, A = 0; no response_mask and no has_teacher (defaults)."""
    ids = torch.tensor([
        [-1, -1, -1, -1, -1, -1, -1],     # no segment
        [0, 1, 2, 3, 4, 5, 6],            # one-token, adjacent segments
        [0, 0, 0, 0, 0, 0, 0],            # one segment, whole row
        [-1, 0, 0, -1, 1, -1, 2],         # mixed
        [0, 0, 1, 1, 1, -1, -1],          # row with A = 0
    ])
    g = torch.Generator().manual_seed(3)
    t = -torch.rand(5, 7, generator=g) * 2
    s = -torch.rand(5, 7, generator=g) * 2
    adv = torch.tensor([1.5, -0.7, 0.3, -2.0, 0.0])
    ref = segment_advantage_loop(t, s, ids, adv)
    res = sk.segment_advantage(t, s, ids, adv, backend=backend)
    assert_matches(res, ref)
    assert res.num_segments.tolist() == [0, 7, 1, 3, 2]
    assert torch.equal(res.advantages[0], adv[0].expand(7))      # no segment: plain A
    assert (res.advantages[4] == 0).all()                          # A = 0 -> 0
    # without a teacher: plain A_i, gap NaN, weight = length_factor = 1
    ht = torch.tensor([True, True, True, False, True])
    res = sk.segment_advantage(t, s, ids, adv, has_teacher=ht, backend=backend)
    assert_matches(res, segment_advantage_loop(t, s, ids, adv, has_teacher=ht))
    assert torch.equal(res.advantages[3], adv[3].expand(7))
    assert res.gap[3, :3].isnan().all() and (res.weight[3, :3] == 1).all()
    assert (res.length_factor[3, :3] == 1).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_batches(backend):
    for B, L in ((0, 5), (4, 0), (0, 0), (3, 5)):
        z = torch.zeros(B, L)
        adv = torch.arange(B, dtype=torch.float32) - 1.0
        res = sk.segment_advantage(z, z, torch.full((B, L), -1), adv, backend=backend)
        assert res.advantages.shape == (B, L) and res.gap.shape == (B, 0)
        assert res.num_segments.shape == (B,) and (res.num_segments == 0).all()
        assert torch.equal(res.advantages, adv[:, None].expand(B, L))   # no segment: plain A


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_layouts_and_dtypes(backend):
    """int32 ids, non-bool masks, strided (non-contiguous) inputs give the same result."""
    batch = random_batch(6, 40, segments=(1, 6), seed=11)
    base = sk.segment_advantage(**batch, backend="torch")
    variants = [
        dict(segment_ids=batch["segment_ids"].int()),
        dict(segment_ids=batch["segment_ids"].to(torch.int16)),
        dict(response_mask=batch["response_mask"].long()),
        dict(response_mask=batch["response_mask"].float()),
        dict(response_mask=batch["response_mask"].int()),
        dict(response_mask=batch["response_mask"].to(torch.uint8)),
        dict(response_mask=batch["response_mask"].double()),
        dict(advantages=batch["advantages"].double()),
        # transposed storage: row stride 1, inner stride B
        dict(teacher_logp=batch["teacher_logp"].t().contiguous().t(),
             segment_ids=batch["segment_ids"].t().contiguous().t()),
        # row-strided views (every other column of a wider buffer)
        dict(student_logp=torch.stack([batch["student_logp"]] * 2, -1)[..., 0]),
    ]
    for change in variants:
        res = sk.segment_advantage(**{**batch, **change}, backend=backend)
        for got, want in zip(res, base):
            torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_defaults_equal_explicit(backend):
    batch = random_batch(5, 30, segments=(1, 5), seed=5, padded=False, p_no_teacher=0.0)
    B, L = batch["segment_ids"].shape
    implicit = sk.segment_advantage(batch["teacher_logp"], batch["student_logp"],
                                    batch["segment_ids"], batch["advantages"], backend=backend)
    explicit = sk.segment_advantage(
        batch["teacher_logp"], batch["student_logp"], batch["segment_ids"],
        batch["advantages"], has_teacher=torch.ones(B, dtype=torch.bool),
        response_mask=torch.ones(B, L, dtype=torch.bool), traj_index=torch.arange(B) * 3,
        backend=backend)
    for got, want in zip(implicit, explicit):
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_traj_rows_equal_one_concatenated_row(backend):
    """verl-agent layout: a trajectory split into per-turn rows (segment ids renumbered per
    row, traj_index shared) gives the same advantages and segment table as the single row."""
    ids = torch.tensor([[0, 0, -1, 1, 1, 1, 1, -1, 2, 3, 3, 3, 3, 3, -1, 4]])
    g = torch.Generator().manual_seed(0)
    t = -torch.rand(1, 16, generator=g)
    s = -torch.rand(1, 16, generator=g)
    adv = torch.tensor([-1.3])
    whole = sk.segment_advantage(t, s, ids, adv, backend=backend)
    cut = 8                                              # turn 1: positions 0..7, turn 2: 8..15
    turn_ids = torch.stack([ids[0, :cut], torch.where(ids[0, cut:] >= 0, ids[0, cut:] - 2, -1)])
    turns = sk.segment_advantage(t.view(2, 8), s.view(2, 8), turn_ids, adv.repeat(2),
                                 traj_index=torch.tensor([42, 42]), backend=backend)
    torch.testing.assert_close(turns.advantages.reshape(1, 16), whole.advantages)
    for name in ("gap", "weight", "length_factor"):
        t_tab = getattr(turns, name)
        flat = torch.cat([t_tab[0, :2], t_tab[1, :3]])
        torch.testing.assert_close(flat, getattr(whole, name)[0])
    # without traj_index, each turn row balances its own lengths: different factors
    alone = sk.segment_advantage(t.view(2, 8), s.view(2, 8), turn_ids, adv.repeat(2),
                                 backend=backend)
    assert not torch.allclose(alone.length_factor[1, :3], whole.length_factor[0, 2:])


def test_cpp_threads_agree():
    """The multithreaded C++ path (>= 64k tokens) equals the single-threaded one, bitwise."""
    if "cpp" not in BACKENDS:
        pytest.skip("native module not built")
    batch = random_batch(48, 1500, segments=(10, 40), seed=9, traj_groups=20)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = sk.segment_advantage(**batch, backend="cpp")
        torch.set_num_threads(max(2, old))
        many = sk.segment_advantage(**batch, backend="cpp")
    finally:
        torch.set_num_threads(old)
    for a, b in zip(one, many):
        assert torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))
    ref = sk.segment_advantage(**batch, backend="torch")
    for got, want in zip(many, ref):
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)


def test_fp16_subnormals_and_bf16_conversion():
    """The C++ half/bfloat16 decoders agree with torch on tiny (subnormal) and big values."""
    if "cpp" not in BACKENDS:
        pytest.skip("native module not built")
    vals = torch.tensor([-1e-7, -3e-5, -6e-8, -60000.0, -1.0, -0.0, 0.0, -2.5e-6])
    L = vals.numel()
    ids = torch.arange(L)[None].repeat(2, 1)
    for dtype in (torch.float16, torch.bfloat16):
        t = torch.stack([vals, torch.zeros(L)]).to(dtype)
        s = torch.stack([torch.zeros(L), vals]).to(dtype)
        adv = torch.tensor([1.0, -1.0])
        a = sk.segment_advantage(t, s, ids, adv, backend="cpp", tau=1e-6)
        b = sk.segment_advantage(t, s, ids, adv, backend="torch", tau=1e-6)
        torch.testing.assert_close(a.gap, b.gap, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(a.advantages, b.advantages)


def test_default_backend_on_cpu():
    batch = random_batch(3, 10, seed=1)
    res = sk.segment_advantage(**batch)
    want = sk.segment_advantage(**batch, backend="torch")
    torch.testing.assert_close(res.advantages, want.advantages)
    expected = "cpp" if "cpp" in BACKENDS else "torch"
    from sharpo_kernels.segment_advantage.api import SEGMENT_ADVANTAGE_BACKENDS
    assert _backend.resolve_backend(None, torch.device("cpu"), SEGMENT_ADVANTAGE_BACKENDS) == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_row_vectors(backend):
    """advantages, has_teacher and traj_index as strided views (every other element of a
    longer buffer) give the contiguous result (the kernels read them at b)."""
    batch = random_batch(7, 30, segments=(1, 5), seed=12, traj_groups=3)
    base = sk.segment_advantage(**batch, backend="torch")
    strided = {k: torch.stack([batch[k], batch[k]], -1)[..., 1]
               for k in ("advantages", "has_teacher", "traj_index")}
    assert not strided["advantages"].is_contiguous()
    res = sk.segment_advantage(**{**batch, **strided}, backend=backend)
    for got, want in zip(res, base):
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
