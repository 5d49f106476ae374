"""GiGPO (Feng et al., arXiv 2505.10978; verl-agent ``gigpo/core_gigpo.py``): an episode
advantage plus a step advantage from anchor-state groups (docs/estimators.md, GiGPO).

Per row b (one turn t of trajectory i in group g; B rows):
    A_E(b) = R_i - mean over the rows of g of R           (mean_norm)
             (R_i - mean) / (std + eps)                   (mean_std_norm)
    G(b)   = sum_{k >= t} gamma^(k-t) r_k = gamma^(T_i-1-t) R_i   (terminal reward only)
    A_S(b) = the same normalisation of G over the anchor group of b: the rows of group g
             whose prompt shows the same observation text
    A(b)   = A_E(b) + omega * A_S(b), on every generated token of the row.
As verl-agent, the episode statistics are over the group's rows (its default
``compute_mean_std_cross_steps``), so a trajectory counts once per turn.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..settings.loader import in_range, need, setting
from ..step.batch import StepBatch, row_turns
from ..step.group_norm import grouped_normalise
from .registry import CreditOutput, GroupParams, register_estimator

INITIAL_STATE = "\x00initial"   # anchor key of turn 0 (every rollout of a group starts there)
GIGPO_MODES = ("mean_norm", "mean_std_norm")


@dataclass
class GigpoParams(GroupParams):
    gigpo_gamma: float = setting(0.95, "GiGPO: discount of the step return")
    gigpo_step_weight: float = setting(1.0, "GiGPO: omega, weight of the step advantage")
    gigpo_mode: str = setting("mean_norm", "GiGPO: step-group normalisation, mean_norm or "
                              "mean_std_norm")

    def validate(self) -> None:
        super().validate()
        in_range(self, "gigpo_gamma", 0, 1)
        in_range(self, "gigpo_step_weight", 0, 100)
        need(self.gigpo_mode in GIGPO_MODES, "gigpo_mode", f"one of {list(GIGPO_MODES)}",
             self.gigpo_mode)


def gigpo_row_advantages(episode_return: torch.Tensor, group: torch.Tensor,
                         step_return: torch.Tensor, anchor_group: torch.Tensor, *,
                         step_weight: float = 1.0, mode: str = "mean_norm",
                         eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """All [B] (one entry per row): R of the row's trajectory, its episode group, its
    discounted step return, its anchor-state group (unique across episode groups) ->
    (A [B] = A_E + step_weight * A_S, A_S [B])."""
    if mode not in GIGPO_MODES:
        raise ValueError(f"mode: expected mean_norm or mean_std_norm, got {mode!r}")
    std = mode == "mean_std_norm"
    a_e = grouped_normalise(episode_return, group, std=std, eps=eps)
    a_s = grouped_normalise(step_return, anchor_group, std=std, eps=eps)
    return a_e + step_weight * a_s, a_s


def anchor_keys(batch: StepBatch) -> list[str]:
    """[B] the observation text each row's prompt shows: the initial state for turn 0,
    else the previous turn's ``observation_after`` (step/rollout.py)."""
    keys = []
    for e, t in zip(batch.episode, batch.turn):
        keys.append(INITIAL_STATE if t == 0 else batch.episodes[e].turns[t - 1].observation_after)
    return keys


def step_returns(batch: StepBatch, gamma: float) -> torch.Tensor:
    """[B] float64: gamma^(T-1-t) R of each row (turn t of a trajectory of T turns whose
    only reward R arrives after its last turn)."""
    out = torch.zeros(len(batch), dtype=torch.float64)
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        T = len(batch.episodes[e].turns)
        out[b] = float(batch.rewards[e]) * gamma ** (T - 1 - t)
    return out


@register_estimator("gigpo", params=GigpoParams, knob="gigpo_step_weight", label="GiGPO",
                    base_advantage=True)
def gigpo(batch: StepBatch, cfg: GigpoParams) -> CreditOutput:
    """GiGPO on the batch's rows (module docstring); env-faulted episodes have no rows, so
    they are in no statistic."""
    row_turns(batch, "gigpo")                           # episodes/turn present
    e = batch.traj_index
    group = batch.group_of[e]
    keys = anchor_keys(batch)
    ids: dict[tuple[int, str], int] = {}
    anchor = torch.tensor([ids.setdefault((int(g), k), len(ids)) for g, k in zip(group, keys)],
                          dtype=torch.long)
    adv, a_s = gigpo_row_advantages(batch.rewards.double()[e], group,
                                    step_returns(batch, cfg.gigpo_gamma), anchor,
                                    step_weight=cfg.gigpo_step_weight, mode=cfg.gigpo_mode,
                                    eps=cfg.eps)
    adv = adv.float()
    sizes = torch.bincount(anchor).double() if len(anchor) else torch.zeros(0)
    nan = float("nan")
    stats = {"gigpo/anchor_groups": int(len(ids)),
             "gigpo/anchor_group_size_mean": float(sizes.mean()) if len(sizes) else nan,
             "gigpo/step_adv_abs_mean": float(a_s.abs().mean()) if len(a_s) else nan}
    base = batch.episode_advantages(cfg)[e]            # GRPO A_i: the common reference
    return CreditOutput(adv[:, None] * batch.response_mask.float(), base, stats=stats)
