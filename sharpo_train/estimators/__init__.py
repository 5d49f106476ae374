"""Credit estimators: pure functions from a ``StepBatch`` to per-token advantages [B, L].

Registered by name (``config.method``) with their own parameters dataclass
(registry.py): the trainer calls ``ESTIMATORS[name].fn(batch, cfg.estimator.params(name))``
and asks ``needs_teacher`` whether to build and score teachers (and ``needs_entropy``
whether the scoring pass also returns token entropies). A new method is one decorated
function and its params dataclass, here or anywhere (``register_estimator(name,
params=...)``): the training loop and the config are untouched (docs/estimators.md, adding
an estimator).

This package: the registry and the ``estimator.*`` settings (``registry.py``), GRPO and
SHARPO (here); the other methods of the field, each as plain-tensor math plus a thin
registered wrapper (docs/estimators.md): ``gigpo.py`` (GiGPO), ``self_distill.py`` (RLSD,
SERL, OPSD, SDAR), ``empg.py`` (EMPG). Group statistics and the segment step statistics are
the integrations' too: sharpo_train/step/credit.py.

An estimator reads (and never writes) these fields of the batch (step/batch.py; B rows,
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
- ``step``: the training step (1, 2, ...), for methods with a schedule.
- ``episode_adv`` [N] with ``meta["episode_adv_params"]``: GRPO's A_i as the trainer
  computed it (``fill_episode_advantages``); ``episode_advantages`` reads it back.
It returns a ``CreditOutput``. ``aux_loss`` (optional): a term the update adds to the
policy loss, for methods that are a loss and not only an advantage (SDAR; step/update.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional

import torch

from sharpo_kernels import SharpoCoefficients, segment_advantage, with_coefficients
from sharpo_kernels.segment_advantage import SEGMENT_ADVANTAGE_BACKENDS

from ..step.batch import StepBatch
from ..settings.loader import in_range, need
from ..step.credit import group_advantages, lam_zero_stats, sharpo_step_stats
from .registry import (ESTIMATORS, AuxLoss, CreditOutput, Estimator, EstimatorSettings,
                       GroupParams, estimator_config, estimator_config_class,
                       register_estimator)

__all__ = ["ESTIMATORS", "Estimator", "register_estimator", "GroupParams", "SharpoParams",
           "EstimatorConfig", "EstimatorSettings", "estimator_config", "CreditOutput",
           "AuxLoss", "base_estimators", "base_row_advantages", "episode_advantages", "fill_episode_advantages", "batch_step",
           "teacher_fields", "row_turns", "segment_kind_mask"]


def batch_step(batch: StepBatch, method: str) -> int:
    """The training step of ``batch`` (``batch.step``, set by the trainer), for methods
    with a schedule; a ValueError naming it when absent."""
    step = batch.step
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"{method}: batch.step (the training step, an int >= 0) is "
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
    ids number its turn's spans in order (step/segments.py, docs/method.md §2)."""
    out = torch.zeros(batch.segment_ids.shape, dtype=torch.bool)
    for b, turn in enumerate(row_turns(batch, method)):
        for k, span in enumerate(turn.spans):
            if span.kind == kind:
                out[b] |= batch.segment_ids[b] == k
    return out


def episode_advantages(batch: StepBatch, params: GroupParams) -> torch.Tensor:
    """[N] GRPO A_i of every trajectory of the batch (``credit.group_advantages``),
    env-faulted ones left out (A = 0). Computed once per batch: the trainer stores it with
    ``fill_episode_advantages`` before credit, and a call with the same (norm_std, eps)
    reads it back."""
    key = (params.norm_std, params.eps)
    if batch.episode_adv is not None and batch.meta.get("episode_adv_params") == key:
        return batch.episode_adv
    return group_advantages(batch.rewards, batch.group_of, norm_std=params.norm_std,
                            eps=params.eps, valid=batch.healthy)


def fill_episode_advantages(batch: StepBatch, params: GroupParams) -> torch.Tensor:
    """Set ``batch.episode_adv`` [N] (the trainer, before teachers and credit)."""
    batch.episode_adv = episode_advantages(batch, params)
    batch.meta["episode_adv_params"] = (params.norm_std, params.eps)
    return batch.episode_adv


WEIGHT_SEGMENTS = ("all", "action")
WEIGHT_SIDES = ("both", "down")


