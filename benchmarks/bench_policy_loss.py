"""CPU benchmark of the fused policy loss (`linear_policy_loss`, sharpo_kernels/policy_loss)
against the unfused path the trainer takes without `loss.fused`: `linear_logprobs` (cpu
backend, entropy returned for the log), then sharpo_train's PPO-clip loss, aggregated with
token-mean weights, and its backward (issue 45's CPU target: fused <= 0.8x unfused).

Shape: the Qwen2.5-0.5B head, N = 2048 tokens, H = 896, V = 151936, fp32 (SHARPO_BENCH_SHAPE
= "N,H,V" changes it). Three paired comparisons, each alternating unfused and fused in one
process (SHARPO_BENCH_PAIRS pairs, default 3, the order swapped every pair) and reporting the
median of the per-pair time ratios (SHARPO_BENCH_SEED, default 0, seeds the inputs):

    trainer default   trainable head, entropy logged (coefficient 0), no KL
    entropy + KL      trainable head, entropy_coef 0.01, KL to a reference (kl_coef 0.1)
    frozen head       the lm_head without a gradient (LoRA): fused forms grad_hidden only

Each comparison first checks that both sides give the same loss and gradients. With
--benchmark, the peak RSS above the inputs of each side is measured once more in a fresh
process (benchmarks/_memory.py).

    .venv/bin/python -m pytest --benchmark benchmarks/bench_policy_loss.py -s

(without --benchmark: every case once, untimed; SHARPO_BENCH_SHAPE=64,32,1000 for a quick
check of the harness). The numbers measured for the project: benchmarks/results/policy_loss.md.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _inputs import InputError, env_ints  # noqa: E402
from _memory import fmt_bytes, peak_rss_subprocess  # noqa: E402

try:
    N, H, V = env_ints("SHARPO_BENCH_SHAPE", "2048,896,151936", 3)
    (PAIRS,) = env_ints("SHARPO_BENCH_PAIRS", "3", 1)
    SEED = os.environ.get("SHARPO_BENCH_SEED", "0")
    if not (SEED.isascii() and SEED.isdigit()):
        raise InputError(f"SHARPO_BENCH_SEED: expected a non-negative integer, got {SEED!r}")
    SEED = int(SEED)
    _BAD = None
except InputError as exc:
    _BAD = str(exc)
if _BAD:
    pytest.exit(f"error: bench_policy_loss.py: {_BAD}", returncode=2)

CASES = {
    "trainer default": dict(entropy_coef=0.0, kl=False, frozen=False),
    "entropy + KL": dict(entropy_coef=0.01, kl=True, frozen=False),
    "frozen head": dict(entropy_coef=0.0, kl=False, frozen=True),
}
LINES: list = []


def make(n=N, h=H, v=V, case="trainer default", side="fused", seed=None, warm=True) -> dict:
    """Inputs of one side of one case: hidden, weight (logits of std ~0.9), labels, and the
    loss inputs: advantages, old and reference log-probs near the current ones, weights."""
    from sharpo_kernels import linear_logprobs
    seed = SEED if seed is None else seed
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, h, generator=gen)
    weight = torch.randn(v, h, generator=gen) * 0.03
    labels = torch.randint(0, v, (n,), generator=gen)
    with torch.no_grad():
        lp = linear_logprobs(hidden, weight, labels, backend="cpu")
    inp = dict(hidden=hidden, weight=weight, labels=labels, side=side, **CASES[case],
               adv=torch.randn(n, generator=gen),
               old=lp + 0.2 * torch.randn(n, generator=gen),
               ref=lp + 0.3 * torch.randn(n, generator=gen),
               weights=torch.full((n,), 1.0 / n))
    if warm:  # thread pools, MKL, lazy imports: a tiny problem of the same path
        run(make(64, h, 1000, case, side, seed, warm=False))
    return inp


def run(inp) -> int:
    """One forward + backward of the side's loss; returns the bytes of its gradients."""
    from sharpo_kernels import linear_logprobs, linear_policy_loss
    from sharpo_train.step.losses import aggregate, kl_low_var, ppo_clip_loss
    h = inp["hidden"].detach().requires_grad_()
    w = inp["weight"].detach().requires_grad_(not inp["frozen"])
    ref = inp["ref"] if inp["kl"] else None
    if inp["side"] == "fused":
        out = linear_policy_loss(h, w, inp["labels"], inp["adv"], inp["old"],
                                 weights=inp["weights"], clip_low=0.2, clip_high=0.28,
                                 ref_logp=ref, kl_coef=0.1 if ref is not None else 0.0,
                                 entropy_coef=inp["entropy_coef"], return_entropy=True,
                                 backend="cpu")
        loss = out.loss
    else:
        lp, ent = linear_logprobs(h, w, inp["labels"], return_entropy=True, backend="cpu",
                                  entropy_grad=bool(inp["entropy_coef"]))   # as the trainer
        pg, _ = ppo_clip_loss(lp, inp["old"], inp["adv"], 0.2, 0.28)
        loss = aggregate(pg, inp["weights"])
        if ref is not None:
            loss = loss + 0.1 * aggregate(kl_low_var(lp, ref), inp["weights"])
        if inp["entropy_coef"]:
            loss = loss - inp["entropy_coef"] * aggregate(ent, inp["weights"])
    loss.backward()
    inp["out"] = (loss.detach(), h.grad, w.grad)
    return sum(t.numel() * t.element_size() for t in (h.grad, w.grad) if t is not None)


