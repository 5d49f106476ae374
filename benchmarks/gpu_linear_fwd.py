"""The sm_90 forward candidates of linear_logprobs timed side by side (issue 45 item 3; one
step of benchmarks/gpu_session.sh, about 20-30 s on an H100/H200).

    python benchmarks/gpu_linear_fwd.py [--budget-s 20] [--entropy] [--out FILE]

At N=8192, H=4096, V=151936, bf16, every row scored: naive torch (cuBLAS logits +
log_softmax + gather), cuBLAS's bf16 product alone (h @ W^T: what the tensor cores give to
a library GEMM on this card, the ceiling a fused forward can hope for), then each candidate
of sharpo_kernels/logprobs/linear_fwd_variants.py in the order below (the most promising
first, from the compiled facts in benchmarks/results/linear_fwd_candidates.md). Each
candidate is first checked against the fp32 torch log-probs of the first 512 rows, then
timed (median of `triton.testing.do_bench`). Printed: ms, TFLOP/s (2 N V H), % of the
card's dense bf16 peak (benchmarks/gpu.py's table), time relative to "base" (today's
default), the vocabulary splits used, and the check. No row starts after --budget-s
seconds (the rest say "skipped: time budget"). --entropy: each candidate also with the
entropy output (more registers: results/linear_fwd_candidates.md).

Without CUDA it says so and exits with status 0; `run_candidates` also runs on CPU tensors
through the Triton interpreter (tests/kernels/test_gpu_linear_fwd_script.py).
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# the order the GPU run takes them in (the most informative first): today's default, the
# whole-wave TMA forward, its two-CTA 128 x 128 sibling, cuBLAS chunks, then the ablations
ORDER = ("base", "tma_waves", "tma_2cta", "cublas", "tma", "exp2", "tma_flat", "cp_2cta",
         "tma_w4_2cta", "tma_k128")
SHAPE = (8192, 4096, 151936)                 # N, H, V
CHECK_ROWS = 512


@dataclass
class FwdRow:
    impl: str
    ms: float = float("nan")
    err: float = float("nan")       # max |logp - fp32 torch| / max(1, |fp32 torch|)
    splits: str = ""
    note: str = ""


def _splits_of(cfg, n, h, v, device, dtype) -> str:
    if cfg.fwd_cublas(device, dtype):
        vc = cfg.chunk_columns(n, v, 128, 4)
        return f"{-(-v // vc)} cuBLAS chunks of {vc}"
    bn, bv, _, splits, _, warps = cfg.resolve(n, v, h, device, dtype)
    return f"{splits} ({bn}x{bv} w{warps})"


def run_candidates(hid, w, y, names, deadline: float, bench, entropy: bool = False,
                   check_rows: int = CHECK_ROWS) -> list:
    """[FwdRow]: naive torch, the torch product alone, then each candidate `names` (with
    entropy when asked), each checked against fp32 torch on the first `check_rows` rows and
    timed by bench(fn) -> ms. Rows not started by `deadline` (time.time()) are skipped."""
    import torch
    from sharpo_kernels.logprobs.linear_triton import (LinearTritonConfig,
                                                       linear_logprobs_triton)
    n, h = hid.shape
    v = w.shape[0]
    k = min(check_rows, n)
    want = torch.log_softmax(hid[:k].float() @ w.float().t(), -1).gather(
        1, y[:k, None]).squeeze(1)

    def err_of(got):
        return float(((got[:k].float() - want).abs() / want.abs().clamp_min(1)).max())

    def naive():
        return torch.log_softmax((hid @ w.t()).float(), -1).gather(1, y[:, None]).squeeze(1)

    cases = [("naive torch", naive, ""), ("torch h @ W^T alone", lambda: hid @ w.t(), "")]
    for name in names:
        for ent in ((False, True) if entropy else (False,)):
            cfg = LinearTritonConfig(fwd_variant=name)
            label = f"{name}{' +entropy' if ent else ''}"
            cases.append((label, (lambda cfg=cfg, ent=ent: linear_logprobs_triton(
                hid, w, y, return_entropy=ent, config=cfg)[0]),
                _splits_of(cfg, n, h, v, hid.device, hid.dtype)))
    rows = []
    for label, fn, splits in cases:
        row = FwdRow(label, splits=splits)
        rows.append(row)
        if time.time() > deadline:
            row.note = "skipped: time budget"
            continue
        try:
            with torch.no_grad():
                out = fn()
                if label != "torch h @ W^T alone":
                    row.err = err_of(out)
                del out
                row.ms = bench(fn)
        except Exception as exc:        # a candidate that fails to compile or run: reported
            row.note = f"failed: {type(exc).__name__}: {str(exc)[:100]}"
        print(f"{label}: {row.ms:.3f} ms, err {row.err:.1e} {row.note}", flush=True)
    return rows


def fmt_table(rows, n: int, h: int, v: int, peak_tflops) -> str:
    base = next((r.ms for r in rows if r.impl == "base"), float("nan"))
    out = ["| forward | ms | TFLOP/s | % of bf16 peak | vs base | splits (tile) | "
           "max rel err vs fp32 (first rows) | note |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tf = 2 * n * v * h / r.ms / 1e9 if r.ms == r.ms else float("nan")
        pct = f"{100 * tf / peak_tflops:.0f}%" if peak_tflops and tf == tf else "-"
        rel = f"{r.ms / base:.2f}x" if r.ms == r.ms and base == base else "-"
        out.append(f"| {r.impl} | {r.ms:.2f} | {tf:.0f} | {pct} | {rel} | {r.splits or '-'} | "
                   f"{'-' if r.err != r.err else f'{r.err:.1e}'} | {r.note} |")
    return "\n".join(out)


def main(argv=None) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _inputs import Parser, gpu_report_args
    ap = Parser(prog="gpu_linear_fwd.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the markdown report here")
    ap.add_argument("--budget-s", type=float, default=20.0,
                    help="seconds from the start after which no row starts")
    ap.add_argument("--entropy", action="store_true", help="also each with the entropy")
    args = ap.parse_args(argv)
    err = gpu_report_args(args.budget_s, args.out)    # before any work
    if err:
        print(f"error: gpu_linear_fwd.py: {err}", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("gpu_linear_fwd.py: no CUDA device on this machine; nothing to run")
        return 0
    import triton
    from triton.testing import do_bench
    from gpu import device_peaks
    t0 = time.time()
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    peaks = device_peaks(name)
    n, h, v = SHAPE
    g = torch.Generator(device=dev).manual_seed(1)
    hid = torch.randn(n, h, device=dev, generator=g, dtype=torch.bfloat16)
    w = (torch.randn(v, h, device=dev, generator=g) * 0.03).to(torch.bfloat16)
    y = torch.randint(0, v, (n,), device=dev, generator=g)
    rows = run_candidates(hid, w, y, ORDER, t0 + args.budget_s,
                          lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median"),
                          entropy=args.entropy)
    cap = torch.cuda.get_device_capability(0)
    report = (f"device: {name} (sm_{cap[0]}{cap[1]}); torch {torch.__version__}, triton "
              f"{triton.__version__}; N={n} H={h} V={v} bf16, every row scored; "
              f"{time.time() - t0:.0f} s\n\n"
              + fmt_table(rows, n, h, v, peaks[1] if peaks else None) + "\n")
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)
    bad = [r for r in rows if r.err == r.err and r.err > 1e-4]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
