"""Time of every registered credit estimator on a synthetic scored batch (CPU, one
thread): is a token-level kernel worth it? (docs/estimators.md, cost).

    python benchmarks/bench_estimators.py [--tasks 4 --group 6 --turns 8 --tokens 64]

Defaults: the `sharpo demo` step (4 tasks x 6 rollouts x up to 8 turns, 64 new tokens).
"""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import torch

from sharpo_train.step.batch import StepBatch
from sharpo_train.envs.base import Task
from sharpo_train.estimators import ESTIMATORS, EstimatorConfig
from sharpo_train.step.rollout import Episode, Turn
from sharpo_train.step.segments import Span

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inputs import Parser, positive_int  # noqa: E402

MAX_CELLS = 1 << 28          # rows x width of the synthetic batch: ~1 GiB per fp32 tensor


def synthetic_batch(tasks: int, group: int, turns: int, tokens: int, seed: int = 0) -> StepBatch:
    rng = random.Random(seed)
    eps = []
    for g in range(tasks):
        for i in range(group):
            n = rng.randint(1, turns)
            ts = []
            for t in range(n):
                L = rng.randint(tokens // 2, tokens)
                cut = L // 2
                ts.append(Turn("u", [1] * 8, list(range(L)), "", "a", f"obs {rng.randrange(6)}",
                               spans=[Span("think", 0, cut), Span("action", cut, L - 1)]))
            eps.append(Episode(Task(f"t{g}", "Pick"), g, i, ts, reward=float(rng.random() < 0.5)))
    b = StepBatch.from_episodes(eps)
    gen = torch.Generator().manual_seed(seed)
    b.old_logp = -torch.rand(len(b), b.width, generator=gen) * 3 * b.response_mask
    b.teacher_logp = b.old_logp + torch.randn(len(b), b.width, generator=gen) * b.response_mask
    b.has_teacher = torch.rand(len(b), generator=gen) < 0.6
    b.old_entropy = torch.rand(len(b), b.width, generator=gen) * 2 * b.response_mask
    b.step = 1
    return b


def parse(argv=None):
    """Every size a positive integer (a one-line error otherwise, benchmarks/_inputs.py)."""
    ap = Parser(prog="bench_estimators.py")
    for name, default in (("--tasks", 4), ("--group", 6), ("--turns", 8), ("--tokens", 64),
                          ("--repeat", 5)):
        ap.add_argument(name, type=positive_int, default=default)
    a = ap.parse_args(argv)
    cells = a.tasks * a.group * a.turns * a.tokens       # the batch's [rows, width] at most
    if cells > MAX_CELLS:
        ap.error(f"--tasks x --group x --turns x --tokens = {cells:,} token cells; at most "
                 f"{MAX_CELLS:,} (a synthetic batch of that size does not fit in memory)")
    return a


def main(argv=None) -> None:
    a = parse(argv)
    torch.set_num_threads(1)
    b = synthetic_batch(a.tasks, a.group, a.turns, a.tokens)
    cfg = EstimatorConfig(backend="torch")
    print(f"batch: {len(b)} rows x {b.width} tokens ({int(b.response_mask.sum())} generated)")
    print("| method | ms per call (median of %d) |" % a.repeat)
    print("|---|---:|")
    for name in sorted(ESTIMATORS):
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            ESTIMATORS[name].fn(b, cfg.params(name))
            times.append(time.perf_counter() - t0)
        times.sort()
        print(f"| {name} | {1000 * times[len(times) // 2]:.1f} |")


if __name__ == "__main__":
    main()
