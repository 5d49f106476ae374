"""GPU check and benchmark of the Triton log-prob kernels (one call, a few minutes on an H100/H200).

    python benchmarks/gpu.py [--out benchmarks/results/logprobs_gpu.md] [--quick]

1. Checks: the Triton kernels (`token_logprobs`, `linear_logprobs`, backend="triton") against
   the float64 PyTorch reference on fresh random inputs of odd shapes (fp32 and bf16,
   temperature != 1, ignore_index rows, entropy, every gradient), and at the Qwen2.5 head
   shape in bf16 against the fp32 torch path.
2. Timing: median of `triton.testing.do_bench` for sharpo's kernels and whichever of these
   are installed: naive torch (log_softmax + gather), torch.nn.functional.linear_cross_entropy
   (reduction="none"), Liger-Kernel, Cut Cross-Entropy, flash-attn's Triton cross_entropy.
   Every fwd+bwd case backpropagates `logp.sum()` (or the loss sum). Reported: milliseconds,
   peak extra CUDA memory (max_memory_allocated above the inputs), achieved GB/s and
   TFLOP/s against the device's peaks (from a small table of datasheet numbers; "?" when
   the device is not in it), and sharpo's compiled bound: the floor the throughput model
   of benchmarks/compiled_facts.py puts on the same kernel at that shape for this GPU
   (docs/gpu_kernels.md), so that the first minutes on a GPU confirm or refute it.
3. The RL rows (benchmarks/gpu_rl.py): a random per-token upstream gradient, trainable and
   frozen head, entropy, bias, real-model-like peaked logits, the policy loss fused and
   unfused; Liger (fused linear CE reduction="none", its GRPO loss) and Cut Cross-Entropy
   (reduction="none", filter on and off) in the same process, "not installed" rows when
   absent. They stop starting at --budget-s seconds from the start (default 240).

Traffic and work counted (minimal, implementation-independent):
    token  fwd: read N*V logits; fwd+bwd: + read them again and write N*V gradients.
    linear fwd: 2*N*V*H FLOPs, read V*H weights; fwd+bwd: 6*N*V*H FLOPs ("model FLOPs":
           sharpo's backward recomputes the logits, 8*N*V*H executed), read W twice and
           write grad_W.

Without CUDA it says so and exits with status 0. The pure-Python parts (peaks, counts,
table) are importable and tested (tests/kernels/test_linear_logprobs_gpu_script.py), and
`check_kernels` also runs on CPU tensors through the Triton interpreter.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Datasheet peaks: (memory GB/s, dense bf16 tensor TFLOP/s, fp32 non-tensor TFLOP/s).
DEVICE_PEAKS = {
    "H200": (4800.0, 989.0, 67.0),
    "H100 PCIe": (2000.0, 756.0, 51.0),
    "H100": (3350.0, 989.0, 67.0),          # SXM
    "A100-SXM4-80GB": (2039.0, 312.0, 19.5),
    "A100": (1555.0, 312.0, 19.5),          # 40 GB
    "L40S": (864.0, 362.0, 91.6),
    "A10G": (600.0, 70.0, 31.2),
    "RTX 4090": (1008.0, 165.0, 82.6),
}


def device_peaks(name: str) -> Optional[tuple]:
    """(GB/s, bf16 TFLOP/s, fp32 TFLOP/s) for a CUDA device name, None when unknown.
    The longest matching key wins ("H100 PCIe" before "H100")."""
    hits = [k for k in DEVICE_PEAKS if k.lower() in name.lower()]
    return DEVICE_PEAKS[max(hits, key=len)] if hits else None


def token_traffic_bytes(n: int, v: int, elt: int, backward: bool) -> int:
    return n * v * elt * (3 if backward else 1)


def linear_flops(n: int, v: int, h: int, backward: bool) -> int:
    return (6 if backward else 2) * n * v * h


def linear_traffic_bytes(n: int, v: int, h: int, elt: int, backward: bool) -> int:
    w = v * h * elt
    act = n * h * elt
    return (2 * w + w + 2 * act) if backward else (w + act)


@dataclass
class Row:
    suite: str
    impl: str
    ms: float = float("nan")
    extra_bytes: int = 0
    gbps: float = float("nan")
    tflops: float = float("nan")
    note: str = ""
    bound_ms: float = float("nan")      # compiled-facts floor (docs/gpu_kernels.md)
    bound_by: str = ""


def fmt_table(rows: list, peaks: Optional[tuple]) -> str:
    bw = f"{peaks[0]:.0f} GB/s" if peaks else "?"
    fl = f"{peaks[1]:.0f} bf16 TFLOP/s" if peaks else "?"
    out = [f"| suite | impl | median ms | extra peak MiB | GB/s (% of {bw}) | "
           f"TFLOP/s (% of {fl}) | compiled bound ms | note |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def pct(x, peak):
            if math.isnan(x):
                return "-"
            return f"{x:.0f} ({100 * x / peak:.0f}%)" if peak else f"{x:.0f}"
        ms = "-" if math.isnan(r.ms) else f"{r.ms:.3f}"
        bound = "-" if math.isnan(r.bound_ms) else f"{r.bound_ms:.3f} ({r.bound_by})"
        out.append(f"| {r.suite} | {r.impl} | {ms} | {r.extra_bytes / 2**20:.0f} | "
                   f"{pct(r.gbps, peaks[0] if peaks else None)} | "
                   f"{pct(r.tflops, peaks[1] if peaks else None)} | {bound} | {r.note} |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# compiled bound (benchmarks/compiled_facts.py, docs/gpu_kernels.md)
# ---------------------------------------------------------------------------------------

def model_device(name: str, arch: int, sms: int, clock_ghz: float, peaks: Optional[tuple]):
    """The throughput model's Device for the GPU at hand (sustained HBM = 90% of the
    datasheet peak, as for the H200/A100 models); None when its peaks are unknown."""
    from sharpo_kernels.compiled.model import DEVICES, Device
    for known in DEVICES:                     # the models of benchmarks/RESULTS.md
        if known.name.split()[0].lower() in name.lower() and known.arch == arch:
            return known
    if peaks is None:
        return None
    return Device(name, arch, sms, clock_ghz, 0.9 * peaks[0], peaks[0], peaks[1], peaks[2])


def bound_for(kind: str, n: int, v: int, h: Optional[int], backward: bool,
              bounds: dict) -> tuple:
    """(ms, bound_by) of a timing suite from per-label compiled bounds at N=8192 (scaled
    linearly in n); (nan, "") when no compiled variant has that shape. kind: token/linear.
    fwd+bwd is the forward's bound plus the backward's."""
    from sharpo_kernels.compiled.variants import N_TOKENS
    if kind == "token":
        keys = [f"token_fwd bfloat16 N={N_TOKENS} V={v} entropy=0"]
        if backward:
            keys.append(f"token_bwd bfloat16 N={N_TOKENS} V={v} entropy=0")
    else:
        keys = [f"linear_fwd bfloat16 N={N_TOKENS} V={v} H={h} bias=0 entropy=0"]
        if backward:
            keys.append(f"linear_bwd bfloat16 N={N_TOKENS} V={v} H={h} bias=0 entropy=0 "
                        f"h=1 w=1 b=0")
    if not all(k in bounds for k in keys):
        return float("nan"), ""
    total = sum(bounds[k].bound_s for k in keys) * n / N_TOKENS
    by = "+".join(bounds[k].bound_by for k in keys)
    return total * 1e3, by


def bounded_label(label: str) -> bool:
    """The compiled variants whose bounds the timing rows use: bf16, no entropy, no bias,
    and for the linear backward the (grad h, grad W) variant. Token labels carry no bias.
    Not the forward candidates ("cand=": gpu_linear_fwd.py times them; compiling them here
    would spend the step's time budget)."""
    if "bfloat16" not in label or "entropy=0" not in label or " cand=" in label:
        return False
    if label.startswith("token"):
        return True
    return "bias=0" in label and (label.startswith("linear_fwd") or " h=1 w=1 b=0" in label)


def compiled_bounds(device) -> dict:
    """{variant label: Bound} of the bf16 token and linear variants for `device`'s arch."""
    import tempfile
    from sharpo_kernels.compiled.build import compile_variants, variants_for
    from sharpo_kernels.compiled.driver import compiling_for
    from sharpo_kernels.compiled.model import bound
    with compiling_for(device.arch):
        variants = [v for v in variants_for(device.arch, (
            "sharpo_kernels.logprobs.token_triton", "sharpo_kernels.logprobs.linear_triton"))
            if bounded_label(v.label)]
    out = {}
    for c in compile_variants(variants, device.arch, tempfile.mkdtemp()):
        if c.facts is not None:
            out[c.variant.label] = bound(c, device)
    return out


# ---------------------------------------------------------------------------------------
# correctness
# ---------------------------------------------------------------------------------------

@dataclass
class Check:
    name: str
    err: float
    tol: float
    ok: bool = field(init=False)

    def __post_init__(self):
        self.ok = bool(self.err <= self.tol)


def _rel_err(got, want) -> float:
    got, want = got.double(), want.double()
    fin = want.isfinite()
    if not bool((got.isfinite() == fin).all()):
        return float("inf")
    scale = want[fin].abs().max().item() if fin.any() else 1.0
    return (got[fin] - want[fin]).abs().max().item() / max(scale, 1e-30)


def check_kernels(device, n: int = 47, v: int = 1237, h: int = 31, seed: int = 0) -> list:
    """Triton backend vs the float64 reference on odd shapes; a list of Check."""
    import torch
    from sharpo_kernels import linear_logprobs, token_logprobs
    from sharpo_kernels.logprobs.reference import (linear_logprobs_reference,
                                                   token_logprobs_reference)
    gen = torch.Generator().manual_seed(seed)
    checks = []
    for dtype, lp_tol, g_tol in ((torch.float32, 1e-5, 1e-5), (torch.bfloat16, 1e-5, 2e-2)):
        dn = str(dtype).split(".")[-1]
        labels = torch.randint(0, v, (n,), generator=gen)
        labels[::7] = -100
        g1, g2 = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
        # token_logprobs
        logits = (torch.randn(n, v, generator=gen) * 3).to(dtype)
        logits[1, :v // 4] = float("-inf")
        x = logits.to(device, copy=True).requires_grad_()
        lp, ent = token_logprobs(x, labels.to(device), temperature=0.7, return_entropy=True,
                                 backend="triton")
        (lp * g1.to(device) + ent * g2.to(device)).sum().backward()
        xr = logits.double().requires_grad_()
        rlp, rent = token_logprobs_reference(xr, labels, temperature=0.7, return_entropy=True)
        (rlp * g1.double() + rent * g2.double()).sum().backward()
        checks += [Check(f"token {dn} logp", _rel_err(lp.cpu(), rlp), lp_tol),
                   Check(f"token {dn} entropy", _rel_err(ent.cpu(), rent), lp_tol),
                   Check(f"token {dn} grad", _rel_err(x.grad.cpu(), xr.grad), g_tol)]
        # linear_logprobs
        hid = torch.randn(n, h, generator=gen).to(dtype)
        w = (torch.randn(v, h, generator=gen) * 0.5).to(dtype)
        b = torch.randn(v, generator=gen).to(dtype)
        leaves = [t.to(device, copy=True).requires_grad_() for t in (hid, w, b)]
        lp, ent = linear_logprobs(leaves[0], leaves[1], labels.to(device), bias=leaves[2],
                                  temperature=1.3, return_entropy=True, backend="triton")
        (lp * g1.to(device) + ent * g2.to(device)).sum().backward()
        refs = [t.double().requires_grad_() for t in (hid, w, b)]
        rlp, rent = linear_logprobs_reference(refs[0], refs[1], labels, bias=refs[2],
                                              temperature=1.3, return_entropy=True)
        (rlp * g1.double() + rent * g2.double()).sum().backward()
        checks += [Check(f"linear {dn} logp", _rel_err(lp.cpu(), rlp), lp_tol),
                   Check(f"linear {dn} entropy", _rel_err(ent.cpu(), rent), lp_tol)]
        for nm, leaf, ref in zip(("hidden", "weight", "bias"), leaves, refs):
            checks.append(Check(f"linear {dn} grad {nm}", _rel_err(leaf.grad.cpu(), ref.grad),
                                g_tol))
    return checks


# ---------------------------------------------------------------------------------------
# competitors (each: None when not installed)
# ---------------------------------------------------------------------------------------

def _token_impls():
    import torch
    from sharpo_kernels import token_logprobs
    impls = {
        "sharpo triton": lambda x, y: token_logprobs(x, y, backend="triton"),
        "naive torch": lambda x, y: torch.log_softmax(x.float(), -1).gather(
            1, y[:, None]).squeeze(1),
    }
    try:
        from flash_attn.ops.triton.cross_entropy import cross_entropy_loss
        impls["flash-attn cross_entropy"] = lambda x, y: -cross_entropy_loss(x, y)[0]
    except Exception:  # not installed / not importable
        pass
    try:
        from liger_kernel.transformers.functional import liger_cross_entropy
        impls["liger cross_entropy"] = lambda x, y: -liger_cross_entropy(x, y,
                                                                         reduction="none")
    except Exception:
        pass
    return impls


def _linear_impls():
    import torch
    import torch.nn.functional as F
    from sharpo_kernels import linear_logprobs
    impls = {
        "sharpo triton": lambda h, w, y: linear_logprobs(h, w, y, backend="triton"),
        "naive torch": lambda h, w, y: torch.log_softmax((h @ w.t()).float(), -1).gather(
            1, y[:, None]).squeeze(1),
    }
    if hasattr(F, "linear_cross_entropy"):
        impls["torch linear_cross_entropy"] = lambda h, w, y: -F.linear_cross_entropy(
            h, w, y, reduction="none")
        if hasattr(torch.nn, "LinearCrossEntropyOptions"):
            impls["torch linear_cross_entropy chunked"] = lambda h, w, y: \
                -F.linear_cross_entropy(h, w, y, reduction="none",
                                        options=torch.nn.LinearCrossEntropyOptions())
    try:
        from cut_cross_entropy import linear_cross_entropy as cce
        impls["cut cross-entropy"] = lambda h, w, y: -cce(h, w, y, reduction="none")
    except Exception:
        pass
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
        impls["liger fused linear CE"] = lambda h, w, y: -liger_fused_linear_cross_entropy(
            h, w, y, reduction="sum")            # a scalar: Liger's backward wants one
    except Exception:
        pass
    return impls


def _bench(fn, grad_to_none) -> float:
    from triton.testing import do_bench
    return do_bench(fn, warmup=10, rep=50, grad_to_none=grad_to_none, return_mode="median")


def _peak_extra(fn) -> int:
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def run_timings(shapes_token, shapes_linear, peaks, bounds=None) -> list:
    import torch
    bounds = bounds or {}
    dev = torch.device("cuda")
    rows = []
    for (n, v) in shapes_token:
        gen = torch.Generator(device=dev).manual_seed(0)
        x = torch.randn(n, v, device=dev, generator=gen, dtype=torch.bfloat16)
        y = torch.randint(0, v, (n,), device=dev, generator=gen)
        for backward in (False, True):
            suite = f"token N={n} V={v} bf16 {'fwd+bwd' if backward else 'fwd'}"
            for name, impl in _token_impls().items():
                row = Row(suite, name)
                try:
                    if backward:
                        xx = x.detach().requires_grad_()

                        def fn(impl=impl, xx=xx):
                            impl(xx, y).sum().backward()
                        row.ms = _bench(fn, [xx])
                    else:
                        def fn(impl=impl):
                            with torch.no_grad():
                                impl(x, y)
                        row.ms = _bench(fn, None)
                    row.extra_bytes = _peak_extra(fn)
                    row.gbps = token_traffic_bytes(n, v, 2, backward) / row.ms / 1e6
                    if name == "sharpo triton":
                        row.bound_ms, row.bound_by = bound_for("token", n, v, None, backward,
                                                               bounds)
                except Exception as exc:  # a competitor that fails is reported, not fatal
                    row.note = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
                rows.append(row)
                print(f"timed {suite} {name}: {row.ms} ms {row.note or ''}", flush=True)
                torch.cuda.empty_cache()
    for (n, h, v) in shapes_linear:
        gen = torch.Generator(device=dev).manual_seed(1)
        hid = torch.randn(n, h, device=dev, generator=gen, dtype=torch.bfloat16)
        w = (torch.randn(v, h, device=dev, generator=gen) * 0.03).to(torch.bfloat16)
        y = torch.randint(0, v, (n,), device=dev, generator=gen)
        for backward in (False, True):
            suite = f"linear N={n} H={h} V={v} bf16 {'fwd+bwd' if backward else 'fwd'}"
            for name, impl in _linear_impls().items():
                row = Row(suite, name)
                try:
                    if backward:
                        hh, ww = hid.detach().requires_grad_(), w.detach().requires_grad_()

                        def fn(impl=impl, hh=hh, ww=ww):
                            impl(hh, ww, y).sum().backward()
                        row.ms = _bench(fn, [hh, ww])
                    else:
                        def fn(impl=impl):
                            with torch.no_grad():
                                impl(hid, w, y)
                        row.ms = _bench(fn, None)
                    row.extra_bytes = _peak_extra(fn)
                    row.gbps = linear_traffic_bytes(n, v, h, 2, backward) / row.ms / 1e6
                    row.tflops = linear_flops(n, v, h, backward) / row.ms / 1e9
                    if name == "sharpo triton":
                        row.bound_ms, row.bound_by = bound_for("linear", n, v, h, backward,
                                                               bounds)
                except Exception as exc:
                    row.note = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
                rows.append(row)
                print(f"timed {suite} {name}: {row.ms} ms {row.note or ''}", flush=True)
                torch.cuda.empty_cache()
    return rows


def check_at_scale(n=2048, h=896, v=151936) -> list:
    """bf16 Qwen head: Triton vs the fp32 torch computation on the same bf16 inputs."""
    import torch
    from sharpo_kernels import linear_logprobs, token_logprobs
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(2)
    hid = torch.randn(n, h, device=dev, generator=gen, dtype=torch.bfloat16)
    w = (torch.randn(v, h, device=dev, generator=gen) * 0.03).to(torch.bfloat16)
    y = torch.randint(0, v, (n,), device=dev, generator=gen)
    logits = hid.float() @ w.float().t()
    want = torch.log_softmax(logits, -1).gather(1, y[:, None]).squeeze(1)
    got_lin = linear_logprobs(hid, w, y, backend="triton")
    got_tok = token_logprobs(logits, y, backend="triton")
    return [Check("scale linear bf16 logp vs fp32 torch", _rel_err(got_lin, want), 1e-4),
            Check("scale token fp32 logp vs fp32 torch", _rel_err(got_tok, want), 1e-5)]


def rl_shapes(quick: bool) -> list:
    """(N, H, V) of the RL rows (benchmarks/gpu_rl.py): the issue-45 target shape first,
    then the Qwen2.5-0.5B head; --quick: the Qwen head alone."""
    qwen = (2048, 896, 151936)
    return [qwen] if quick else [(8192, 4096, 151936), qwen]


def main(argv=None) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _inputs import Parser, gpu_report_args
    ap = Parser(prog="gpu.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the markdown report here")
    ap.add_argument("--quick", action="store_true", help="one shape per suite")
    ap.add_argument("--budget-s", type=float, default=240.0,
                    help="seconds from the start after which no RL row starts (the rows left "
                         "say 'skipped: time budget'); gpu_session.sh must stay under 5 min")
    ap.add_argument("--no-rl", action="store_true", help="leave out the RL rows (gpu_rl.py)")
    args = ap.parse_args(argv)
    err = gpu_report_args(args.budget_s, args.out)    # before any work
    if err:
        print(f"error: gpu.py: {err}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("gpu.py: torch is not installed; nothing to run")
        return 0
    if not torch.cuda.is_available():
        print("gpu.py: no CUDA device on this machine (torch.cuda.is_available() is False); "
              "nothing to run")
        return 0
    name = torch.cuda.get_device_name(0)
    peaks = device_peaks(name)
    t0 = time.time()
    checks = check_kernels(torch.device("cuda")) + check_at_scale()
    for c in checks:
        print(f"check {'ok  ' if c.ok else 'FAIL'} {c.name}: rel err {c.err:.2e} "
              f"(tol {c.tol:.0e})", flush=True)
    shapes_token = [(2048, 151936)] + ([] if args.quick else [(8192, 151936)])
    shapes_linear = [(2048, 896, 151936)] + ([] if args.quick else [(8192, 4096, 151936)])
    props = torch.cuda.get_device_properties(0)
    dev_model = model_device(name, props.major * 10 + props.minor,
                             props.multi_processor_count,
                             getattr(props, "clock_rate", 1_500_000) / 1e6, peaks)  # kHz
    bounds = {}
    if dev_model is not None:
        try:
            bounds = compiled_bounds(dev_model)
        except Exception as exc:   # the timings are still worth having
            print(f"compiled bounds unavailable: {type(exc).__name__}: {exc}")
    rows = run_timings(shapes_token, shapes_linear, peaks, bounds)
    rl_notes = []
    if not args.no_rl:
        from gpu_rl import run_rl_timings
        rl_rows, rl_notes = run_rl_timings(rl_shapes(args.quick), t0 + args.budget_s, _bench,
                                           _peak_extra, Row)
        rows += rl_rows
    import triton
    head = (f"device: {name}; torch {torch.__version__}, triton {triton.__version__}; "
            f"{platform.node()}; {time.time() - t0:.0f} s\n"
            f"peaks used: {peaks if peaks else 'unknown device'} (GB/s, bf16 TFLOP/s, "
            f"fp32 TFLOP/s)\n")
    check_md = "\n".join(f"- {'ok' if c.ok else 'FAIL'} {c.name}: {c.err:.2e} (tol {c.tol:.0e})"
                         for c in checks)
    report = head + "\nChecks:\n" + check_md + "\n\n" + fmt_table(rows, peaks) + "\n"
    if rl_notes:
        report += "\n" + "\n".join(f"- {line}" for line in rl_notes) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
