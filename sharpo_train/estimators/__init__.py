"""Credit estimators: pure functions from a ``StepBatch`` to per-token advantages [B, L].

Registered by name (``config.method``); the trainer calls ``ESTIMATORS[name].fn(batch,
cfg.estimator)`` and asks ``needs_teacher`` whether to build and score teachers (and
``needs_entropy`` whether the scoring pass also returns token entropies). A new method is
one decorated function here (or anywhere, via ``register_estimator``): the training loop
is untouched (docs/training.md, estimator registry).

This package: the registry, GRPO and SHARPO (here); the other methods of the field, each
as plain-tensor math plus a thin registered wrapper (docs/estimators.md): ``gigpo.py``
(GiGPO), ``self_distill.py`` (RLSD, SERL, OPSD, SDAR), ``empg.py`` (EMPG).

An estimator reads (and never writes) these fields of the batch (batch.py; B rows,
L = longest response, N trajectories):
- ``rewards`` [N] fp32, ``group_of`` [N] int64: terminal reward and group of each
  trajectory; group statistics are over trajectories, not rows (docs/method.md §1).
- ``healthy`` [N] bool: trajectories not ended by an env fault; the others leave the
  group statistics and get A = 0 (``episode_advantages``).
- ``traj_index`` [B] int64: the trajectory of each row.
- ``response_mask`` [B, L] fp32 0/1, ``segment_ids`` [B, L] int64 (-1: no segment; ids
  0..K-1 per row, docs/method.md §2).
- ``old_logp`` / ``teacher_logp`` [B, L] fp32 (theta_old without / with the hint) and
  ``has_teacher`` [B] bool; teacher fields are None when the method needs no teacher.
- ``episodes`` [N]: the rollout itself (states, actions), for methods that need it;
  ``turn`` [B]: row b is ``episodes[traj_index[b]].turns[turn[b]]``.
- ``old_entropy`` [B, L] fp32: token entropies under theta_old (``needs_entropy`` only).
- ``meta["step"]``: the training step (1, 2, ...), for methods with a schedule.
It returns a ``CreditOutput``. ``aux_loss`` (optional): a term the update adds to the
policy loss, for methods that are a loss and not only an advantage (SDAR; update.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from ..batch import StepBatch


@dataclass
class CreditOutput:
    advantages: torch.Tensor               # [B, L] fp32, 0 where response_mask == 0
    base: torch.Tensor                     # [B] fp32: A_i of each row's trajectory
    segments: Optional[object] = None      # sharpo_kernels.SegmentAdvantage (gap/weight/...)
    stats: dict = field(default_factory=dict)   # metric name -> number (metrics line)
    aux_loss: Optional["AuxLoss"] = None   # an extra loss term for the update (SDAR)


@dataclass
class AuxLoss:
    """A per-token loss term the update adds to the policy loss: ``coef *
    aggregate(AUX_LOSSES[name](logp, **inputs[rows], **params), weights)`` with the
    policy loss's aggregation (losses.py; logp [b, L] of the current policy, with grad)."""
    name: str                              # a key of losses.AUX_LOSSES
    coef: float
    inputs: dict                           # name -> [B, L] tensor, sliced per micro-batch
    params: dict = field(default_factory=dict)   # name -> number


@dataclass(frozen=True)
class Estimator:
    fn: Callable[[StepBatch, object], CreditOutput]
    needs_teacher: bool
    needs_entropy: bool = False            # the scoring pass fills batch.old_entropy
    knob: Optional[str] = None             # EstimatorConfig field set by `name:<value>`
                                           # in `sharpo compare --methods`
    group_relative: bool = True            # starts from group-relative A_i (config check)


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(name: str, needs_teacher: bool = False, *, needs_entropy: bool = False,
                       knob: Optional[str] = None):
    """Decorator: ``fn(batch: StepBatch, cfg: EstimatorConfig) -> CreditOutput`` becomes
    method ``name``. ``needs_teacher``: the trainer assigns teachers and fills
    ``teacher_logp``/``has_teacher`` before calling it; ``needs_entropy``: it fills
    ``old_entropy``; ``knob``: the EstimatorConfig field `sharpo compare --methods
    name:<value>` sets."""
    def wrap(fn):
        ESTIMATORS[name] = Estimator(fn, needs_teacher, needs_entropy, knob)
        return fn
    return wrap


