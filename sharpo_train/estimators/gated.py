"""Gated credit from SHARPO's own teacher (issue 49; docs/estimators.md, "Gated credit";
docs/method.md §4 for the teacher and its gap), and the two controls that go with it.

Notation (B rows, one per turn; N rollouts): delta = teacher minus student log-prob of a
sampled token (the teacher: the student with a successful peer's hint, docs/method.md §3).

    D_b  = SUM of delta over row b's action tokens (not the mean: a door the teacher
           rejects counts in full, however long the reply around it)
    D~_b = D_b - median of D over the rows of b's rollout (the hint shifts every segment
           of a rollout one way; the median takes that offset out)

A_i is GRPO's group-relative advantage of row b's rollout (§1); every generated token of a
row gets the row's advantage. Rollouts without a teacher (no successful peer) keep A_i.

| method | advantage of row b |
|---|---|
| ``gated`` (R1) | A_i when sign(A_i) * D~_b > theta, else 0 |
| ``gated_pooled`` (R2) | a turn index t of group g is decisive when the mean of abs(D~) over the group's rows at t exceeds kappa * the median of those means over the group's turns; R1 on decisive turns, 0 on the others (a row without a teacher at a decisive turn keeps A_i: a lone success gets its decisive rows credited) |
| ``gated_soft`` (R3) | A_i * w_b, w_b = clip(sign(A_i) * D~_b / theta, 0, 1): segment_advantage's form at lambda = 1 with the length factor rho = 1 (silence and the hint's offset give w = 0) |
| ``random_mask`` (control a) | per step, R1's number of kept rows among the rows it gates (a teacher, A_i != 0), kept at random among those rows; the others 0 |
| ``grpo_step_matched`` (control b) | GRPO's; the arm sets its own ``optim.lr`` (``grpo_step_matched@optim.lr=X``): the learning rate whose mean ``update_norm`` per step matches the oracle's in that cell (under AdamW a scale on the advantage does not change the step) |

Diagnostics each returns (metrics line): ``gated/kept_rows`` (the share of rows with
A_i != 0 whose advantage is not 0), ``gated/kept_rows_oracle`` (the oracle's share on the
same batch, where the environment has exact labels), ``gated/decisive_turns`` (R2).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..settings.loader import in_range, setting
from ..step.batch import StepBatch, segment_kind_mask
from ..step.exact_labels import row_labels
from .grpo import grpo
from .oracle import oracle_token_advantages
from .inputs import batch_step, teacher_fields
from .registry import CreditOutput, GroupParams, register_estimator

__all__ = ["GatedParams", "PooledParams", "SoftParams", "RandomMaskParams", "row_gap_sums",
           "offset_free_gaps", "gate_keep", "pooled_keep", "soft_weights", "random_keep"]


@dataclass
class GatedParams(GroupParams):
    """theta of R1 / R3 (and of the R1 mask whose size control (a) copies); chosen once on
    the default corridor size, RL seeds 100-102 (benchmarks/results/gated.md)."""
    gate_theta: float = setting(-0.25, "gated rules: theta, the margin sign(A_i) * D~_b must "
                                "exceed (R1, R2, and the R1 mask of random_mask), in nats "
                                "summed over a row's action tokens; -0.25 chosen on "
                                "t10-d3-full-sft2, RL seeds 100-102 "
                                "(benchmarks/results/gated.md)")

    def validate(self) -> None:
        super().validate()
        in_range(self, "gate_theta", -100, 100)


@dataclass
class PooledParams(GatedParams):
    gate_kappa: float = setting(1.5, "gated_pooled: a turn is decisive when its group mean "
                                "|D~| exceeds gate_kappa times the group's median (1.5: "
                                "chosen with gate_theta)")

    def validate(self) -> None:
        super().validate()
        in_range(self, "gate_kappa", 0, 100)


@dataclass
class SoftParams(GroupParams):
    gate_soft_theta: float = setting(1.0, "gated_soft: theta of R3's weight clip(sign(A_i) * "
                                     "D~_b / theta, 0, 1), > 0 (not chosen by the selection: "
                                     "R3 is not judged)")

    def validate(self) -> None:
        super().validate()
        in_range(self, "gate_soft_theta", 0, 100, lo_open=True)


@dataclass
class RandomMaskParams(GatedParams):
    mask_seed: int = setting(0, "random_mask: seed of the mask's generator (with the step)")

    def validate(self) -> None:
        super().validate()
        in_range(self, "mask_seed", 0, 2 ** 31 - 1)


# ------------------------------------------------------------------ the pieces (pure)

def row_gap_sums(teacher: torch.Tensor, student: torch.Tensor,
                 action_mask: torch.Tensor) -> torch.Tensor:
    """[B] D_b: the sum of teacher - student log-probs over the row's action tokens
    (teacher, student [B, L] float, action_mask [B, L] bool)."""
    if teacher.shape != student.shape or teacher.shape != action_mask.shape:
        raise ValueError(f"teacher, student, action_mask: expected one shape [B, L], got "
                         f"{tuple(teacher.shape)}, {tuple(student.shape)}, "
                         f"{tuple(action_mask.shape)}")
    delta = (teacher.double() - student.double()) * action_mask
    return delta.sum(1)


def offset_free_gaps(gaps: torch.Tensor, traj_index: torch.Tensor) -> torch.Tensor:
    """[B] D~_b = D_b minus the median of D over the rows of b's rollout (the median of an
    even count: the mean of the middle two)."""
    out = torch.empty_like(gaps)
    for i in torch.unique(traj_index).tolist():
        rows = traj_index == i
        v = gaps[rows].sort().values
        n = len(v)
        med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
        out[rows] = gaps[rows] - med
    return out


def gate_keep(base: torch.Tensor, gaps: torch.Tensor, has_teacher: torch.Tensor,
              theta: float) -> torch.Tensor:
    """[B] bool, R1: keep row b when its rollout has no teacher or sign(A_i) * D~_b > theta."""
    return ~has_teacher | (torch.sign(base.double()) * gaps > theta)


def pooled_keep(base: torch.Tensor, gaps: torch.Tensor, has_teacher: torch.Tensor,
                group: torch.Tensor, turn: torch.Tensor, theta: float,
                kappa: float) -> tuple[torch.Tensor, torch.Tensor]:
    """([B] bool keep, [B] bool decisive), R2: per group, the mean |D~| over its teacher rows
    at each turn index; a turn is decisive when that mean exceeds kappa * the median of the
    group's turn means. Decisive turns: R1 (a row without a teacher keeps A_i); other turns:
    dropped. A group without a teacher row has nothing to pool and keeps every row."""
    keep = torch.ones(len(base), dtype=torch.bool)
    decisive = torch.zeros(len(base), dtype=torch.bool)
    r1 = gate_keep(base, gaps, has_teacher, theta)
    for g in torch.unique(group).tolist():
        in_g = group == g
        taught = in_g & has_teacher
        if not bool(taught.any()):
            continue
        turns = torch.unique(turn[taught])
        means = torch.stack([gaps[taught & (turn == t)].abs().mean() for t in turns])
        v = means.sort().values
        n = len(v)
        med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
        for t, m in zip(turns.tolist(), means):
            at = in_g & (turn == t)
            decisive[at] = bool(m > kappa * med)
        # a turn index where no row of the group had a teacher: nothing says it matters
        decisive[in_g & ~torch.isin(turn, turns)] = False
        keep[in_g] = decisive[in_g] & r1[in_g]
    return keep, decisive


def soft_weights(base: torch.Tensor, gaps: torch.Tensor, has_teacher: torch.Tensor,
                 theta: float) -> torch.Tensor:
    """[B] float64 R3 weights: clip(sign(A_i) * D~_b / theta, 0, 1), 1 without a teacher."""
    if not theta > 0:
        raise ValueError(f"estimator.gate_soft_theta: gated_soft divides by it; expected > 0, "
                         f"got {theta!r}")
    w = (torch.sign(base.double()) * gaps / theta).clamp(0, 1)
    return torch.where(has_teacher, w, torch.ones_like(w))


def random_keep(keep: torch.Tensor, eligible: torch.Tensor,
                generator: torch.Generator) -> torch.Tensor:
    """[B] bool: as many of the ``eligible`` rows kept as ``keep`` keeps among them, chosen
    uniformly at random; rows not eligible keep their ``keep``."""
    idx = torch.nonzero(eligible).flatten()
    k = int((keep & eligible).sum())
    out = keep & ~eligible
    chosen = idx[torch.randperm(len(idx), generator=generator)[:k]]
    out[chosen] = True
    return out


# ------------------------------------------------------------------ the estimators

def _inputs(batch: StepBatch, params: GroupParams, method: str):
    """(A_i per row [B] fp32, D~ [B] float64, has_teacher [B] bool) of the batch."""
    base = batch.episode_advantages(params)[batch.traj_index]
    teacher, has_teacher = teacher_fields(batch, method)
    action = segment_kind_mask(batch, "action", method)
    gaps = offset_free_gaps(row_gap_sums(teacher, batch.old_logp, action), batch.traj_index)
    return base, gaps, has_teacher


def _output(batch: StepBatch, base: torch.Tensor, factor: torch.Tensor, extra=None
            ) -> CreditOutput:
    """Row factor [B] -> CreditOutput with the kept-row shares (module docstring)."""
    adv = (base.double() * factor.double()).float()[:, None] * batch.response_mask.float()
    moving = base != 0
    stats = {"gated/kept_rows": float((factor[moving] != 0).float().mean())
             if bool(moving.any()) else 0.0}
    if batch.credit_labels is not None:
        label = row_labels(batch, batch.credit_labels)
        ones = torch.ones(len(base), 1)
        credited = oracle_token_advantages(base, label, ones, batch.traj_index)[:, 0] != 0
        stats["gated/kept_rows_oracle"] = (float(credited[moving].float().mean())
                                           if bool(moving.any()) else 0.0)
    stats.update(extra or {})
    return CreditOutput(adv, base, stats=stats)


@register_estimator("gated", needs_teacher=True, params=GatedParams, label="Gated (R1)")
def gated(batch: StepBatch, cfg: GatedParams) -> CreditOutput:
    """R1: A_i where sign(A_i) * D~_b > theta, else 0 (module table)."""
    base, gaps, has_teacher = _inputs(batch, cfg, "gated")
    return _output(batch, base, gate_keep(base, gaps, has_teacher, cfg.gate_theta))


@register_estimator("gated_pooled", needs_teacher=True, params=PooledParams,
                    label="Gated, pooled (R2)")
def gated_pooled(batch: StepBatch, cfg: PooledParams) -> CreditOutput:
    """R2: R1 on the group's decisive turn indices, 0 elsewhere (module table)."""
    base, gaps, has_teacher = _inputs(batch, cfg, "gated_pooled")
    group = batch.group_of[batch.traj_index]
    turn = torch.as_tensor(batch.turn, dtype=torch.long)
    keep, decisive = pooled_keep(base, gaps, has_teacher, group, turn, cfg.gate_theta,
                                 cfg.gate_kappa)
    return _output(batch, base, keep,
                   {"gated/decisive_turns": float(decisive.float().mean()) if len(base) else 0.0})


