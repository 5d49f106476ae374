"""The `cpp` backend's fused pass (csrc/segment_advantage_cpu.cpp, Kernel::scan_run) takes a
run's tokens 16 at a time: a block whose ids all equal the run's id goes to the lanes
whole; the block holding the run's end is added under a lane mask; a row's last tokens
(fewer than 16) are copied to a padded block first. These tests place run ends and bad
values on each of those paths (ends exactly at a block edge, runs shorter than a block,
row tails) for every log-prob, id and mask dtype the kernel reads, and compare with the
torch reference; outputs start as NaN, so a token the kernel skips shows."""
import pytest
import torch

import sharpo_kernels as sk
from sharpo_kernels import _backend
from sharpo_kernels.testing import refusal

pytestmark = pytest.mark.skipif("cpp" not in _backend.usable_backends(torch.device("cpu"), ("cpp",)),
                                reason="native module not built")

# Run lengths of one row (summing to L = 16 * 9 + 13 = 157: a 13-token tail). Segment ids
# 0, 1, ... and -1 gaps alternate as written: ends exactly at block edges (16, 32), runs
# shorter than a block (1, 3, 15), runs of 17 (one token past a block), a row ending in a
# short run inside the tail.
RUNS = [(0, 16), (-1, 16), (1, 1), (2, 15), (-1, 3), (3, 32), (4, 17), (-1, 1), (5, 17),
        (6, 5), (-1, 21), (7, 13)]
L = sum(n for _, n in RUNS)
MASKS = [None, torch.bool, torch.uint8, torch.int64, torch.float32, torch.int32]


@pytest.fixture(autouse=True)
def poison_outputs(monkeypatch):
    from sharpo_kernels.segment_advantage import native
    monkeypatch.setattr(native, "_new_output", lambda B, L, device: torch.full(
        (B, L), float("nan"), dtype=torch.float32, device=device))


def _ids(shift: int) -> torch.Tensor:
    """One row of RUNS, its runs moved right by `shift` tokens (a -1 run in front), so
    that the same runs meet the blocks at every offset."""
    row = [-1] * shift
    for i, n in RUNS:
        row += [i] * n
    return torch.tensor(row[:L])


def _batch(logp_dtype, id_dtype, mask_dtype, seed):
    g = torch.Generator().manual_seed(seed)
    B = 16
    ids = torch.stack([_ids(r) for r in range(B)]).to(id_dtype)
    mask = torch.rand(B, L, generator=g) > 0.15
    first = torch.ones(B, L, dtype=torch.bool)          # a segment's first token stays on,
    first[:, 1:] = ids[:, 1:] != ids[:, :-1]            # so no segment is empty
    mask |= first
    if mask_dtype is None:
        mask[:] = True
    student = -torch.rand(B, L, generator=g) * 3
    teacher = (student + torch.randn(B, L, generator=g)).clamp(max=0)
    # NaN where nothing reads it: padding (id -1) and mask-off positions
    unused = (ids < 0) | ~mask
    teacher = teacher.masked_fill(unused & (torch.rand(B, L, generator=g) < 0.5), float("nan"))
    student = student.masked_fill(unused & (torch.rand(B, L, generator=g) < 0.5), float("nan"))
    has_teacher = torch.rand(B, generator=g) > 0.2
    teacher[~has_teacher] = float("nan")                 # rows without a teacher: never read
    return dict(teacher_logp=teacher.to(logp_dtype), student_logp=student.to(logp_dtype),
                segment_ids=ids, advantages=torch.randn(B, generator=g), has_teacher=has_teacher,
                response_mask=None if mask_dtype is None else mask.to(mask_dtype))