@dataclass
@with_coefficients
class SharpoParams(GroupParams):
    """docs/method.md §4: the five coefficients (lam, alpha, tau, rho_min, rho_max; their
    names, defaults and help: ``sharpo_kernels.SharpoCoefficients``, added by
    ``with_coefficients``), then these."""
    backend: Optional[str] = None         # sharpo_kernels backend; None: automatic
    # which segments get the teacher-gap weight w (docs/estimators.md, weight_segments):
    # "all" (the method, §4) or "action" (deviation: reasoning segments keep w = 1)
    weight_segments: str = "all"
    # which way w may move (docs/estimators.md, weight_side): "both" (the method, §4:
    # w in [1 - alpha, 1 + alpha]) or "down" (deviation: w in [1 - alpha, 1], the teacher
    # only takes credit away)
    weight_side: str = "both"
    # A_i of §4 per row: a registered base-advantage estimator (grpo: §1; gigpo: GiGPO's
    # episode + step advantage; docs/estimators.md, SHARPO over another base)
    base: str = "grpo"
    # the base's own params (EstimatorSettings.params fills them from the estimator.* keys;
    # None: the base's defaults with this config's norm_std and eps)
    base_params: Optional[GroupParams] = field(default=None, init=False, repr=False,
                                               compare=False)

    def validate(self) -> None:
        super().validate()
        SharpoCoefficients.of(self).checked()
        # beyond these, tanh(gap / 2 tau) is 0 and rho never clips: SHARPO would silently be GRPO
        in_range(self, "tau", 0, 1000, lo_open=True)
        in_range(self, "rho_max", 0, 1000, lo_open=True)
        need(self.weight_segments in WEIGHT_SEGMENTS, "weight_segments",
             f"one of {list(WEIGHT_SEGMENTS)}", self.weight_segments)
        need(self.weight_side in WEIGHT_SIDES, "weight_side",
             f"one of {list(WEIGHT_SIDES)}", self.weight_side)
        need(self.backend is None or self.backend in SEGMENT_ADVANTAGE_BACKENDS, "backend",
             f"null (automatic) or one of {list(SEGMENT_ADVANTAGE_BACKENDS)}", self.backend)
        bases = base_estimators()
        need(self.base in bases, "base", f"one of {bases} (a base-advantage estimator)",
             self.base)


def base_estimators() -> list[str]:
    """Registered estimators SHARPO can start from (``base_advantage``)."""
    return [name for name, est in ESTIMATORS.items() if est.base_advantage]


def base_row_advantages(batch: StepBatch, cfg: SharpoParams) -> tuple[torch.Tensor, dict]:
    """[B] fp32 A of every row from ``cfg.base`` (docs/method.md §4 reads it as A_i), and
    the base's own stats. ``grpo``: the trajectory's A_i (§1). Another base: its
    advantages [B, L] read at each row's first generated token (0 for a row without
    one), checked equal on every generated token of the row."""
    if cfg.base == "grpo":
        return episode_advantages(batch, cfg)[batch.traj_index], {}
    est = ESTIMATORS.get(cfg.base)
    if est is None or not est.base_advantage:
        raise ValueError(f"estimator.base: expected one of {base_estimators()}, got {cfg.base!r}")
    params = getattr(cfg, "base_params", None)
    if params is None:
        shared = {f.name: getattr(cfg, f.name) for f in fields(GroupParams)}
        params = est.params(**shared)
    out = est.fn(batch, params)
    mask = batch.response_mask != 0                                   # [B, L]
    first = mask.float().argmax(-1, keepdim=True)                     # [B, 1]
    row = out.advantages.float().gather(1, first)[:, 0] * mask.any(-1)
    if bool(((out.advantages.float() - row[:, None]) * mask).ne(0).any()):
        raise ValueError(f"estimator.base: {cfg.base!r} gave one row different advantages on "
                         "different tokens; SHARPO needs one number per row")
    return row, out.stats


@register_estimator("grpo", params=GroupParams, label="GRPO", base_advantage=True)
def grpo(batch: StepBatch, cfg: GroupParams) -> CreditOutput:
    """Every generated token of a trajectory's rows gets its A_i (docs/method.md §1)."""
    base = episode_advantages(batch, cfg)[batch.traj_index]
    return CreditOutput(base[:, None] * batch.response_mask.float(), base)


@register_estimator("sharpo", needs_teacher=True, params=SharpoParams, knob="lam",
                    label="SHARPO", knob_label="λ")