@register_estimator("gated_soft", needs_teacher=True, params=SoftParams,
                    label="Gated, soft (R3)")
def gated_soft(batch: StepBatch, cfg: SoftParams) -> CreditOutput:
    """R3: A_i * clip(sign(A_i) * D~_b / theta, 0, 1) (module table)."""
    base, gaps, has_teacher = _inputs(batch, cfg, "gated_soft")
    return _output(batch, base, soft_weights(base, gaps, has_teacher, cfg.gate_soft_theta))


@register_estimator("random_mask", needs_teacher=True, params=RandomMaskParams,
                    label="Random mask (R1's kept share)")
def random_mask(batch: StepBatch, cfg: RandomMaskParams) -> CreditOutput:
    """Control (a): R1's kept count among its gated rows, at random rows (module table)."""
    base, gaps, has_teacher = _inputs(batch, cfg, "random_mask")
    eligible = has_teacher & (base != 0)
    gen = torch.Generator().manual_seed(cfg.mask_seed * 1_000_003 + batch_step(batch, "random_mask"))
    keep = random_keep(gate_keep(base, gaps, has_teacher, cfg.gate_theta), eligible, gen)
    return _output(batch, base, keep)


@register_estimator("grpo_step_matched", params=GroupParams, label="GRPO, step matched")
def grpo_step_matched(batch: StepBatch, cfg: GroupParams) -> CreditOutput:
    """Control (b): GRPO's advantages; its arm sets ``optim.lr`` (module table)."""
    return grpo(batch, cfg)
