"""EMPG (Wang et al., arXiv 2509.09265, "Harnessing Uncertainty: Entropy-Modulated Policy
Gradients for Long-Horizon LLM Agents"; docs/estimators.md, EMPG).

A step is one row (one generated turn). Its entropy H is the mean token entropy of the
row's response under theta_old (the scoring pass, ``old_entropy``). Over the B rows of the
step:
    Hn     = (H - min H) / (max H - min H + 1e-8)                  batch min-max
    g      = exp(-k Hn) / mean_b exp(-k Hn)                         self-calibrating scale
    f      = exp(-k_f Hn)                                            future clarity
    A'(b)  = g(b) A_i + zeta f(next(b))   (the bonus only when the trajectory has a next
                                           step, next(b) = its next row)
    A(b)   = A'(b) - mean_b A'(b)                                   final zero-mean
and A(b) goes to every generated token of row b.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..step.batch import StepBatch
from ..settings.loader import in_range, setting
from .registry import CreditOutput, GroupParams, register_estimator


@dataclass
class EmpgParams(GroupParams):
    empg_k: float = setting(1.0, "EMPG: k of the self-calibrating scaling exp(-k H)")
    empg_k_future: float = setting(1.0, "EMPG: k_f of the future clarity bonus exp(-k_f H_next)")
    empg_zeta: float = setting(0.1, "EMPG: weight of the future clarity bonus")

    def validate(self) -> None:
        super().validate()
        for key in ("empg_k", "empg_k_future", "empg_zeta"):
            in_range(self, key, 0, 100)


def next_rows(traj_index: torch.Tensor, turn: list[int]) -> torch.Tensor:
    """[B] int64: the row of the same trajectory's next generated turn, -1 for the last."""
    out = torch.full((len(turn),), -1, dtype=torch.long)
    order = sorted(range(len(turn)), key=lambda b: (int(traj_index[b]), turn[b]))
    for a, b in zip(order, order[1:]):
        if int(traj_index[a]) == int(traj_index[b]):
            out[a] = b
    return out


def step_entropy(entropy: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] token entropies, [B, L] 0/1 mask -> [B] mean over each row's tokens (0 for
    an empty row)."""
    if entropy.shape != response_mask.shape:
        raise ValueError(f"response_mask: expected shape {tuple(entropy.shape)}, got "
                         f"{tuple(response_mask.shape)}")
    m = response_mask.to(entropy.dtype)
    return (entropy * m).sum(-1) / m.sum(-1).clamp(min=1)


def empg_step_advantages(base: torch.Tensor, step_H: torch.Tensor, next_row: torch.Tensor, *,
                         k: float = 1.0, k_future: float = 1.0, zeta: float = 0.1,
                         eps: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor]:
    """base [B] A_i per row, step_H [B] step entropies, next_row [B] int64 (-1: none) ->
    (A [B] modulated and zero-mean, g [B] the scale). Computed in base's dtype."""
    B = base.shape[0]
    for name, t in (("step_H", step_H), ("next_row", next_row)):
        if tuple(t.shape) != (B,):
            raise ValueError(f"{name}: expected shape {(B,)}, got {tuple(t.shape)}")
    if B == 0:
        return base.clone(), base.clone()
    if bool(((next_row < -1) | (next_row >= B)).any()):
        raise ValueError("next_row: expected -1 or a row index in [0, B)")
    H = step_H.to(base.dtype)
    hn = (H - H.min()) / (H.max() - H.min() + eps)
    g = torch.exp(-k * hn)
    g = g / g.mean()
    f = torch.exp(-k_future * hn)
    has_next = next_row >= 0
    bonus = torch.where(has_next, zeta * f[next_row.clamp(min=0)], torch.zeros_like(f))
    mod = g * base + bonus
    return mod - mod.mean(), g


@register_estimator("empg", needs_entropy=True, params=EmpgParams, knob="empg_zeta")
def empg(batch: StepBatch, cfg: EmpgParams) -> CreditOutput:
    """EMPG on the batch's rows (module docstring)."""
    if batch.old_entropy is None:
        raise ValueError("empg: old_entropy (token entropies under theta_old) is required")
    base = batch.episode_advantages(cfg)[batch.traj_index]
    H = step_entropy(batch.old_entropy.double(), batch.response_mask)
    adv, g = empg_step_advantages(base.double(), H, next_rows(batch.traj_index, batch.turn),
                                  k=cfg.empg_k, k_future=cfg.empg_k_future, zeta=cfg.empg_zeta)
    adv = adv.float()
    nan = float("nan")
    stats = {"empg/step_entropy_mean": float(H.mean()) if len(H) else nan,
             "empg/scale_min": float(g.min()) if len(g) else nan,
             "empg/scale_max": float(g.max()) if len(g) else nan}
    return CreditOutput(adv[:, None] * batch.response_mask.float(), base, stats=stats)
