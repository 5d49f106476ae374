"""What one segment_advantage call costs a GPU, counted on CPU tensors with a
TorchDispatchMode (sharpo_kernels/dispatch_count.py; issue 44): launching ops (each about
one kernel launch on CUDA) and host reads (each a synchronisation on CUDA).

Targets: the triton backend (interpreter) makes at most 4 launching ops and at most 1 host
read per call, and none in the deferred check mode with a static segment cap."""
import os

import pytest
import torch

import sharpo_kernels as sk
from sharpo_kernels import _backend
from sharpo_kernels.dispatch_count import count_dispatch
from sharpo_kernels.testing import random_batch

HAS_TRITON = "triton" in _backend.usable_backends(torch.device("cpu"), ("triton",))
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton (TRITON_INTERPRET=1) not usable")


def _batch(traj=False, mask_dtype=torch.int64):
    b = random_batch(6, 40, segments=(0, 5), seed=3, traj_groups=3 if traj else None)
    if not traj:
        b["traj_index"] = None
    if b.get("response_mask") is not None:
        b["response_mask"] = b["response_mask"].to(mask_dtype)
    return b


def test_counter_sees_launches_and_reads():
    """The counter itself: ops, views, allocations, .item() and .tolist()."""
    def f(x):
        y = torch.empty(3)          # allocation: not counted
        v = x[1:].t()               # views: not counted
        z = (v + 1).sum()           # 2 launches
        return float(z), x.tolist(), y   # 2 host reads
    c = count_dispatch(f, torch.ones(4, 2))
    assert (c.launches, c.host_reads) == (2, 2), c.ops


def test_reference_backend_is_counted():
    """The torch reference launches many ops and reads the host several times: the counts
    are real (this is what the single pass removes)."""
    c = count_dispatch(sk.segment_advantage, **_batch(), backend="torch")
    assert c.launches > 20 and c.host_reads >= 2, (c.launches, c.host_reads)


@needs_triton
@pytest.mark.parametrize("traj", [False, True])
@pytest.mark.parametrize("mask_dtype", [torch.int64, torch.bool, torch.float32])
def test_triton_one_pass(traj, mask_dtype):
    b = _batch(traj, mask_dtype)
    c = count_dispatch(sk.segment_advantage, **b, backend="triton")
    kernels = [op for op in c.ops if op.startswith("triton:")]
    assert len(kernels) == (2 if traj else 1), c.ops
    assert c.launches <= 4, c.ops
    assert c.host_reads <= 1, c.host_reads
    ref = sk.segment_advantage(**b, backend="torch")
    torch.testing.assert_close(c.result.advantages, ref.advantages, rtol=1e-5, atol=1e-6)