def sharpo(batch: StepBatch, cfg: SharpoParams) -> CreditOutput:
    """docs/method.md §4 via ``sharpo_kernels.segment_advantage``; mbar per trajectory
    (traj_index); A_i per row from ``cfg.base`` (lam = 0: the base exactly)."""
    base, base_stats = base_row_advantages(batch, cfg)
    # rows without a teacher are never read by the kernel; they get the student's values
    teacher, has_teacher = teacher_fields(batch, "sharpo")
    student = batch.old_logp
    if cfg.weight_segments == "action":
        # reasoning tokens: teacher = student, so gap_k = 0 and w_k = 1 exactly (§4);
        # rho and the action segments are unchanged. [B, L]
        teacher = torch.where(segment_kind_mask(batch, "think", "sharpo"), student, teacher)
    def weigh(teacher: torch.Tensor):
        return segment_advantage(teacher, student, batch.segment_ids, base,
                                 has_teacher=has_teacher, response_mask=batch.response_mask,
                                 traj_index=batch.traj_index, backend=cfg.backend,
                                 **SharpoCoefficients.of(cfg).kwargs())

    seg = weigh(teacher)
    if cfg.weight_side == "down":
        # the records keep the teacher's own gap; weights and advantages are the capped ones
        first = seg
        seg = weigh(silence_raising_segments(teacher, student, batch.segment_ids, base,
                                             first.gap))._replace(gap=first.gap)
    stats = lam_zero_stats() if cfg.lam == 0 else sharpo_step_stats(  # lam = 0: no teacher scored
        seg, base, has_teacher, alpha=cfg.alpha, tau=cfg.tau, traj_index=batch.traj_index)
    return CreditOutput(seg.advantages, base, seg, {**base_stats, **stats})


def silence_raising_segments(teacher: torch.Tensor, student: torch.Tensor,
                             segment_ids: torch.Tensor, base: torch.Tensor,
                             gap: torch.Tensor) -> torch.Tensor:
    """estimator.weight_side=down (a deviation, docs/estimators.md): [B, L] teacher
    log-probs with ``teacher = student`` on every segment whose §4 weight would exceed 1
    (sign(A_i) * gap_{i,k} > 0; gap [B, Kmax] from a first pass, NaN never), so its gap is
    exactly 0 and w = 1 there: w = min(w, 1). rho and the other segments are unchanged."""
    if gap.shape[1] == 0:
        return teacher
    ids = segment_ids.long()                                           # [B, L], -1 = none
    tok_gap = gap.gather(1, ids.clamp(min=0, max=gap.shape[1] - 1))    # [B, L]
    raising = (ids >= 0) & (torch.sign(base.float())[:, None] * tok_gap > 0)
    return torch.where(raising, student, teacher)


@register_estimator("sharpo_rho", params=SharpoParams, knob="lam", label="SHARPO ρ-only")
def sharpo_rho(batch: StepBatch, cfg: SharpoParams) -> CreditOutput:
    """SHARPO's length factor alone, the weight off (an ablation): docs/method.md §4 with
    w = 1 on every segment of every trajectory, so ``A~ = A_i * ((1 - lam) + lam * rho)``.
    No teacher is scored (the kernel gets the student as its own teacher: every gap 0)."""
    if batch.old_logp is None:
        raise ValueError("sharpo_rho: old_logp is required")
    base, base_stats = base_row_advantages(batch, cfg)
    everyone = torch.ones(base.shape[0], dtype=torch.bool)
    seg = segment_advantage(batch.old_logp, batch.old_logp, batch.segment_ids, base,
                            has_teacher=everyone, response_mask=batch.response_mask,
                            traj_index=batch.traj_index, backend=cfg.backend,
                            **SharpoCoefficients.of(cfg).kwargs())
    stats = sharpo_step_stats(seg, base, everyone, alpha=cfg.alpha, tau=cfg.tau)
    del stats["sharpo/teacher_coverage"]        # no teacher: the trainer's coverage (0) stands
    return CreditOutput(seg.advantages, base, seg, {**base_stats, **stats})


# the other methods register themselves on import (docs/estimators.md)
from . import empg, gigpo, oracle, self_distill  # noqa: E402,F401

# the estimator.* settings of the built-in methods (Config.estimator's class is rebuilt
# from the registry when more are registered: registry.estimator_config_class)
EstimatorConfig = estimator_config_class()
