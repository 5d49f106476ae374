"""Benchmark: scoring one GRPO group, shared-prefix against naive separate forwards (CPU).

Shape: G = 8 rollouts of one task; prompt ~500 tokens, hint ~1000, responses
~2000. The group has 8 student rows (prompt | response) and 8 teacher rows
(prompt + hint | response) using 2 distinct hints (two successful peers). Both methods
score exactly the same 16 x 2000 response tokens with `tree_logprobs` (body forward +
`linear_logprobs`); "naive" runs every sequence separately from its first token,
"shared" runs the prompt once, each hint once, then the responses on the cached prefix.

    .venv/bin/python -m pytest benchmarks/bench_scoring.py --benchmark-only -s

The summary printed after both modes ran (time ratio, tokens through the model, the arithmetic)
goes to benchmarks/results/trainer.md.
"""
import random
import time

import pytest
import torch

from sharpo_train.models.policy import build_policy
from sharpo_train.step.scoring import ScoreStats, tree_logprobs

G, PROMPT, HINT, RESPONSE, HINTS = 8, 500, 1000, 2000, 2
MODEL = {"hidden_size": 256, "intermediate_size": 1024, "num_layers": 2, "num_heads": 4,
         "num_kv_heads": 2}
THREADS = 1          # one torch thread: stable timings on a shared 2-core machine
RESULTS = {}


@pytest.fixture(scope="module")
def group():
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    model, tok = build_policy(MODEL)
    model.eval()
    rng = random.Random(0)
    V = len(tok)
    prompt = [rng.randrange(3, V) for _ in range(PROMPT)]
    hints = [[rng.randrange(3, V) for _ in range(HINT)] for _ in range(HINTS)]
    responses = [[rng.randrange(3, V) for _ in range(RESPONSE)] for _ in range(G)]
    seqs = [prompt + r for r in responses] + [prompt + hints[i % HINTS] + r for i, r in enumerate(responses)]
    counts = [RESPONSE] * (2 * G)
    yield model, seqs, counts
    torch.set_num_threads(threads)


def run(model, seqs, counts, shared):
    stats = ScoreStats()
    with torch.no_grad():
        out = tree_logprobs(model, seqs, counts, shared_prefix=shared, stats=stats,
                            max_batch_tokens=16384)
    return out, stats


@pytest.mark.parametrize("mode", ["shared", "naive"])
def test_score_group(benchmark, group, mode):
    model, seqs, counts = group
    out, stats = benchmark.pedantic(run, args=(model, seqs, counts, mode == "shared"),
                                    rounds=3, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(tokens_through_model=stats.tokens_through_model,
                                padded_tokens=stats.padded_tokens,
                                forward_calls=stats.forward_calls)
    RESULTS[mode] = {"min_s": benchmark.stats.stats.min, "median_s": benchmark.stats.stats.median,
                     "tokens": stats.tokens_through_model, "padded": stats.padded_tokens,
                     "calls": stats.forward_calls, "out": out}
    if set(RESULTS) == {"shared", "naive"}:
        summary()


def summary():
    s, n = RESULTS["shared"], RESULTS["naive"]
    for a, b in zip(s["out"], n["out"]):           # the same numbers, whichever way
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    naive_tokens = G * (PROMPT + RESPONSE) + G * (PROMPT + HINT + RESPONSE)
    shared_tokens = PROMPT + HINTS * HINT + 2 * G * RESPONSE
    print(f"\nscoring one group: G={G}, prompt {PROMPT}, hint {HINT} ({HINTS} distinct), "
          f"response {RESPONSE}; model {MODEL}; torch threads {torch.get_num_threads()}")
    print(f"| mode | min s | median s | tokens through the model | padded tokens | forward calls |")
    print(f"|---|---|---|---|---|---|")
    for name, r in (("naive", n), ("shared", s)):
        print(f"| {name} | {r['min_s']:.3f} | {r['median_s']:.3f} | {r['tokens']} | {r['padded']} | {r['calls']} |")
    print(f"time ratio naive/shared (min): {n['min_s'] / s['min_s']:.2f}x; "
          f"tokens ratio: {n['tokens'] / s['tokens']:.3f} "
          f"(arithmetic: naive {naive_tokens} = 8x{PROMPT + RESPONSE} + 8x{PROMPT + HINT + RESPONSE}; "
          f"shared {shared_tokens} = {PROMPT} + {HINTS}x{HINT} + 16x{RESPONSE})")
    # attention (query, key) pairs: a causal pass of T tokens ~ T^2/2; a window of S tokens
    # on a cached prefix of length C ~ S*C + S^2/2
    tri = lambda t: t * t / 2
    naive_pairs = G * tri(PROMPT + RESPONSE) + G * tri(PROMPT + HINT + RESPONSE)
    shared_pairs = (tri(PROMPT) + HINTS * (HINT * PROMPT + tri(HINT))
                    + G * (RESPONSE * PROMPT + tri(RESPONSE))
                    + G * (RESPONSE * (PROMPT + HINT) + tri(RESPONSE)))
    print(f"attention pairs: naive {naive_pairs / 1e6:.1f}M, shared {shared_pairs / 1e6:.1f}M "
          f"(ratio {naive_pairs / shared_pairs:.2f}; plus up to 16x{RESPONSE}x256/2 = "
          f"{16 * RESPONSE * 128 / 1e6:.1f}M wasted by 256-token windows)")
    assert s["tokens"] == shared_tokens and n["tokens"] == naive_tokens
