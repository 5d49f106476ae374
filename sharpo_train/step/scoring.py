"""Log-probs of generated tokens, with shared prefixes run once (docs/method.md §3).

``tree_logprobs(model, seqs, num_scored, ...)`` takes full token sequences, each with the
number of trailing tokens to score (the generated response), and returns fp32 log-probs
of exactly those tokens under ``softmax(logits / temperature)``. The trainer's scoring
phase calls it under ``torch.no_grad()``; the update calls it with gradients
(``update.policy_logprobs`` with a shared prefix).

Sharing. The sequences go into a radix tree over token ids: a node is a run of tokens
that every sequence below it shares. A node's children run as one batch on top of the
node's KV cache (expanded to the batch, right-padded suffixes, explicit position ids), so
each shared prefix runs through the model once. In a GRPO group that means: the prompt
that all student and teacher rows of a turn share runs once; ``prompt + hint`` runs once
per distinct hint; then only the responses run, each once per sequence. A shared run
shorter than ``min_shared_tokens`` is not worth a cache copy and is pushed down into its
children. Right padding keeps the result exact for a causal model: a real token never
attends to a pad (pads come after it), so the log-probs equal those of separate full
forwards up to float rounding (tests/train/step/test_scoring.py checks fp32 to 1e-5).

On top of a cached prefix the attention mask is explicit (no causal skipping inside the
kernel), so suffixes run in windows of ``chunk_tokens`` (chunked prefill): the waste is
one window's triangle instead of the whole suffix's.

Only positions that predict a scored token are gathered (hidden states [N, H]) and turned
into log-probs by ``sharpo_kernels.linear_logprobs`` against the lm_head: the full-sequence
[T, V] logits are never formed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from ..models.device import autocast
from ..models.policy import split_lm


@dataclass
class _Node:
    start: int                       # position of tokens[0] in every sequence through it
    tokens: list[int]
    seqs: list[int]                  # sequences through this node
    children: list["_Node"] = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)


def build_tree(seqs: list[list[int]], min_shared: int) -> list[_Node]:
    """Radix forest over ``seqs``; a node holds >= min_shared shared tokens or is a leaf
    (one sequence's remaining tokens). Identical sequences share every node."""

    def lcp(group: list[int], depth: int) -> int:
        first = seqs[group[0]]
        n = min(len(seqs[j]) for j in group) - depth
        for k in range(max(n, 0)):
            t = first[depth + k]
            if any(seqs[j][depth + k] != t for j in group[1:]):
                return k
        return max(n, 0)

    def build(group: list[int], start: int, depth: int) -> list[_Node]:
        # every sequence of ``group`` shares tokens[start:depth]
        if len(set(tuple(seqs[j]) for j in group)) == 1:
            s = seqs[group[0]]
            return [_Node(start, s[start:], list(group))] if len(s) > start else []
        shared_to = depth + lcp(group, depth)
        if shared_to - start >= min_shared:
            node = _Node(start, seqs[group[0]][start:shared_to], list(group))
            node.children = split(group, shared_to, shared_to)
            return [node]
        return split(group, start, shared_to)

    def split(group: list[int], start: int, at: int) -> list[_Node]:
        by_next: dict[int, list[int]] = {}
        out: list[_Node] = []
        for j in group:
            if len(seqs[j]) > at:
                by_next.setdefault(seqs[j][at], []).append(j)
        for sub in by_next.values():
            out += build(sub, start, at + 1)
        return out

    return build(list(range(len(seqs))), 0, 0) if seqs else []


def _cache_from(kv: list[tuple[torch.Tensor, torch.Tensor]], n: int, config):
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    for layer, (k, v) in enumerate(kv):
        cache.update(k.expand(n, -1, -1, -1).contiguous(), v.expand(n, -1, -1, -1).contiguous(), layer)
    return cache


def _cache_tensors(cache, b: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys[b:b + 1, :, :length].clone(), layer.values[b:b + 1, :, :length].clone())
            for layer in cache.layers]


@dataclass
class ScoreStats:
    tokens_through_model: int = 0    # real (unpadded) tokens run through the body
    padded_tokens: int = 0           # tokens including right padding
    forward_calls: int = 0


