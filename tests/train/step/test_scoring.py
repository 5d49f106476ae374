"""Shared-prefix scoring (sharpo_train/step/scoring.py) equals naive separate full forwards."""
import random

import pytest
import torch

from sharpo_train.models.policy import build_policy
from sharpo_train.step.rollout import chat_prompt_ids
from sharpo_train.step.scoring import ScoreStats, build_tree, tree_logprobs
from sharpo_train.step.teacher import teacher_prompt

TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    model, tok = build_policy({"hidden_size": 48, "num_layers": 2, "num_heads": 4,
                               "num_kv_heads": 2, "intermediate_size": 96})
    return model.eval(), tok


def naive_logp(model, seq, n, temperature=TEMPERATURE):
    """One separate full forward per sequence, full-vocabulary log-softmax."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq])).logits[0].float() / temperature
    logp = logits.log_softmax(-1)
    pos = torch.arange(len(seq) - n - 1, len(seq) - 1)
    return logp[pos, torch.tensor(seq[len(seq) - n:])]


def rand_tokens(rng, n, vocab):
    return [rng.randrange(3, vocab) for _ in range(n)]


def check_equal(model, seqs, counts, **kw):
    stats = ScoreStats()
    with torch.no_grad():
        got = tree_logprobs(model, seqs, counts, temperature=TEMPERATURE, stats=stats, **kw)
    for j, (s, n) in enumerate(zip(seqs, counts)):
        want = naive_logp(model, s, n)
        assert got[j].dtype == torch.float32 and got[j].shape == (n,)
        torch.testing.assert_close(got[j], want, rtol=1e-5, atol=1e-5, msg=f"sequence {j}")
    return stats


def test_group_with_two_hints_and_rollouts_without_teacher(policy):
    """A GRPO group as the trainer builds it: G=5 students on one chat-templated prompt;
    teachers = prompt + hint for rollouts 0, 1, 3 (two distinct hints, hint A shared by two
    teachers); rollouts 2 and 4 have no teacher."""
    model, tok = policy
    rng = random.Random(1)
    user = "Your task is to: put a clean mug in cabinet 1.\nCurrent observation: You see a mug 1."
    prompt = chat_prompt_ids(tok, user)
    hint_a = "A successful attempt at this task:\n1. go to countertop 1\n2. take mug 1 from countertop 1"
    hint_b = "A successful attempt at this task:\n1. go to sinkbasin 1 -> You arrive at sinkbasin 1."
    responses = [tok(f"<think>step {i} {'x ' * i}</think><action>go to cabinet {i}</action>")["input_ids"]
                 + rand_tokens(rng, rng.randint(0, 9), len(tok)) for i in range(5)]
    seqs = [prompt + r for r in responses]
    counts = [len(r) for r in responses]
    for i, hint in ((0, hint_a), (1, hint_a), (3, hint_b)):
        ids, used = teacher_prompt(tok, user, hint, 10_000)
        assert used == hint
        seqs.append(ids + responses[i])
        counts.append(len(responses[i]))
    stats = check_equal(model, seqs, counts, min_shared_tokens=4, chunk_tokens=5)
    naive_tokens = sum(len(s) for s in seqs)
    assert stats.tokens_through_model < naive_tokens - 4 * len(prompt)   # the prompt ran ~once


def test_exact_token_counts_on_a_known_tree(policy):
    """Hand-built ids: prompt P shared by all, hint H1 by two teachers, H2 by one. Shared
    scoring runs P once, each hint once, each response once per sequence."""
    model, tok = policy
    rng = random.Random(2)
    V = len(tok)
    P, H1, H2 = rand_tokens(rng, 40, V), rand_tokens(rng, 30, V), rand_tokens(rng, 25, V)
    R = [rand_tokens(rng, rng.randint(5, 15), V) for _ in range(4)]
    # make the first token of every suffix distinct so the tree is exactly P -> {...}
    heads = [3, 4, 5, 6, 7]
    R = [[heads[i]] + r for i, r in enumerate(R)]
    H1, H2 = [8] + H1, [9] + H2
    seqs = [P + r for r in R] + [P + H1 + R[0], P + H1 + R[1], P + H2 + R[2]]
    counts = [len(r) for r in R] + [len(R[0]), len(R[1]), len(R[2])]
    stats = check_equal(model, seqs, counts, min_shared_tokens=8)
    expected = len(P) + len(H1) + len(H2) + sum(len(r) for r in R) + len(R[0]) + len(R[1]) + len(R[2])
    assert stats.tokens_through_model == expected
    naive = check_equal(model, seqs, counts, shared_prefix=False)
    assert naive.tokens_through_model == sum(len(s) for s in seqs)


def test_identical_and_prefix_sequences_and_small_batches(policy):
    """Identical sequences, one sequence a prefix of another, a tiny token budget per
    forward (many chunks), and odd lengths."""
    model, tok = policy
    rng = random.Random(3)
    V = len(tok)
    P = rand_tokens(rng, 23, V)
    a = P + rand_tokens(rng, 11, V)
    b = a + rand_tokens(rng, 7, V)          # a is a prefix of b
    c = list(a)                              # identical to a
    d = P[:5] + rand_tokens(rng, 30, V)      # shares too little to be worth it
    seqs, counts = [a, b, c, d], [11, 18, 3, 1]
    check_equal(model, seqs, counts, min_shared_tokens=4, max_batch_tokens=40)
    check_equal(model, seqs, counts, min_shared_tokens=1)
    check_equal(model, seqs, counts, min_shared_tokens=2, chunk_tokens=3)   # many windows


def test_random_forests_match(policy):
    model, tok = policy
    rng = random.Random(4)
    V = len(tok)
    for trial in range(3):
        roots = [rand_tokens(rng, rng.randint(2, 30), V) for _ in range(2)]
        seqs, counts = [], []
        for _ in range(7):
            s = list(rng.choice(roots))
            if rng.random() < 0.5:
                s += rand_tokens(rng, rng.randint(1, 12), V)
            r = rand_tokens(rng, rng.randint(1, 10), V)
            seqs.append(s + r)
            counts.append(len(r))
        check_equal(model, seqs, counts, min_shared_tokens=rng.choice([1, 3, 16]))


def test_tree_covers_every_token_once_per_path():
    seqs = [[1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 2, 3, 4], [9]]
    forest = build_tree(seqs, 2)
    shared = [n for n in forest if len(n.seqs) > 1]
    assert len(shared) == 1 and shared[0].tokens == [1, 2, 3] and sorted(shared[0].seqs) == [0, 1, 2]

    def paths(nodes, prefix):
        for n in nodes:
            for j in n.seqs:
                if not n.children or n.end == len(seqs[j]):
                    yield j, prefix + n.tokens
            yield from paths(n.children, prefix + n.tokens)
    got = {}
    for j, toks in paths(forest, []):
        if toks == seqs[j]:
            got[j] = toks
    assert sorted(got) == [0, 1, 2, 3]


def test_bad_counts_raise(policy):
    model, _ = policy
    with pytest.raises(ValueError, match="num_scored"):
        tree_logprobs(model, [[1, 2, 3]], [3])
    with pytest.raises(ValueError, match="num_scored"):
        tree_logprobs(model, [[1, 2, 3]], [1, 1])