def batch_step(batch: StepBatch, method: str) -> int:
    """The training step of ``batch`` (``meta["step"]``, set by the trainer), for methods
    with a schedule; a ValueError naming it when absent."""
    step = batch.meta.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"{method}: batch.meta['step'] (the training step, an int >= 0) is "
                         f"required, got {step!r}")
    return step


def teacher_fields(batch: StepBatch, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(teacher_logp [B, L] with the student's values where there is no teacher,
    has_teacher [B] bool); a ValueError naming the method when they are missing."""
    if batch.has_teacher is None or batch.teacher_logp is None:
        raise ValueError(f"{method}: teacher log-probs are required (has_teacher, teacher_logp)")
    if batch.old_logp is None:
        raise ValueError(f"{method}: old_logp is required")
    teacher = torch.where(batch.has_teacher[:, None], batch.teacher_logp, batch.old_logp)
    return teacher, batch.has_teacher


def row_turns(batch: StepBatch, method: str) -> list:
    """[B] the Turn of every row (``episodes[traj_index[b]].turns[turn[b]]``)."""
    if len(batch.episodes) != batch.num_episodes or len(batch.turn) != len(batch):
        raise ValueError(f"{method}: the batch's episodes and turn indices are required "
                         f"(episodes [N], turn [B])")
    return [batch.episodes[e].turns[t] for e, t in zip(batch.episode, batch.turn)]


def segment_kind_mask(batch: StepBatch, kind: str, method: str) -> torch.Tensor:
    """[B, L] bool: tokens in a segment of ``kind`` ("think" / "action"); a row's segment
    ids number its turn's spans in order (segments.py, docs/method.md §2)."""
    out = torch.zeros(batch.segment_ids.shape, dtype=torch.bool)
    for b, turn in enumerate(row_turns(batch, method)):
        for k, span in enumerate(turn.spans):
            if span.kind == kind:
                out[b] |= batch.segment_ids[b] == k
    return out


def group_advantages(rewards: torch.Tensor, group_of: torch.Tensor, *, norm_std: bool = True,
                     eps: float = 1e-6, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
    """docs/method.md §1: A_i = (r_i - mean_g r) / (std_g r + eps) over each group g
    ([N] -> [N]). std is the unbiased sample std (as torch.std); a group of one has A = 0.
    ``valid`` [N] bool: only these episodes form the groups; the others get A = 0 (so a
    group with fewer than 2 valid episodes has A = 0)."""
    if valid is not None:
        out = torch.zeros(rewards.shape, dtype=torch.float32)
        if bool(valid.any()):
            out[valid] = group_advantages(rewards[valid], group_of[valid], norm_std=norm_std,
                                          eps=eps)
        return out
    rewards = rewards.float()
    groups, inv = torch.unique(group_of, return_inverse=True)
    n = torch.zeros(len(groups)).index_add_(0, inv, torch.ones_like(rewards))
    mean = torch.zeros(len(groups)).index_add_(0, inv, rewards) / n
    centred = rewards - mean[inv]
    adv = centred
    if norm_std:
        ss = torch.zeros(len(groups)).index_add_(0, inv, centred ** 2)
        std = torch.sqrt(ss / (n - 1).clamp(min=1))
        adv = centred / (std[inv] + eps)
    return torch.where(n[inv] > 1, adv, torch.zeros_like(adv))


def episode_advantages(batch: StepBatch, cfg) -> torch.Tensor:
    """[N] GRPO A_i of every trajectory of the batch, env-faulted ones left out (A = 0)."""
    return group_advantages(batch.rewards, batch.group_of, norm_std=cfg.norm_std, eps=cfg.eps,
                            valid=batch.healthy)


@register_estimator("grpo")
def grpo(batch: StepBatch, cfg) -> CreditOutput:
    """Every generated token of a trajectory's rows gets its A_i (docs/method.md §1)."""
    base = episode_advantages(batch, cfg)[batch.traj_index]
    return CreditOutput(base[:, None] * batch.response_mask.float(), base)


@register_estimator("sharpo", needs_teacher=True, knob="lam")
def sharpo(batch: StepBatch, cfg) -> CreditOutput:
    """docs/method.md §4 via ``sharpo_kernels.segment_advantage``; mbar per trajectory
    (traj_index)."""
    from sharpo_kernels import segment_advantage

    base = episode_advantages(batch, cfg)[batch.traj_index]
    has_teacher = batch.has_teacher
    if has_teacher is None or batch.teacher_logp is None:
        raise ValueError("sharpo: teacher log-probs are required (has_teacher, teacher_logp)")
    student = batch.old_logp
    # rows without a teacher are never read by the kernel; give them finite values
    teacher = torch.where(has_teacher[:, None], batch.teacher_logp, student)
    seg = segment_advantage(teacher, student, batch.segment_ids, base, has_teacher=has_teacher,
                            lam=cfg.lam, alpha=cfg.alpha, tau=cfg.tau, rho_min=cfg.rho_min,
                            rho_max=cfg.rho_max, response_mask=batch.response_mask,
                            traj_index=batch.traj_index, backend=cfg.backend)
    return CreditOutput(seg.advantages, base, seg, sharpo_stats(seg, base, has_teacher, cfg.alpha, cfg.tau))


@register_estimator("sharpo_rho", knob="lam")
def sharpo_rho(batch: StepBatch, cfg) -> CreditOutput:
    """SHARPO's length factor alone, the weight off (an ablation): docs/method.md §4 with
    w = 1 on every segment of every trajectory, so ``A~ = A_i * ((1 - lam) + lam * rho)``.
    No teacher is scored (the kernel gets the student as its own teacher: every gap 0)."""
    from sharpo_kernels import segment_advantage

    if batch.old_logp is None:
        raise ValueError("sharpo_rho: old_logp is required")
    base = episode_advantages(batch, cfg)[batch.traj_index]
    everyone = torch.ones(base.shape[0], dtype=torch.bool)
    seg = segment_advantage(batch.old_logp, batch.old_logp, batch.segment_ids, base,
                            has_teacher=everyone, lam=cfg.lam, alpha=cfg.alpha, tau=cfg.tau,
                            rho_min=cfg.rho_min, rho_max=cfg.rho_max,
                            response_mask=batch.response_mask, traj_index=batch.traj_index,
                            backend=cfg.backend)
    return CreditOutput(seg.advantages, base, seg,
                        sharpo_stats(seg, base, everyone, cfg.alpha, cfg.tau))


def sharpo_stats(seg, base: torch.Tensor, has_teacher: torch.Tensor, alpha: float,
                 tau: float) -> dict:
    """Per-step summaries of the segment statistics (NaN when there is nothing to average)."""
    nan = float("nan")
    valid = ~torch.isnan(seg.weight)
    scored = valid & has_teacher[:, None] & (base != 0)[:, None] & ~torch.isnan(seg.gap)
    gaps, w, rho = seg.gap[scored], seg.weight[scored], seg.length_factor[valid]

    def pick(t, fn):
        return fn(t).item() if t.numel() else nan
    # u(gap) reaches +-alpha: the clip bound is active
    clipped = (torch.tanh(gaps / (2 * tau)).abs() >= alpha) if gaps.numel() else gaps
    return {
        "sharpo/gap_mean": pick(gaps, torch.mean),
        "sharpo/gap_std": pick(gaps, lambda t: t.std() if t.numel() > 1 else torch.tensor(0.)),
        "sharpo/weight_mean": pick(w, torch.mean),
        "sharpo/weight_min": pick(w, torch.min),
        "sharpo/weight_max": pick(w, torch.max),
        "sharpo/clipped_frac": pick(clipped.float(), torch.mean),
        "sharpo/length_factor_min": pick(rho, torch.min),
        "sharpo/length_factor_max": pick(rho, torch.max),
        "sharpo/segments_scored": int(scored.sum()),
    }


# the other methods register themselves on import (docs/estimators.md)
from . import empg, gigpo, self_distill  # noqa: E402,F401
