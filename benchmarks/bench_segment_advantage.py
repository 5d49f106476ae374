"""Benchmark of segment_advantage on CPU: the C++ backend, the vectorised torch reference and
the per-row / per-segment Python loop a user would write first, at B=256, L=4096, about 40
segments per row; plus a STREAM-like triad (a = b + s*c, torch) for the machine's memory
bandwidth. Times are compared as ratios within this process; memory as peak RSS bytes.

    .venv/bin/python -m pytest benchmarks/bench_segment_advantage.py --benchmark-only -s

A module fixture prints the summary at the end (ratios, GB/s, peak bytes); results go to
benchmarks/results/segment_advantage.md.

Also (issue 44): launches and host reads per call of every backend (counted with a
TorchDispatchMode, sharpo_kernels/dispatch_count.py; on a GPU each op is about one launch
and each read a synchronisation), µs per call, GB/s and the ratio to the memory floor
(the bytes a call must move over the triad bandwidth) at B=256 L=4096, at a latency shape
B=8 L=512 and, for cpp only, at a large RL batch B=4096 L=8192 (the torch reference needs
several GB of temporaries and seconds per call there; gpu_segment.py times it on a GPU);
and cpp with one thread against its default thread count while a busy process competes
for the cores.
"""
import os
import subprocess
import sys
import time

import pytest
import torch

import sharpo_kernels as sk
from sharpo_kernels import SHARPO_DEFAULTS as D, _backend
from sharpo_kernels.dispatch_count import count_dispatch
from sharpo_kernels.testing import random_batch

B, L, SEGMENTS = 256, 4096, (36, 44)
LATENCY, LARGE = (8, 512), (4096, 8192)
RESULTS = {}       # name -> seconds (min over rounds)
DEFAULT_THREADS = torch.get_num_threads()
HAS_CPP = _backend.backend_runs_on("cpp", torch.device("cpu"))[0]
needs_cpp = pytest.mark.skipif(not HAS_CPP, reason="native module not built")


def _batch(b, l):
    out = random_batch(b, l, segments=SEGMENTS, seed=0)
    out["traj_index"] = None
    return out


@pytest.fixture(scope="module")
def batch():
    return _batch(B, L)


@pytest.fixture(scope="module")
def small():
    return _batch(*LATENCY)


def python_loop(teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                response_mask, traj_index=None, lam=D.lam, alpha=D.alpha, tau=D.tau,
                rho_min=D.rho_min, rho_max=D.rho_max):
    """docs/method.md §4 as first written: loop over rows, then over segments, torch ops on
    the row (no validation)."""
    mask = response_mask.bool()
    out = advantages[:, None].float() * mask.float()
    for i in range(teacher_logp.shape[0]):
        ids = segment_ids[i]
        K = int(ids.max()) + 1
        if K <= 0 or not bool(has_teacher[i]):
            continue
        a = float(advantages[i])
        sels, ms, gaps = [], [], []
        for k in range(K):
            sel = (ids == k) & mask[i]
            d = teacher_logp[i][sel].float() - student_logp[i][sel].float()
            sels.append(sel)
            ms.append(int(sel.sum()))
            gaps.append(float(d.mean()))
        mbar = sum(ms) / K
        sign = (a > 0) - (a < 0)
        for sel, m, g in zip(sels, ms, gaps):
            u = min(max(2.0 * torch.sigmoid(torch.tensor(g / tau)).item() - 1.0, -alpha), alpha)
            w = 1.0 + sign * u
            rho = min(max(mbar / m, rho_min), rho_max)
            out[i][sel] = a * ((1.0 - lam) + lam * rho * w)
    return out


def _record(benchmark, name):
    if benchmark.stats is not None:
        RESULTS[name] = benchmark.stats.stats.min


def test_loop_matches_reference(batch):
    small = {k: (v[:8] if v is not None else None) for k, v in batch.items()}
    want = sk.segment_advantage(**small, backend="torch").advantages
    torch.testing.assert_close(python_loop(**small), want, rtol=1e-5, atol=1e-6)


def test_cpp(benchmark, batch):
    if not _backend.backend_runs_on("cpp", torch.device("cpu"))[0]:
        pytest.skip("native module not built")
    res = benchmark(sk.segment_advantage, **batch, backend="cpp")
    torch.testing.assert_close(res.advantages, sk.segment_advantage(**batch, backend="torch").advantages)
    _record(benchmark, "cpp")


def test_torch(benchmark, batch):
    benchmark.pedantic(sk.segment_advantage, kwargs=dict(**batch, backend="torch"), rounds=10,
                       warmup_rounds=1)
    _record(benchmark, "torch")


def test_python_loop(benchmark, batch):
    benchmark.pedantic(python_loop, kwargs=batch, rounds=2, iterations=1)
    _record(benchmark, "python_loop")


@needs_cpp
def test_cpp_latency(benchmark, small):
    benchmark(sk.segment_advantage, **small, backend="cpp")
    _record(benchmark, "cpp latency")


def test_torch_latency(benchmark, small):
    benchmark(sk.segment_advantage, **small, backend="torch")
    _record(benchmark, "torch latency")


@needs_cpp
def test_cpp_large(benchmark):
    big = _batch(*LARGE)
    benchmark.pedantic(sk.segment_advantage, kwargs=dict(**big, backend="cpp"), rounds=5,
                       warmup_rounds=1)
    _record(benchmark, "cpp large")


