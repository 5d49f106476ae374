"""Ablation of `ChunkOptions.stash_logits` for the CPU `linear_logprobs`, fwd+bwd.

Qwen2.5-0.5B head (N=2048, H=896, V=151936, fp32). The naive path, the cpu backend with
the logits stash (default) and without it run in one process, their order rotated every
round; each round's time is divided by the same round's naive time and the medians of
those ratios are printed (results: benchmarks/results/logprobs.md).

    PYTHONPATH=. .venv/bin/python benchmarks/stash_ablation.py [--rounds 4]
"""
import argparse
import statistics
import time

import torch

from sharpo_kernels.logprobs.cpu_tiles import ChunkOptions
from sharpo_kernels.logprobs.linear_cpu import linear_logprobs_cpu

N, H, V = 2048, 896, 151936


def main(rounds: int) -> None:
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(N, H, generator=gen).requires_grad_()
    weight = (torch.randn(V, H, generator=gen) * 0.03).requires_grad_()
    labels = torch.randint(0, V, (N,), generator=gen)
    g = torch.randn(N, generator=gen)

    def naive():
        logp = torch.log_softmax(hidden @ weight.t(), -1).gather(1, labels[:, None])
        logp.squeeze(1).backward(g)

    def chunked(options):
        return lambda: linear_logprobs_cpu(hidden, weight, labels, options=options)[0].backward(g)

    cases = {"naive": naive, "stash": chunked(ChunkOptions()),
             "no stash": chunked(ChunkOptions(stash_logits=False))}
    times = {k: [] for k in cases}
    names = list(cases)
    for r in range(rounds):
        for k in names[r % 3:] + names[:r % 3]:
            hidden.grad = weight.grad = None
            t0 = time.perf_counter()
            cases[k]()
            times[k].append(time.perf_counter() - t0)
    for k in ("stash", "no stash"):
        ratios = [a / b for a, b in zip(times[k], times["naive"])]
        print(f"{k}: median {statistics.median(ratios):.3f} x naive; per round "
              + ", ".join(f"{x:.3f}" for x in ratios))
    print("seconds:", {k: [round(x, 2) for x in v] for k, v in times.items()})


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    main(ap.parse_args().rounds)
