"""Opt-in gradient filtering of `linear_logprobs`' backward (docs/api.md, "grad_filter"):
blocks of vocabulary columns whose every dL/dz entry is negligible skip the two products
they feed (grad_hidden += dz @ W, grad_W = dz^T @ hidden). Off by default (exact).

The criterion, per scored row i (upstream gradients g_i of the log-prob, e_i of the
entropy; T the temperature; tau = grad_filter):

    entry (i, v) is negligible      |dz_iv| <= tau (|g_i| + |e_i|) / T
    a block is skipped              every entry of its `block` columns, over every scored
                                    row (of the row tile on the cpu backend), is negligible

Without the entropy, |dz_iv| = |g_i| p_iv / T off the label, so the test is p_iv <= tau:
with tau = 2**-12 (Cut Cross-Entropy's bf16 threshold), the block's tokens are each below
1/4096 probability for every row. Error bound (S_i = the skipped columns, for row i all
of them negligible):

    |grad_h_i - exact| <= sum_{v in S} |dz_iv| |W_v|
                       <= tau (|g_i| + |e_i|) / T * |S| * max_v |W_v|
    |grad_W_v - exact| <= sum_i |dz_iv| |h_i|
                       <= tau sum_i (|g_i| + |e_i|) |h_i| / T      (v skipped; others exact)

and, without the entropy, the first is |g_i| / T * P_i * max_v ||W_v|| with P_i the
probability mass row i has in skipped blocks (a posteriori: usually far below tau |S|).
grad_bias is not filtered (a column sum, no product to save). The log-probs and the
entropy are untouched: the filter acts in the backward only, of the general path (the
frozen-head path forms its gradient in the forward, before g is known).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

__all__ = ["FILTER_BLOCK", "check_grad_filter", "row_thresholds", "kept_columns",
           "block_columns"]

FILTER_BLOCK = 128      # the cpu backend's block of vocabulary columns (a GPU tile's width)


def check_grad_filter(grad_filter) -> float:
    """grad_filter as a float in [0, 1): 0 is off. ValueError/TypeError naming it."""
    if isinstance(grad_filter, bool) or not isinstance(grad_filter, (int, float)):
        raise TypeError(f"grad_filter: expected a float, got {type(grad_filter).__name__}")
    tau = float(grad_filter)
    if not (math.isfinite(tau) and 0.0 <= tau < 1.0):
        raise ValueError(f"grad_filter: expected a number in [0, 1) (0: off), got {grad_filter!r}")
    return tau


def row_thresholds(tau: float, g_lp: torch.Tensor, g_ent: Optional[torch.Tensor],
                   temperature: float) -> torch.Tensor:
    """tau (|g_i| + |e_i|) / T per row [R], in g_lp's dtype."""
    mag = g_lp.abs() if g_ent is None else g_lp.abs() + g_ent.abs()
    return mag * (tau / temperature)


def block_columns(kept: torch.Tensor, block: int, width: int) -> Optional[torch.Tensor]:
    """kept [blocks] bool -> the kept columns (int64, < width), or None when every block
    is kept (the caller takes its unfiltered path)."""
    if bool(kept.all()):
        return None
    cols = (kept.nonzero().squeeze(1).unsqueeze(1) * block
            + torch.arange(block, device=kept.device)).reshape(-1)
    return cols[cols < width]


def kept_columns(dz: torch.Tensor, thr: torch.Tensor, block: int = FILTER_BLOCK):
    """dz [R, C], thr [R] -> the columns of the blocks with any |dz| > thr (None: all)."""
    r, c = dz.shape
    big = dz.abs() > thr.unsqueeze(1)
    nb = -(-c // block)
    pad = nb * block - c
    if pad:
        big = torch.nn.functional.pad(big, (0, pad))
    return block_columns(big.view(r, nb, block).any(2).any(0), block, c)
