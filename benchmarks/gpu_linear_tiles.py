"""Tile sweep of the Triton linear_logprobs kernels on a GPU (one call, about 2 minutes).

    python benchmarks/gpu_linear_tiles.py [--out benchmarks/results/linear_tiles_gpu.md]

For each candidate (BLOCK_N, BLOCK_V, BLOCK_H, num_warps, num_stages) of
`LinearTritonConfig`, bf16: the log-probs against the fp32 torch computation at the Qwen2.5
head (N=2048, H=896, V=151936), then the median `triton.testing.do_bench` time of the
forward and of forward+backward (`logp.sum().backward()`, grad of hidden and weight) at
N=2048 H=896 and N=8192 H=4096, V=151936, next to naive torch, with the model TFLOP/s
(2 N V H forward, 6 N V H forward+backward). A candidate that fails to compile or run is
reported with its error. Without CUDA it says so and exits with status 0.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

# (BLOCK_N, BLOCK_V, BLOCK_H, num_warps, num_stages); None: the launcher's default
CANDIDATES = ((None, None, None, None, None), (64, 128, 64, 8, 3), (128, 128, 64, 8, 3),
              (64, 256, 64, 8, 3), (128, 256, 64, 8, 3), (64, 256, 64, 8, 4),
              (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (64, 256, 128, 8, 3),
              (128, 128, 64, 4, 3), (64, 128, 64, 4, 3))
SHAPES = ((2048, 896, 151936), (8192, 4096, 151936))


def config_of(c):
    from sharpo_kernels.logprobs.linear_triton import LinearTritonConfig
    bn, bv, bh, warps, stages = c
    return LinearTritonConfig(block_n=bn, block_v=bv, block_h=bh, num_warps=warps,
                              num_stages=stages)


def label(c) -> str:
    return "launcher default" if c[0] is None else "x".join(map(str, c[:3])) + f" w{c[3]} s{c[4]}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_linear_tiles.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the markdown report here")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_linear_tiles.py: no CUDA device on this machine; nothing to run")
        return 0
    from triton.testing import do_bench
    from sharpo_kernels.logprobs.linear_triton import linear_logprobs_triton
    dev = torch.device("cuda")
    t0 = time.time()
    data = {}
    for n, h, v in SHAPES:
        g = torch.Generator(device=dev).manual_seed(1)
        hid = torch.randn(n, h, device=dev, generator=g, dtype=torch.bfloat16)
        w = (torch.randn(v, h, device=dev, generator=g) * 0.03).to(torch.bfloat16)
        y = torch.randint(0, v, (n,), device=dev, generator=g)
        data[(n, h, v)] = (hid, w, y)
    n, h, v = SHAPES[0]
    hid, w, y = data[SHAPES[0]]
    want = torch.log_softmax(hid.float() @ w.float().t(), -1).gather(1, y[:, None]).squeeze(1)

    def naive(hh, ww, yy):
        return torch.log_softmax((hh @ ww.t()).float(), -1).gather(1, yy[:, None]).squeeze(1)

    rows = []
    for c in (("naive torch",) + CANDIDATES):
        name = c if isinstance(c, str) else label(c)
        fn = naive if isinstance(c, str) else \
            (lambda hh, ww, yy, cfg=config_of(c): linear_logprobs_triton(hh, ww, yy, config=cfg)[0])
        cells = []
        try:
            with torch.no_grad():
                got = fn(hid, w, y)
            err = float(((got - want).abs() / want.abs().clamp_min(1)).max())
            cells.append(f"{err:.1e}")
            for shape in SHAPES:
                sn, sh, sv = shape
                hh, ww, yy = data[shape]
                with torch.no_grad():
                    ms_f = do_bench(lambda: fn(hh, ww, yy), warmup=25, rep=250,
                                    return_mode="median")
                hg, wg = hh.detach().requires_grad_(), ww.detach().requires_grad_()
                ms_b = do_bench(lambda: fn(hg, wg, yy).sum().backward(), warmup=25, rep=250,
                                grad_to_none=[hg, wg], return_mode="median")
                fl = sn * sv * sh
                cells += [f"{ms_f:.2f} ({2 * fl / ms_f / 1e9:.0f})",
                          f"{ms_b:.2f} ({6 * fl / ms_b / 1e9:.0f})"]
                torch.cuda.empty_cache()
        except Exception as exc:   # a candidate that does not compile or run is reported
            cells += [f"failed: {type(exc).__name__}: {str(exc)[:90]}"]
        cells += [""] * (5 - len(cells))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    import triton
    head = (f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}, triton "
            f"{triton.__version__}; bf16; {time.time() - t0:.0f} s\n\n"
            "Median ms (model TFLOP/s). Tiles: BLOCK_N x BLOCK_V x BLOCK_H, warps, stages.\n\n"
            "| tiles | logp rel err vs fp32 (N=2048) | fwd N=2048 H=896 | fwd+bwd N=2048 H=896 "
            "| fwd N=8192 H=4096 | fwd+bwd N=8192 H=4096 |\n|---|---|---|---|---|---|\n")
    report = head + "\n".join(rows) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