def tree_logprobs(model, seqs: list[list[int]], num_scored: list[int], *,
                  temperature: float = 1.0, shared_prefix: bool = True,
                  min_shared_tokens: int = 16, max_batch_tokens: int = 65536,
                  chunk_tokens: int = 256, autocast_bf16: bool = True,
                  stats: Optional[ScoreStats] = None, return_entropy: bool = False,
                  entropy_grad: bool = True):
    """Log-probs [num_scored[j]] (fp32, on the model's device) of the last num_scored[j]
    tokens of each seqs[j] (each sequence needs >= 1 token before them), shared prefixes
    run once. Differentiable when
    called with grad enabled (the update pass): a shared prefix's KV cache is part of the
    graph, so its gradient collects every suffix's contribution, exactly as separate
    forwards would. ``return_entropy``: also the entropies, as a second list;
    ``entropy_grad=False``: without their gradient (a metric), which lets a frozen lm_head
    (LoRA) take linear_logprobs' two-matmul path (docs/api.md, "Frozen head")."""
    from sharpo_kernels import linear_logprobs

    if len(seqs) != len(num_scored):
        raise ValueError("num_scored: one count per sequence expected")
    for j, (s, n) in enumerate(zip(seqs, num_scored)):
        if not 0 <= n <= len(s) - 1:
            raise ValueError(f"num_scored[{j}]={n}: must be in [0, len(seq)-1] (len {len(s)})")
    stats = stats if stats is not None else ScoreStats()
    body, weight, bias = split_lm(model)
    device = weight.device
    forest = build_tree(seqs, min_shared_tokens if shared_prefix else 10 ** 9)
    # needed[j] = positions p whose hidden state predicts a scored token p+1
    need_lo = [len(s) - n - 1 for s, n in zip(seqs, num_scored)]
    gathered: list[list[tuple[int, torch.Tensor]]] = [[] for _ in seqs]

    def run(nodes: list[_Node], past: Optional[list], past_len: int) -> None:
        # nodes: siblings sharing the same past (the parent path's KV cache)
        order = sorted(nodes, key=lambda nd: len(nd.tokens))
        chunk: list[_Node] = []
        for node in order:
            width = max([len(c.tokens) for c in chunk + [node]])
            if chunk and (len(chunk) + 1) * (width + past_len) > max_batch_tokens:
                run_chunk(chunk, past, past_len)
                chunk = []
            chunk.append(node)
        if chunk:
            run_chunk(chunk, past, past_len)

    def run_chunk(chunk: list[_Node], past, past_len: int) -> None:
        n, width = len(chunk), max(len(c.tokens) for c in chunk)
        ids = torch.full((n, width), 0, dtype=torch.long)
        for b, node in enumerate(chunk):
            ids[b, :len(node.tokens)] = torch.tensor(node.tokens)
        ids = ids.to(device)
        pos = (past_len + torch.arange(width, device=device)).unsqueeze(0).expand(n, -1)
        keep = any(c.children for c in chunk)
        cache = _cache_from(past, n, model.config) if past is not None else (
            _new_cache(model.config) if keep else None)
        # On top of a cache the causal mask is explicit and attention computes every
        # (query, key) pair: run the suffix in windows of chunk_tokens so only each
        # window's own triangle is wasted (chunked prefill). Without a past, one pass.
        step = chunk_tokens if past is not None else width
        pieces = []
        for a in range(0, width, step):
            b = min(width, a + step)
            with autocast(device, autocast_bf16):
                out = body(input_ids=ids[:, a:b], position_ids=pos[:, a:b],
                           use_cache=keep or past is not None, **{_cache_kwarg(body): cache})
            pieces.append(out.last_hidden_state)
            cache = out.get("cache", out.get("past_key_values"))
            stats.forward_calls += 1
        hidden = pieces[0] if len(pieces) == 1 else torch.cat(pieces, 1)
        del pieces
        stats.padded_tokens += n * width
        stats.tokens_through_model += sum(len(c.tokens) for c in chunk)
        for b, node in enumerate(chunk):
            for j in node.seqs:
                lo, hi = max(need_lo[j], node.start), min(len(seqs[j]) - 1, node.end)
                if lo < hi:
                    gathered[j].append((lo, hidden[b, lo - node.start:hi - node.start]))
        children = [(b, node) for b, node in enumerate(chunk) if node.children]
        kvs = [(_cache_tensors(cache, b, node.end), node) for b, node in children]
        del out, hidden, cache
        for kv, node in kvs:
            run(node.children, kv, node.end)

    run(forest, None, 0)

    hid, labels, sizes = [], [], []
    for j, parts in enumerate(gathered):
        parts.sort(key=lambda x: x[0])
        h = torch.cat([p for _, p in parts]) if parts else weight.new_zeros(0, weight.shape[1])
        if h.shape[0] != num_scored[j]:
            raise RuntimeError(f"scoring: sequence {j} gathered {h.shape[0]} positions, "
                               f"expected {num_scored[j]}")
        hid.append(h)
        labels.append(torch.tensor(seqs[j][len(seqs[j]) - num_scored[j]:], dtype=torch.long))
        sizes.append(num_scored[j])
    if not sum(sizes):
        empty = [torch.zeros(0, device=device) for _ in seqs]
        return (empty, list(empty)) if return_entropy else empty
    H = torch.cat(hid).to(weight.dtype)      # autocast may have left it in bf16
    # check_finite=False: a diverged policy's NaN reaches the loss, and the trainer stops the
    # run with NonFiniteTrainingError (one line, last good checkpoint kept)
    out = linear_logprobs(H, weight, torch.cat(labels).to(device), bias=bias,
                          temperature=temperature, return_entropy=return_entropy,
                          check_finite=False, entropy_grad=entropy_grad)
    if return_entropy:
        return list(out[0].float().split(sizes)), list(out[1].float().split(sizes))
    return list(out.float().split(sizes))


def _cache_kwarg(body) -> str:
    """transformers 5 names the cache argument ``cache``; 4.x ``past_key_values``."""
    import inspect
    return "cache" if "cache" in inspect.signature(body.forward).parameters else "past_key_values"


def _new_cache(config):
    from transformers import DynamicCache
    return DynamicCache(config=config)