@pytest.mark.parametrize("logp_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("mask_dtype", MASKS, ids=str)
def test_block_edges_match_reference(logp_dtype, id_dtype, mask_dtype):
    batch = _batch(logp_dtype, id_dtype, mask_dtype, seed=3)
    got = sk.segment_advantage(**batch, backend="cpp")
    want = sk.segment_advantage(**batch, backend="torch")
    assert not got.advantages.isnan().any(), "a token was not written"
    for a, b in zip(got, want):
        if a.is_floating_point():
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            assert torch.equal(a, b)


def _message(batch, backend):
    return refusal(sk.segment_advantage, **batch, backend=backend)


# (row, token) of a bad value, by the path that meets it: inside a whole block of a long run
# (row 0's run 3: tokens 51..82), in the block holding a run's end (run 4: 83..99, its
# last token), in a run of one token, in the row's 13-token tail, in a later row.
PLACES = {"whole block": (0, 60), "run end block": (0, 99), "short run": (0, 32),
          "tail": (0, L - 2), "late row": (9, 70)}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("bad", ["teacher nan", "student inf", "teacher too large",
                                 "student too large", "mask 2"])
@pytest.mark.parametrize("logp_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask_dtype", [torch.uint8, torch.float32, torch.int64])
def test_bad_value_on_each_path(place, bad, logp_dtype, mask_dtype):
    """The same error (rule, row, position, value) as the torch reference, wherever the
    bad value sits."""
    batch = _batch(logp_dtype, torch.int64, mask_dtype, seed=5)
    r, p = PLACES[place]
    batch["has_teacher"][r] = True
    batch["teacher_logp"][r] = batch["student_logp"][r] - 0.25   # NaN only where unused
    batch["response_mask"][r, p] = 1
    if bad == "mask 2":
        batch["response_mask"][r, p] = 2
    else:
        key = "teacher_logp" if bad.startswith("teacher") else "student_logp"
        other = "student_logp" if key == "teacher_logp" else "teacher_logp"
        batch[other][r, p] = -1.0
        big = 1e38 if logp_dtype == torch.float32 else 3e38
        batch[key][r, p] = {"nan": float("nan"), "inf": float("-inf")}.get(bad.split()[1], -big)
    msg = _message(batch, "cpp")
    assert msg != "no error"
    assert msg == _message(batch, "torch")


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32, torch.int64])
def test_unused_bad_values_in_whole_blocks(mask_dtype):
    """NaN/inf log-probs where the mask is off, in -1 runs and in rows without a teacher
    are never read: inside whole blocks too."""
    batch = _batch(torch.float32, torch.int64, mask_dtype, seed=7)
    batch["response_mask"][0, 52:80] = 0                   # off inside run 3's whole blocks
    batch["teacher_logp"][0, 52:80] = float("inf")
    batch["student_logp"][1, 17:33] = float("nan")         # row 1's first -1 run: 17..32
    got = sk.segment_advantage(**batch, backend="cpp")
    want = sk.segment_advantage(**batch, backend="torch")
    torch.testing.assert_close(got.advantages, want.advantages, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got.gap, want.gap, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_workspace_kept_between_calls():
    """The per-row scratch the calling thread keeps between calls (row_workspace): an error
    in one call leaves nothing behind, and batches of other sizes reuse it correctly."""
    batch = _batch(torch.float32, torch.int64, torch.bool, seed=11)
    bad = dict(batch, teacher_logp=batch["teacher_logp"].clone())
    bad["has_teacher"] = batch["has_teacher"].clone()
    bad["has_teacher"][4] = True
    bad["teacher_logp"][4] = float("nan")
    with pytest.raises(ValueError, match="row 4"):
        sk.segment_advantage(**bad, backend="cpp")
    for B in (16, 3, 16, 1):
        part = {k: (v[:B] if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}
        got = sk.segment_advantage(**part, backend="cpp")
        want = sk.segment_advantage(**part, backend="torch")
        torch.testing.assert_close(got.advantages, want.advantages, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got.gap, want.gap, rtol=1e-5, atol=1e-6, equal_nan=True)
        assert torch.equal(got.num_segments.long(), want.num_segments.long())


@pytest.mark.parametrize("adv_dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_advantage_range_in_the_kernel(adv_dtype):
    """The cpp kernel checks the advantages' range rule itself, before every other rule
    (float64: on the host, its float32 copy may round across the bound): at the edge, one
    step past it, and ranked above a bad id in an earlier row; the torch reference's
    message."""
    from sharpo_kernels.segment_advantage.checks import _FP32_HALF, max_coefficient
    batch = _batch(torch.float32, torch.int64, torch.bool, seed=13)
    c = max_coefficient(0.2, 0.5, 2.0)
    fin = torch.finfo(adv_dtype)
    edge = torch.tensor(_FP32_HALF / c, dtype=torch.float64).to(adv_dtype)
    while float(edge.double()) * c > _FP32_HALF:        # the largest value the rule accepts
        edge = (edge.double() * (1 - fin.eps)).to(adv_dtype)   # at least one step down
    past = torch.tensor(float(edge.double()) * (1 + 2 * fin.eps), dtype=torch.float64).to(adv_dtype)
    assert float(past.double()) * c > _FP32_HALF
    for value, ok in ((edge, True), (-edge, True), (past, False), (-past, False)):
        adv = batch["advantages"].to(adv_dtype) * 1e-3
        adv[6] = value
        b = dict(batch, advantages=adv, lam=0.2, alpha=0.5, rho_max=2.0)
        msgs = {bk: _message(b, bk) for bk in ("cpp", "torch")}
        assert (msgs["cpp"] == "no error") == ok and len(set(msgs.values())) == 1, msgs
        if not ok:
            assert msgs["cpp"].startswith("ValueError: advantages: ") and "row 6" in msgs["cpp"]
            b["segment_ids"] = b["segment_ids"].clone()
            b["segment_ids"][0, 0] = 5                   # a bad id in row 0 ranks lower
            assert _message(b, "cpp") == msgs["cpp"]
