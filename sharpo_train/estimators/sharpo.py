"""SHARPO (docs/method.md §4) and its length-factor-only ablation ``sharpo_rho``: the
segment weight w from the teacher's gap and the length factor rho on the base advantage
A_i, via ``sharpo_kernels.segment_advantage``; ``SharpoParams`` holds the five coefficients
(``sharpo_kernels.SharpoCoefficients``) and this implementation's choices (docs/estimators.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional

import torch

from sharpo_kernels import SharpoCoefficients, segment_advantage, with_coefficients
from sharpo_kernels.segment_advantage import SEGMENT_ADVANTAGE_BACKENDS

from ..settings.loader import in_range, need, setting
from ..step.batch import StepBatch, segment_kind_mask
from .sharpo_stats import lam_zero_stats, sharpo_step_stats
from .inputs import teacher_fields
from .registry import ESTIMATORS, CreditOutput, GroupParams, register_estimator

WEIGHT_SEGMENTS = ("all", "action")
WEIGHT_SIDES = ("both", "down")


@dataclass
@with_coefficients
class SharpoParams(GroupParams):
    """docs/method.md §4: the five coefficients (lam, alpha, tau, rho_min, rho_max; their
    names, defaults and help: ``sharpo_kernels.SharpoCoefficients``, added by
    ``with_coefficients``), then these."""
    backend: Optional[str] = setting(None, "SHARPO: sharpo_kernels backend of "
                                     "segment_advantage; null: automatic")
    # docs/estimators.md, weight_segments / weight_side / SHARPO over another base
    weight_segments: str = setting("all", "SHARPO: segments that get the teacher-gap weight w: "
                                   "all (the method, §4) or action (deviation: reasoning "
                                   "segments keep w = 1)")
    weight_side: str = setting("both", "SHARPO: way w may move: both (the method, w in "
                               "[1 - alpha, 1 + alpha]) or down (deviation: w <= 1, the "
                               "teacher only takes credit away)")
    base: str = setting("grpo", "SHARPO: the A_i of §4 per row, a registered base-advantage "
                        "estimator (grpo: §1; gigpo: GiGPO's episode + step advantage)")
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
        return batch.episode_advantages(cfg)[batch.traj_index], {}
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


def needs_teacher(params) -> bool:
    """SHARPO scores a teacher unless lam = 0, where it is its base exactly (docs/method.md
    §4: the multiplier (1 - lam) + lam * rho * w is 1). ``params``: anything with ``lam``
    (SharpoParams, TRL's SharpoConfig, verl's ``algorithm.sharpo`` coefficients)."""
    return params.lam != 0


def row_base(batch: StepBatch, cfg: SharpoParams) -> torch.Tensor:
    """[B] each row's A_i from ``cfg.base`` (``base_row_advantages`` without its stats)."""
    return base_row_advantages(batch, cfg)[0]


@register_estimator("sharpo", needs_teacher=needs_teacher, params=SharpoParams, knob="lam",
                    label="SHARPO", knob_label="λ", row_base=row_base)
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
    stats = lam_zero_stats() if not needs_teacher(cfg) else sharpo_step_stats(   # none scored
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
