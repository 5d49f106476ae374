"""The last step of both linear_logprobs backward passes (linear_cpu.py, linear_triton.py): their
accumulators -> the gradients autograd returns, in the inputs' dtypes.

    gh [N_valid, H]  rows with a label, in row order of ``rows`` (scattered back to [N, H];
                     ignored rows get zeros)
    gw [V, H], gb [V]
Each is None when that gradient was not asked for, and its result is then None too.
"""
from __future__ import annotations

from typing import Optional

import torch


def linear_grads(hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                 rows: torch.Tensor, gh: Optional[torch.Tensor], gw: Optional[torch.Tensor],
                 gb: Optional[torch.Tensor]):
    """-> (grad_hidden [N, H], grad_weight [V, H], grad_bias [V]), None where not needed."""
    grad_hidden = None
    if gh is not None:
        grad_hidden = torch.zeros(hidden.shape, dtype=hidden.dtype, device=hidden.device)
        grad_hidden.index_copy_(0, rows, gh.to(hidden.dtype))
    grad_weight = None if gw is None else gw.to(weight.dtype)
    grad_bias = None if gb is None else gb.to(bias.dtype)
    return grad_hidden, grad_weight, grad_bias
