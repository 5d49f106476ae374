"""Teacher-guided token credit: RLSD, SERL, OPSD (sampled-token form) and SDAR
(docs/estimators.md). Every one reads the log-prob gap delta = log piT - log piS of each
generated token, where piS is theta_old on the row's prompt (``old_logp``) and piT the same
model after ``prompt + hint`` (``teacher_logp``, docs/method.md §3). Rows without a teacher
(``has_teacher`` False) keep the GRPO advantage A_i and get no extra term.

- RLSD (Yang et al., arXiv 2604.03128; ZJU-REAL/SDAR ``verl/trainer/ppo/rlsd_utils.py``):
      w = clip(exp(sign(A_i) * delta), 1 - eps, 1 + eps)
      A_t = A_i * ((1 - lam_s) + lam_s * w),  lam_s = lam * max(0, 1 - s / S)
  at training step s (S = ``rlsd_warmdown_steps``).
- SERL (arXiv 2605.19447): the RLSD reweighting on the tokens of action segments only;
  reasoning (think) tokens and tokens outside segments keep A_i.
- OPSD sampled-token (Zhao et al., arXiv 2601.18734): A_t = A_i + c * delta.
- SDAR (Lu et al., arXiv 2605.15155; ZJU-REAL/SDAR ``verl/trainer/ppo/sdar_utils.py``):
  the advantage is GRPO's; the update adds c * agg[sg(sigmoid(beta (log piT - sg log
  pi_theta))) * (log piT - log pi_theta)] with pi_theta the current policy (gradient
  through it only), on rows with a teacher (step/losses.py ``sdar_distill``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..settings.loader import in_range, setting
from ..step.batch import StepBatch, segment_kind_mask
from .inputs import batch_step, teacher_fields
from .registry import AuxLoss, CreditOutput, GroupParams, register_estimator


@dataclass
class RlsdParams(GroupParams):
    """RLSD and SERL."""
    rlsd_lam: float = setting(0.5, "RLSD/SERL: mixing weight of the teacher's token weight "
                              "at step 0, decaying linearly to 0 over rlsd_warmdown_steps")
    rlsd_warmdown_steps: int = setting(50, "RLSD/SERL: steps over which rlsd_lam decays to 0")
    rlsd_clip_eps: float = setting(0.2, "RLSD/SERL: token weight clipped to [1 - eps, 1 + eps]")

    def validate(self) -> None:
        super().validate()
        in_range(self, "rlsd_lam", 0, 1)
        in_range(self, "rlsd_warmdown_steps", 1)
        in_range(self, "rlsd_clip_eps", 0, 1, hi_open=True)


@dataclass
class OpsdParams(GroupParams):
    opsd_coef: float = setting(0.1, "OPSD: coefficient of log piT - log piS added to A")

    def validate(self) -> None:
        super().validate()
        in_range(self, "opsd_coef", 0, 100)


@dataclass
class SdarParams(GroupParams):
    sdar_coef: float = setting(0.01, "SDAR: coefficient of the gated distillation loss")
    sdar_beta: float = setting(5.0, "SDAR: sharpness of the gate")

    def validate(self) -> None:
        super().validate()
        in_range(self, "sdar_coef", 0, 100)
        in_range(self, "sdar_beta", 0, 1000)


def _check(name: str, t: torch.Tensor, shape) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(t.shape)}")


def rlsd_lambda(step: int, lam: float, warmdown_steps: int) -> float:
    """lam * (1 - step / warmdown_steps), 0 from ``warmdown_steps`` on (the official
    trainer's schedule; its steps count from 1, as the trainer's)."""
    if warmdown_steps < 1:
        raise ValueError(f"warmdown_steps: expected >= 1, got {warmdown_steps}")
    return lam * max(0.0, 1.0 - step / warmdown_steps)


def rlsd_token_advantages(base: torch.Tensor, teacher_logp: torch.Tensor,
                          student_logp: torch.Tensor, response_mask: torch.Tensor,
                          reweight: torch.Tensor, *, lam: float, clip_eps: float = 0.2,
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """base [B] A_i per row; teacher/student log-probs, response_mask (0/1) and reweight
    (bool: tokens that take the weight) [B, L] -> (advantages [B, L], w [B, L]; w = 1 where
    not reweighted). A_t = A_i ((1 - lam) + lam w) on reweighted tokens, A_i elsewhere,
    0 on padding."""
    B = base.shape[0]
    for name, t in (("teacher_logp", teacher_logp), ("student_logp", student_logp),
                    ("response_mask", response_mask), ("reweight", reweight)):
        _check(name, t, (B, student_logp.shape[-1]))
    if not 0 <= clip_eps < 1:
        raise ValueError(f"clip_eps: expected in [0, 1), got {clip_eps}")
    sign = torch.sign(base)[:, None]
    w = torch.exp(sign * (teacher_logp - student_logp)).clamp(1 - clip_eps, 1 + clip_eps)
    w = torch.where(reweight.bool(), w, torch.ones_like(w))
    adv = base[:, None] * ((1 - lam) + lam * w)
    return adv * response_mask.to(adv.dtype), w


def opsd_token_advantages(base: torch.Tensor, teacher_logp: torch.Tensor,
                          student_logp: torch.Tensor, response_mask: torch.Tensor,
                          has_teacher: torch.Tensor, *, coef: float) -> torch.Tensor:
    """[B] A_i, [B, L] log-probs and mask, [B] bool -> [B, L]: A_i + coef (log piT -
    log piS) on the tokens of rows with a teacher, A_i on the others, 0 on padding."""
    B, L = student_logp.shape
    _check("base", base, (B,))
    _check("teacher_logp", teacher_logp, (B, L))
    _check("response_mask", response_mask, (B, L))
    _check("has_teacher", has_teacher, (B,))
    delta = torch.where(has_teacher[:, None], teacher_logp - student_logp,
                        torch.zeros_like(student_logp))
    return (base[:, None] + coef * delta) * response_mask.to(student_logp.dtype)


def sdar_gate(teacher_logp: torch.Tensor, student_logp: torch.Tensor, beta: float) -> torch.Tensor:
    """[B, L] sigmoid(beta (log piT - log piS)), no gradient (the gate is detached)."""
    return torch.sigmoid(beta * (teacher_logp.detach() - student_logp.detach()))


def _gap_stats(prefix: str, delta: torch.Tensor, sel: torch.Tensor) -> dict:
    d = delta[sel]
    nan = float("nan")
    return {f"{prefix}/gap_mean": float(d.mean()) if d.numel() else nan,
            f"{prefix}/teacher_tokens": int(sel.sum())}


def _common(batch: StepBatch, cfg, method: str):
    """(teacher [B, L], has_teacher [B], response_mask [B, L], A_i per row [B])."""
    teacher, has = teacher_fields(batch, method)
    base = batch.episode_advantages(cfg)[batch.traj_index]
    return teacher, has, batch.response_mask.float(), base


def _reweighted(batch: StepBatch, cfg, method: str, only_kind=None) -> CreditOutput:
    teacher, has, mask, base = _common(batch, cfg, method)
    reweight = has[:, None] & mask.bool()
    if only_kind is not None:
        reweight &= segment_kind_mask(batch, only_kind, method)
    lam = rlsd_lambda(batch_step(batch, method), cfg.rlsd_lam, cfg.rlsd_warmdown_steps)
    adv, w = rlsd_token_advantages(base, teacher, batch.old_logp, mask, reweight, lam=lam,
                                   clip_eps=cfg.rlsd_clip_eps)
    sel = reweight & (base != 0)[:, None]
    ws = w[sel]
    nan = float("nan")
    stats = {f"{method}/lambda": lam,
             f"{method}/weight_mean": float(ws.mean()) if ws.numel() else nan,
             f"{method}/clipped_frac": float(((ws <= 1 - cfg.rlsd_clip_eps) |
                                              (ws >= 1 + cfg.rlsd_clip_eps)).float().mean())
             if ws.numel() else nan}
    stats.update(_gap_stats(method, teacher - batch.old_logp, sel))
    return CreditOutput(adv.float(), base, stats=stats)


@register_estimator("rlsd", needs_teacher=True, params=RlsdParams, knob="rlsd_lam")
def rlsd(batch: StepBatch, cfg: RlsdParams) -> CreditOutput:
    """RLSD: every generated token of a row with a teacher is reweighted."""
    return _reweighted(batch, cfg, "rlsd")


@register_estimator("serl", needs_teacher=True, params=RlsdParams, knob="rlsd_lam")
def serl(batch: StepBatch, cfg: RlsdParams) -> CreditOutput:
    """SERL: the RLSD weight on action-segment tokens only; reasoning keeps A_i."""
    return _reweighted(batch, cfg, "serl", only_kind="action")


@register_estimator("opsd", needs_teacher=True, params=OpsdParams, knob="opsd_coef")
def opsd(batch: StepBatch, cfg: OpsdParams) -> CreditOutput:
    """OPSD, sampled-token form, added to GRPO with ``opsd_coef``."""
    teacher, has, mask, base = _common(batch, cfg, "opsd")
    adv = opsd_token_advantages(base, teacher, batch.old_logp, mask, has, coef=cfg.opsd_coef)
    stats = _gap_stats("opsd", teacher - batch.old_logp, has[:, None] & mask.bool())
    return CreditOutput(adv.float(), base, stats=stats)


@register_estimator("sdar", needs_teacher=True, params=SdarParams, knob="sdar_coef")
def sdar(batch: StepBatch, cfg: SdarParams) -> CreditOutput:
    """SDAR: GRPO advantages plus the gated distillation loss term (``AuxLoss``)."""
    teacher, has, mask, base = _common(batch, cfg, "sdar")
    weight = (has[:, None] & mask.bool()).float()            # [B, L] rows with a teacher
    aux = AuxLoss("sdar_distill", cfg.sdar_coef, {"teacher_logp": teacher, "weight": weight},
                  {"beta": cfg.sdar_beta})
    sel = weight.bool()
    gate = sdar_gate(teacher, batch.old_logp, cfg.sdar_beta)[sel]
    nan = float("nan")
    stats = {"sdar/gate_mean": float(gate.mean()) if gate.numel() else nan,
             "sdar/gate_active_frac": float((gate > 0.5).float().mean()) if gate.numel() else nan}
    stats.update(_gap_stats("sdar", teacher - batch.old_logp, sel))
    return CreditOutput(base[:, None] * mask, base, stats=stats, aux_loss=aux)