@pytest.mark.parametrize("case", list(CASES))
def test_policy_loss_fused_vs_unfused_paired(benchmark, case):
    sides = {s: make(case=case, side=s) for s in ("unfused", "fused")}
    times = {"unfused": [], "fused": []}
    order = [0]

    def pair():
        seq = ("unfused", "fused") if order[0] % 2 == 0 else ("fused", "unfused")
        order[0] += 1
        for s in seq:
            t0 = time.perf_counter()
            run(sides[s])
            times[s].append(time.perf_counter() - t0)

    benchmark.group = f"policy loss N={N} H={H} V={V} fp32, {case}, paired"
    benchmark.pedantic(pair, rounds=PAIRS, iterations=1, warmup_rounds=0)
    a, b = sides["unfused"]["out"], sides["fused"]["out"]
    torch.testing.assert_close(b[0], a[0], rtol=1e-5, atol=1e-7)
    for ga, gb in zip(a[1:], b[1:]):
        assert (ga is None) == (gb is None)
        if ga is not None:
            torch.testing.assert_close(gb, ga, rtol=1e-3, atol=1e-4 * ga.abs().max().item())
    ratios = [f / u for u, f in zip(times["unfused"], times["fused"])]
    line = (f"| {case} | {min(times['unfused']):.2f} | {min(times['fused']):.2f} | "
            f"{statistics.median(ratios):.3f} | " + ", ".join(f"{r:.3f}" for r in ratios))
    if not getattr(benchmark, "disabled", False):
        mem = {s: peak_rss_subprocess(__file__, "make", "run", {"case": case, "side": s})
               for s in sides}
        line += (f" | {fmt_bytes(mem['unfused'].working_bytes)} | "
                 f"{fmt_bytes(mem['fused'].working_bytes)}")
    else:
        line += " | - | -"
    line += " |"
    benchmark.extra_info.update(unfused_s=times["unfused"], fused_s=times["fused"],
                                ratios=ratios)
    LINES.append(line)
    print("\n" + line, flush=True)


def test_zz_summary():
    print(f"\npolicy loss, N={N} H={H} V={V} fp32, {torch.get_num_threads()} threads, "
          f"{PAIRS} pairs, seed {SEED}\n| case | unfused s (min) | fused s (min) | fused / unfused "
          f"(median of pairs) | per pair | working memory unfused | fused |\n"
          f"|---|---|---|---|---|---|---|\n" + "\n".join(LINES))
