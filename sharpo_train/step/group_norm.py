"""Group statistics (docs/method.md §1): ``grouped_normalise``, a value minus its group's mean
over the group's std: GRPO's A_i of every episode (``StepBatch.episode_advantages``, the
integrations) and GiGPO's episode and step terms. Tensors in, tensors out.
"""
from __future__ import annotations

from typing import Optional

import torch

__all__ = ["grouped_normalise"]

def grouped_normalise(values: torch.Tensor, keys: torch.Tensor, *, std: bool = True,
                      eps: float = 1e-6, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
    """[n] values, [n] int64 group keys -> [n]: value minus its group's mean, divided by
    (unbiased std + eps) when ``std``; a group of one gives 0. Computed in the values'
    dtype. ``valid`` [n] bool: only these entries form the groups; the others get 0 (so a
    group with fewer than 2 valid entries gives 0)."""
    if values.shape != keys.shape or values.dim() != 1:
        raise ValueError(f"keys: expected the shape of values {tuple(values.shape)}, got "
                         f"{tuple(keys.shape)}")
    if valid is not None:
        out = torch.zeros_like(values)
        if bool(valid.any()):
            out[valid] = grouped_normalise(values[valid], keys[valid], std=std, eps=eps)
        return out
    if values.numel() == 0:
        return values.clone()
    _, inv = torch.unique(keys, return_inverse=True)
    m = int(inv.max()) + 1
    n = torch.zeros(m, dtype=values.dtype).index_add_(0, inv, torch.ones_like(values))
    mean = torch.zeros(m, dtype=values.dtype).index_add_(0, inv, values) / n
    out = values - mean[inv]
    if std:
        ss = torch.zeros(m, dtype=values.dtype).index_add_(0, inv, out ** 2)
        out = out / (torch.sqrt(ss / (n - 1).clamp(min=1))[inv] + eps)
    return torch.where(n[inv] > 1, out, torch.zeros_like(out))
