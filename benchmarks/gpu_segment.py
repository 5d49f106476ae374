"""GPU check and timing of `segment_advantage` (one call, about a minute on an H100/H200).

    python benchmarks/gpu_segment.py [--out benchmarks/results/segment_advantage_gpu.md]

1. Checks: every backend usable on the device ("triton", and "cuda" when the native module
   was built with nvcc) against the "torch" backend on the same device, on fresh random
   batches of odd shapes (fp32 and bf16 log-probs, rows without a teacher, zero
   advantages, masked tokens, trajectories spread over rows): advantages, gap, weight,
   length factor and segment counts, NaN where the reference has NaN; and one batch per
   broken data rule raises torch's message word for word (`check_errors`).
2. Timing: median of `triton.testing.do_bench` per backend at B=256 L=4096 (about 40
   segments a row, the shape of the CPU table), a large RL batch B=4096 L=8192 and a
   latency case B=8 L=512: µs per call, the achieved bandwidth over the bytes the call must
   touch (its inputs read once, the [B, L] advantages written once), and the time over the
   memory floor (those bytes at the datasheet bandwidth); launches and host reads per call
   (sharpo_kernels/dispatch_count.py: torch ops and Triton launches; the native cuda
   backend's own launches are not seen); and the triton call captured in a CUDA graph
   (max_segments=64, check="deferred") and replayed.

Without CUDA it says so and exits with status 0; `check_backends` also runs on the CPU
(tests/kernels/test_gpu_segment_script.py).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import sharpo_kernels as sk  # noqa: E402
from sharpo_kernels import _backend  # noqa: E402
from sharpo_kernels.segment_advantage.api import SEGMENT_ADVANTAGE_BACKENDS  # noqa: E402
from sharpo_kernels.testing import random_batch  # noqa: E402

FIELDS = ("advantages", "gap", "weight", "length_factor")
# (B, L, segments per row, dtype, traj_groups): odd sizes, both dtypes, trajectories
CHECK_CASES = ((37, 1001, (0, 9), torch.float32, None), (5, 4099, (1, 40), torch.bfloat16, None),
               (64, 513, (1, 12), torch.float32, 6), (3, 17, (0, 3), torch.bfloat16, 2))


def batch_on(device, B, L, segments, dtype, traj_groups, seed) -> dict:
    b = random_batch(B, L, segments=segments, dtype=dtype, seed=seed, traj_groups=traj_groups)
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in b.items()}


def check_backends(device, backends=None, seed: int = 0) -> list:
    """[(case, backend, field, max abs error or None when NaNs differ, ok)] against the
    torch backend on `device`, for every backend usable there but torch."""
    if backends is None:
        backends = [b for b in _backend.usable_backends(device, SEGMENT_ADVANTAGE_BACKENDS)
                    if b != "torch"]
    out = []
    for i, (B, L, segs, dtype, traj) in enumerate(CHECK_CASES):
        batch = batch_on(device, B, L, segs, dtype, traj, seed + i)
        want = sk.segment_advantage(**batch, backend="torch")
        case = f"B={B} L={L} {str(dtype).replace('torch.', '')}" + (f" traj={traj}" if traj else "")
        for name in backends:
            got = sk.segment_advantage(**batch, backend=name)
            for field in FIELDS:
                g, w = getattr(got, field).float(), getattr(want, field).float()
                same_nan = g.shape == w.shape and bool(torch.equal(g.isnan(), w.isnan()))
                d = (g - w).nan_to_num().abs()
                err = (float(d.max()) if g.numel() else 0.0) if same_nan else None
                ok = same_nan and bool((d <= 1e-5 + 1.3e-6 * w.nan_to_num().abs()).all())
                out.append((case, name, field, err, ok))    # assert_close's fp32 tolerances
            ok = bool(torch.equal(got.num_segments.cpu(), want.num_segments.cpu()))
            out.append((case, name, "num_segments", 0.0 if ok else None, ok))
    return out


def _break(batch: dict, rule: str) -> dict:
    """A copy of `batch` with one data rule broken (checks.py), in row 1."""
    b = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}
    ids = b["segment_ids"]
    first = int((ids[1] >= 0).nonzero()[0, 0]) if bool((ids[1] >= 0).any()) else 0
    if rule == "nan teacher":
        b["has_teacher"][1] = True
        ids[1, first] = max(int(ids[1, first]), 0) if first else 0
        b["response_mask"][1, first] = True
        b["teacher_logp"][1, first] = float("nan")
    elif rule == "id below -1":
        ids[1, 3] = -5
    elif rule == "advantage inf":
        b["advantages"][1] = float("inf")
    else:   # "empty segment": every position of row 1 masked
        ids[1, :2] = 0
        b["response_mask"][1] = False
    return b


ERROR_RULES = ("nan teacher", "id below -1", "advantage inf", "empty segment")


def check_errors(device, backends=None, seed: int = 0) -> list:
    """[(rule, backend, message, ok)]: a batch with one broken rule raises the torch
    backend's ValueError, word for word, on every other backend (the single-pass kernels
    report it through their error word)."""
    if backends is None:
        backends = [b for b in _backend.usable_backends(device, SEGMENT_ADVANTAGE_BACKENDS)
                    if b != "torch"]
    base = batch_on(device, 6, 97, (1, 5), torch.float32, None, seed)
    out = []
    for rule in ERROR_RULES:
        bad = _break(base, rule)
        msgs = {}
        for name in ["torch", *backends]:
            try:
                sk.segment_advantage(**bad, backend=name)
                msgs[name] = "no error"
            except ValueError as e:
                msgs[name] = str(e)
        for name in backends:
            out.append((rule, name, msgs[name],
                        msgs[name] == msgs["torch"] and msgs[name] != "no error"))
    return out


def touched_bytes(batch: dict) -> int:
    """Bytes a call must move at least: every input tensor read once, the fp32 [B, L]
    advantages written once."""
    read = sum(v.numel() * v.element_size() for v in batch.values() if isinstance(v, torch.Tensor))
    B, L = batch["teacher_logp"].shape
    return read + B * L * 4


def profile_backends(dev, path: str, calls: int = 10) -> None:
    """torch.profiler tables (CPU and CUDA time per op) of `calls` calls per backend at the
    timing shape, written to `path`: where a call's time goes (argument checks, host syncs,
    kernels)."""
    from torch.profiler import ProfilerActivity, profile
    batch = batch_on(dev, 256, 4096, (30, 50), torch.float32, None, seed=0)
    with open(path, "w") as f:
        for b in _backend.usable_backends(dev, SEGMENT_ADVANTAGE_BACKENDS):
            for _ in range(3):
                sk.segment_advantage(**batch, backend=b)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    sk.segment_advantage(**batch, backend=b)
                torch.cuda.synchronize()
            f.write(f"## backend {b}: {calls} calls\n\n")
            f.write(prof.key_averages().table(sort_by="cpu_time_total", row_limit=25) + "\n\n")


SHAPES = ((256, 4096), (4096, 8192), (8, 512))


def time_backends(dev, do_bench, peaks) -> list:
    """Markdown rows: per shape and backend, counts per call, median µs, GB/s, time / floor;
    then the triton call replayed from a CUDA graph."""
    from sharpo_kernels.dispatch_count import count_dispatch
    rows = []
    for B, L in SHAPES:
        batch = batch_on(dev, B, L, (30, 50), torch.float32, None, seed=0)
        nbytes = touched_bytes(batch)
        floor_us = nbytes / peaks[0] / 1e3 if peaks else None    # peaks[0]: GB/s
        for b in _backend.usable_backends(dev, SEGMENT_ADVANTAGE_BACKENDS):
            call = lambda b=b: sk.segment_advantage(**batch, backend=b)  # noqa: E731
            call()
            c = count_dispatch(call)
            us = 1e3 * do_bench(call, warmup=10, rep=100, return_mode="median")
            rows.append(f"| B={B} L={L} | {b} | {c.launches} | {c.host_reads} | {us:.1f} | "
                        f"{nbytes / us / 1e3:.0f} | "
                        f"{'?' if floor_us is None else f'{us / floor_us:.1f}x'} |")
        if "triton" in _backend.usable_backends(dev, SEGMENT_ADVANTAGE_BACKENDS):
            us = graph_replay_us(batch, do_bench)
            rows.append(f"| B={B} L={L} | triton, CUDA graph replay | 0 | 0 | {us:.1f} | "
                        f"{nbytes / us / 1e3:.0f} | "
                        f"{'?' if floor_us is None else f'{us / floor_us:.1f}x'} |")
        del batch
        torch.cuda.empty_cache()
    return rows


def graph_replay_us(batch, do_bench) -> float:
    """Median µs of replaying the triton call (max_segments=64, check="deferred") captured
    in a CUDA graph; checks the replay's error word is clear."""
    call = lambda: sk.segment_advantage(**batch, backend="triton", max_segments=64,  # noqa: E731
                                        check="deferred")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _, chk = call()
    graph.replay()
    chk.raise_if_error()
    return 1e3 * do_bench(graph.replay, warmup=10, rep=100, return_mode="median")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_segment.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the markdown report here")
    ap.add_argument("--profile", help="also write torch.profiler tables of each backend here")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_segment.py: no CUDA device on this machine; nothing to run")
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpu import device_peaks
    from triton.testing import do_bench
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    peaks = device_peaks(name)
    t0 = time.time()
    checks = check_backends(dev)
    lines = [f"- {'ok' if ok else 'FAIL'} {case} {b} {f}: max abs err "
             f"{'NaN pattern differs' if e is None else f'{e:.1e}'}" for case, b, f, e, ok in checks]
    errors = check_errors(dev)
    lines += [f"- {'ok' if ok else 'FAIL'} error '{rule}' {b}: {msg}"
              for rule, b, msg, ok in errors]
    print("\n".join(lines), flush=True)
    rows = time_backends(dev, do_bench, peaks)
    import triton
    head = (f"device: {name}; torch {torch.__version__}, triton {triton.__version__}; "
            f"native CUDA kernels: {_backend.native_has_cuda()}; {platform.node()}; "
            f"{time.time() - t0:.0f} s\n")
    table = ("30-50 segments a row, fp32 log-probs, bool mask. Floor: the bytes touched at "
             "the datasheet bandwidth.\n\n| shape | backend | launches | host reads | "
             "median µs | GB/s | time / floor |\n|---|---|---:|---:|---:|---:|---:|\n"
             + "\n".join(rows))
    report = head + "\nChecks (each backend against torch on the GPU):\n" + "\n".join(lines) + \
        "\n\n" + table + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)
    if args.profile:
        profile_backends(dev, args.profile)
    return 0 if all(c[-1] for c in checks + errors) else 1


if __name__ == "__main__":
    sys.exit(main())