def _min_time(fn, rounds=30) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@needs_cpp
def test_cpp_threads_under_load(benchmark, batch):
    """cpp with one thread, then with the default thread count, each alone and while one
    busy process competes for the cores (issue 44: no slower than 1.5x one thread). The
    benchmark table's row is the last case: default threads under load."""
    call = lambda: sk.segment_advantage(**batch, backend="cpp")  # noqa: E731
    for load in (False, True):
        busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load else None)
        try:
            for threads in sorted({1, DEFAULT_THREADS}):   # one entry when the default is 1
                torch.set_num_threads(threads)
                try:
                    call()
                    RESULTS[f"cpp threads={threads} load={int(load)}"] = _min_time(call)
                    if load and threads == DEFAULT_THREADS:
                        benchmark.pedantic(call, rounds=10, warmup_rounds=1)
                finally:
                    torch.set_num_threads(DEFAULT_THREADS)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()


N_TRIAD = 64 * 1024 * 1024     # fp32 elements per array: 256 MiB each, far beyond cache


def test_triad_bandwidth(benchmark):
    b = torch.rand(N_TRIAD)
    c = torch.rand(N_TRIAD)
    a = torch.empty(N_TRIAD)
    benchmark.pedantic(torch.add, args=(b, c), kwargs=dict(alpha=3.0, out=a), rounds=10,
                       warmup_rounds=1)
    _record(benchmark, "triad")


def _peak_rss_delta(fn) -> int:
    """Peak resident bytes added while fn runs (Linux: VmHWM reset through clear_refs)."""
    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        raise RuntimeError(key)
    try:  # give freed heap memory back first, so reused pages count as new again
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS:")
    fn()
    return status("VmHWM:") - base


@pytest.fixture(scope="module", autouse=True)
def summary(batch):
    """After the module's benchmarks: ratios, bandwidth and peak memory, printed (use -s).
    No timing assertions."""
    yield
    if {"torch", "triad"} <= RESULTS.keys():
        print(_summary(batch))


def _summary(batch) -> str:
    tokens = B * L
    logp_bytes = batch["teacher_logp"].element_size()
    # bytes the C++ pass must move: teacher + student + ids + mask read, fp32 advantages written
    per_token = 2 * logp_bytes + batch["segment_ids"].element_size() + 1 + 4
    moved = tokens * per_token
    triad_gbs = 3 * 4 * N_TRIAD / RESULTS["triad"] / 1e9
    lines = [f"machine: {os.cpu_count()} cores, torch {torch.__version__}, "
             f"threads {torch.get_num_threads()}",
             f"batch: B={B} L={L} segments/row {SEGMENTS} "
             f"(mean {batch['segment_ids'].max(1).values.float().add(1).mean():.1f}), "
             f"logp {batch['teacher_logp'].dtype}",
             f"triad bandwidth: {triad_gbs:.2f} GB/s (a = b + 3c, 3 x 256 MiB)"]
    for name in ("cpp", "torch", "python_loop"):
        if name in RESULTS:
            t = RESULTS[name]
            lines.append(f"{name:12s} {t * 1e3:9.2f} ms  {moved / t / 1e9:6.2f} GB/s of the "
                         f"{moved / 1e6:.1f} MB it must move")
    if "cpp" in RESULTS:
        lines.append(f"torch / cpp        = {RESULTS['torch'] / RESULTS['cpp']:.1f}x")
        lines.append(f"python_loop / cpp  = {RESULTS.get('python_loop', float('nan')) / RESULTS['cpp']:.1f}x")
        lines.append(f"cpp at {moved / RESULTS['cpp'] / 1e9 / triad_gbs * 100:.0f}% of triad bandwidth "
                     f"(bound {moved / triad_gbs / 1e9 * 1e3:.2f} ms)")
    lines.append(f"python_loop / torch = {RESULTS.get('python_loop', float('nan')) / RESULTS['torch']:.1f}x")
    lines.append("per call: µs, GB/s, time / memory floor (bytes over triad bandwidth)")
    for name, (b, l) in (("cpp", (B, L)), ("torch", (B, L)), ("cpp latency", LATENCY),
                         ("torch latency", LATENCY), ("cpp large", LARGE)):
        if name in RESULTS:
            t, nbytes = RESULTS[name], b * l * per_token
            lines.append(f"  {name:14s} B={b:5d} L={l:5d} {t * 1e6:11.1f} µs "
                         f"{nbytes / t / 1e9:6.2f} GB/s  {t / (nbytes / triad_gbs / 1e9):5.2f}x floor")
    for load in (0, 1):
        one = RESULTS.get(f"cpp threads=1 load={load}")
        dflt = RESULTS.get(f"cpp threads={DEFAULT_THREADS} load={load}")
        if one and dflt:
            lines.append(f"cpp {'with a busy process' if load else 'alone':20s}: 1 thread "
                         f"{one * 1e3:.2f} ms, {DEFAULT_THREADS} threads {dflt * 1e3:.2f} ms "
                         f"({dflt / one:.2f}x the 1-thread time)")
    lines.append(f"launches / host reads per call (B={LATENCY[0]} L={LATENCY[1]}; on a GPU "
                 f"each is a kernel launch / a synchronisation; native calls not counted):")
    small = _batch(*LATENCY)
    for name in _backend.usable_backends(torch.device("cpu"), ("torch", "cpp", "triton")):
        c = count_dispatch(sk.segment_advantage, **small, backend=name)
        lines.append(f"  {name:7s} {c.launches:4d} launching ops, {c.host_reads} host reads")
    for name in ("cpp", "torch"):
        if name == "cpp" and "cpp" not in RESULTS:
            continue
        peak = _peak_rss_delta(lambda: sk.segment_advantage(**batch, backend=name))
        lines.append(f"peak RSS added by one {name} call: {peak / 2**20:.1f} MiB "
                     f"(inputs {tokens * per_token / 2**20:.1f} MiB incl. output)")
    return "\n" + "\n".join(lines)
