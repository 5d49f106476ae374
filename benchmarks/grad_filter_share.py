"""How much of linear_logprobs' backward the opt-in gradient filter would skip on a real
model's logits (sharpo_kernels/logprobs/grad_filter.py, docs/api.md "grad_filter"), and the
GPU gain that predicts. SmolLM2-135M-Instruct (model.path=smollm2-135m-instruct, H = 576,
V = 49152) on real English text (this project's docs/*.md), on the CPU, teacher forced.

With a per-token upstream gradient g and no entropy gradient, |dz_iv| = |g_i| p_iv / T
off the label, so an entry is negligible exactly when p_iv <= tau, whatever g is: the
share does not depend on g. A block of BLOCK_V vocabulary columns is skipped when no
label falls in it and every p_iv <= tau over its rows. Reported for the granularities:

    rows = all N       what the triton and cpu backends skip (a vocabulary tile of the
                       chunk, every scored row: the cuBLAS products take whole columns)
    rows = 128, 64     a (row tile x vocabulary tile) kernel's granularity, for comparison
                       (what a fused backward like Cut Cross-Entropy's could skip)

each in the vocabulary's own order and sorted by mean logit (Cut Cross-Entropy sorts, so
that improbable tokens share tiles). Predicted GPU time (compute-bound products, as at
N = 8192, H = 4096): the backward does the recompute in full and the two products on the
kept share k, so backward ~ (1 + 2k) / 3 and forward + backward ~ (2 + 2k) / 4 of today's.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/grad_filter_share.py [TOKENS] [--tau T]

Prints one JSON line (about 1-2 minutes for 2048 tokens on 2 cores). Numbers:
benchmarks/results/grad_filter.md.
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inputs import Parser, positive_int  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def parse(argv=None):
    ap = Parser(prog="grad_filter_share.py")
    ap.add_argument("tokens", nargs="?", type=positive_int, default=2048)
    ap.add_argument("--tau", type=float, default=2.0 ** -12)
    ap.add_argument("--temperature", type=float, default=1.0)
    args = ap.parse_args(argv)
    if not (0 < args.tau < 1):
        ap.error(f"--tau: expected a number in (0, 1), got {args.tau}")
    if not (math.isfinite(args.temperature) and args.temperature > 0):
        ap.error(f"--temperature: expected a positive number, got {args.temperature}")
    return args


def real_text(tok, n_tokens: int) -> list[list[int]]:
    """Sequences of at most 512 tokens from docs/*.md (sorted names), n_tokens in all."""
    seqs, total = [], 0
    for path in sorted((ROOT / "docs").glob("*.md")):
        ids = tok(path.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"]
        for a in range(0, len(ids) - 1, 512):
            piece = ids[a:a + 513]
            if len(piece) < 2:
                continue
            take = min(len(piece), n_tokens - total + 1)
            seqs.append(piece[:take])
            total += take - 1
            if total >= n_tokens:
                return seqs
    return seqs


def skip_shares(small, lab, block: int, rows_per_tile) -> float:
    """small [N, V] bool (p <= tau), lab [N]: the share of (row tile x block) tiles with
    every entry small and no label. rows_per_tile None: one tile of all rows."""
    import torch
    n, v = small.shape
    small = small.clone()
    small[torch.arange(n), lab] = False                  # a label's entry is never small
    nb = -(-v // block)
    pad = nb * block - v
    if pad:
        small = torch.nn.functional.pad(small, (0, pad), value=True)
    r = n if rows_per_tile is None else rows_per_tile
    nt = -(-n // r)
    if nt * r > n:
        small = torch.nn.functional.pad(small, (0, 0, 0, nt * r - n), value=True)
    tiles = small.view(nt, r, nb, block).all(3).all(1)   # [row tiles, blocks]
    return float(tiles.float().mean())


def main(argv=None) -> None:
    args = parse(argv)
    import torch

    from sharpo_train.models.policy import build_policy, split_lm

    t0 = time.perf_counter()
    torch.manual_seed(0)
    model, tok = build_policy({"path": "smollm2-135m-instruct"})
    model.eval()
    body, weight, bias = split_lm(model)
    seqs = real_text(tok, args.tokens)
    hid, labs = [], []
    with torch.no_grad():
        for s in seqs:
            ids = torch.tensor(s).unsqueeze(0)
            h = body(input_ids=ids, use_cache=False).last_hidden_state[0, :-1]
            hid.append(h.float())
            labs.append(ids[0, 1:])
    hidden, labels = torch.cat(hid), torch.cat(labs)
    n, v = hidden.shape[0], weight.shape[0]
    w = weight.detach().float()
    small = torch.empty(n, v, dtype=torch.bool)
    logit_sum = torch.zeros(v, dtype=torch.float64)
    top = []
    with torch.no_grad():
        for a in range(0, n, 256):
            z = hidden[a:a + 256] @ w.t()
            if bias is not None:
                z += bias.float()
            logit_sum += z.double().sum(0)
            p = torch.softmax(z / args.temperature, -1)
            small[a:a + 256] = p <= args.tau
            top.append(p.amax(-1))
    order = torch.argsort(logit_sum, descending=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(v)
    res = {"model": "SmolLM2-135M-Instruct", "text": "docs/*.md", "tokens": n, "vocab": v,
           "hidden": hidden.shape[1], "tau": args.tau, "temperature": args.temperature,
           "mean_max_p": float(torch.cat(top).mean()),
           "share_small_entries": float(small.float().mean())}
    for name, sm, lab in (("natural", small, labels), ("sorted", small[:, order], rank[labels])):
        for rows in (None, 128, 64):
            for block in (128, 256):
                key = f"skip_{name}_rows{'N' if rows is None else rows}_block{block}"
                res[key] = round(skip_shares(sm, lab, block, rows), 4)
    for name in ("natural", "sorted"):
        k = 1 - res[f"skip_{name}_rowsN_block128"]
        res[f"predicted_bwd_time_{name}"] = round((1 + 2 * k) / 3, 3)
        res[f"predicted_fwd_bwd_time_{name}"] = round((2 + 2 * k) / 4, 3)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