@needs_triton
@pytest.mark.parametrize("traj", [False, True])
def test_triton_deferred_no_host_read(traj):
    b = _batch(traj)
    c = count_dispatch(sk.segment_advantage, **b, backend="triton", max_segments=8,
                       check="deferred")
    assert c.host_reads == 0, c.ops
    assert c.launches <= 4, c.ops
    res, chk = c.result
    assert chk.word.shape == (2,) and chk.word.tolist() == [0, int(res.num_segments.max())]
    chk.raise_if_error()
    ref = sk.segment_advantage(**b, backend="torch")
    k = ref.gap.shape[1]
    torch.testing.assert_close(res.advantages, ref.advantages, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(res.gap[:, :k], ref.gap, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert res.gap[:, k:].isnan().all() and res.weight.shape == (6, 8)


@needs_triton
def test_deferred_reports_the_error_later():
    """check="deferred": the call does not raise; raise_if_error() raises the message the
    default mode raises."""
    b = _batch()
    b["teacher_logp"][2, :] = float("nan")
    b["has_teacher"][2] = True
    b["segment_ids"][2, 0] = 0
    with pytest.raises(ValueError) as want:
        sk.segment_advantage(**b, backend="torch")
    _, chk = sk.segment_advantage(**b, backend="triton", max_segments=8, check="deferred")
    with pytest.raises(ValueError) as got:
        chk.raise_if_error()
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("backend", _backend.usable_backends(torch.device("cpu"),
                                                             ("torch", "cpp", "triton")))
def test_max_segments_caps_the_tables(backend):
    b = _batch()
    ref = sk.segment_advantage(**b, backend="torch")
    k = ref.gap.shape[1]
    res = sk.segment_advantage(**b, backend=backend, max_segments=k + 3)
    assert res.gap.shape == (6, k + 3) and res.weight[:, k:].isnan().all()
    torch.testing.assert_close(res.length_factor[:, :k], ref.length_factor, equal_nan=True)
    with pytest.raises(ValueError, match=r"^max_segments: row \d+ has \d+ segments"):
        sk.segment_advantage(**b, backend=backend, max_segments=k - 1)
    with pytest.raises(ValueError, match="^check:"):
        sk.segment_advantage(**b, backend=backend, check="later")
    with pytest.raises(TypeError, match="^max_segments:"):
        sk.segment_advantage(**b, backend=backend, max_segments=2.0)


def test_deferred_needs_triton():
    with pytest.raises(ValueError, match="^check: 'deferred' needs the triton or cuda backend"):
        sk.segment_advantage(**_batch(), backend="torch", check="deferred")


GPU_BACKENDS = (_backend.usable_backends(torch.device("cuda"), ("triton", "cuda"))
                if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
                else [])


@pytest.mark.skipif(not GPU_BACKENDS, reason="needs CUDA and compiled Triton")
@pytest.mark.parametrize("backend", GPU_BACKENDS or ["triton"])
def test_cuda_graph_capture_and_replay(backend):
    """max_segments + check="deferred": the call captures in a CUDA graph; a replay on new
    data gives the eager result, and a replay on bad data reports it through the word."""
    dev = torch.device("cuda")
    bs = [{k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in _batch().items()}
          for _ in range(2)]
    bs[1]["advantages"] = -bs[1]["advantages"] * 3
    static = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in bs[0].items()}
    call = lambda: sk.segment_advantage(**static, backend=backend, max_segments=8,  # noqa: E731
                                        check="deferred")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()                                   # compile and warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        res, chk = call()
    for b in bs:
        for k, v in b.items():
            if isinstance(v, torch.Tensor):
                static[k].copy_(v)
        graph.replay()
        chk.raise_if_error()
        ref = sk.segment_advantage(**b, backend="torch", max_segments=8)
        torch.testing.assert_close(res.advantages, ref.advantages, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(res.gap, ref.gap, rtol=1e-5, atol=1e-6, equal_nan=True)
    static["advantages"][1] = float("nan")
    graph.replay()
    with pytest.raises(ValueError, match="^advantages: must be finite"):
        chk.raise_if_error()


@pytest.mark.parametrize("traj", [False, True])
@pytest.mark.parametrize("deferred", [False, True])
def test_cuda_glue_counts(monkeypatch, traj, deferred):
    """The torch ops around the native CUDA kernel (run here on CPU tensors with the native
    call stubbed out): at most 4 launching ops, 1 host read, 0 deferred; the kernel gets one
    call with the tables, output and word."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    from sharpo_kernels.segment_advantage import native, single_pass
    calls = []

    def fake_kernel(*args):
        calls.append(args)
        return 0

    monkeypatch.setattr(_backend, "native_module",
                        lambda: SimpleNamespace(segment_advantage_cuda=fake_kernel))
    monkeypatch.setattr(torch.cuda, "device", lambda d: nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d: SimpleNamespace(cuda_stream=0))
    b = _batch(traj)
    args = [b[k] for k in ("teacher_logp", "student_logp", "segment_ids", "advantages",
                           "has_teacher", "response_mask", "traj_index")]
    c = count_dispatch(single_pass.run_single_pass, native.launch_cuda, *args,
                       (0.2, 0.5, 1.0, 0.25, 4.0), 8 if deferred else None, deferred)
    assert len(calls) == 1 and c.launches <= 4, c.ops
    assert c.host_reads == (0 if deferred else 1), c.ops
    assert calls[0][4] == (8 if deferred else 40) and calls[0][11] == (0 if not traj else b["traj_index"].data_ptr())


@needs_triton
@pytest.mark.parametrize("traj", [False, True])
def test_more_segments_than_the_default_table(traj):
    """A row with more segments than single_pass.DEFAULT_CAP: the call launches again with
    the exact Kmax (one more read) and matches the reference; an empty segment past the
    default table is still reported first by row."""
    from sharpo_kernels.segment_advantage.single_pass import DEFAULT_CAP
    K = DEFAULT_CAP + 7
    b = random_batch(3, 2 * K + 5, segments=(1, 3), seed=9, traj_groups=2 if traj else None)
    if not traj:
        b["traj_index"] = None
    ids = torch.full((2 * K + 5,), -1, dtype=torch.int64)
    ids[1:2 * K + 1] = torch.arange(K).repeat_interleave(2)
    b["segment_ids"][1] = ids
    b["response_mask"][1] = True
    g = torch.Generator().manual_seed(4)
    b["teacher_logp"][1] = -torch.rand(2 * K + 5, generator=g)   # no NaN padding in row 1
    b["student_logp"][1] = -torch.rand(2 * K + 5, generator=g)
    ref = sk.segment_advantage(**b, backend="torch")
    c = count_dispatch(sk.segment_advantage, **b, backend="triton")
    assert c.host_reads == 2 and ref.gap.shape == (3, K) == c.result.gap.shape
    for got, want in zip(c.result, ref):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    b["response_mask"] = b["response_mask"].clone()
    b["response_mask"][1, 2 * K - 1:2 * K + 1] = False        # empties segment K - 1
    msgs = set()
    for backend in ("torch", "triton"):
        with pytest.raises(ValueError) as e:
            sk.segment_advantage(**b, backend=backend)
        msgs.add(str(e.value))
    assert len(msgs) == 1 and f"segment {K - 1} of row 1" in msgs.pop()
