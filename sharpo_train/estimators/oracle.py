"""Oracle credit: estimators that read the environment's exact credit labels. A ceiling to
measure credit methods against, never a method (docs/estimators.md, "Oracle credit: a
ceiling, not a method").

An environment with exact labels (``EnvSpec.exact_labels``: the corridor's lamp turns,
envs/corridor/labels.py) lets the trainer put them on the batch before credit
(``batch.credit_labels`` [N][turns]: True = a right move, False = a wrong one,
None = a move that did not matter). Row b (episode i, turn t) gets the label ``y_b`` in
{+1, -1, 0} and GRPO's ``A_i`` (docs/method.md §1). "Credited" rows are the ones the
outcome is about:

    credited(b) = (A_i > 0 and y_b = +1) or (A_i < 0 and y_b = -1)

| method | per-token advantage of row b (every generated token of the row) |
|---|---|
| ``oracle`` | ``A_i`` on credited rows, 0 elsewhere (perfect credit) |
| ``oracle_equal_total`` | ``A_i * s_i`` on credited rows, 0 elsewhere; ``s_i = n_i / c_i`` with n_i / c_i the rollout's generated / credited tokens, so the rollout keeps GRPO's total ``|A_i| * n_i`` |
| ``oracle_free_zero`` | 0 on rows with ``y_b = 0`` (free moves), ``A_i`` elsewhere |
| ``oracle_spare_right`` | 0 on right moves of rollouts with ``A_i < 0``, ``A_i`` elsewhere |
| ``oracle_blame_wrong`` | ``A_i * s_i`` on wrong moves of rollouts with ``A_i < 0``, ``A_i`` elsewhere |

The last three are the oracle's parts: the perfect mask is ``free_zero`` and
``spare_right`` together; ``blame_wrong`` is what the equal-total variant adds to it.

The labels per row and ``teacher.oracle`` (the perfect teacher the scoring phase builds
from the same labels): step/exact_labels.py.
"""
from __future__ import annotations

import torch

from ..step.batch import StepBatch
from ..step.exact_labels import credit_labels, row_labels
from .registry import CreditOutput, GroupParams, register_estimator

PARTS = ("mask", "equal_total", "free_zero", "spare_right", "blame_wrong")


def oracle_token_advantages(base: torch.Tensor, label: torch.Tensor, mask: torch.Tensor,
                            traj_index: torch.Tensor, part: str = "mask") -> torch.Tensor:
    """[B, L] advantages of oracle part ``part`` (module table). base [B] A_i per row,
    label [B] in {+1, -1, 0}, mask [B, L] 0/1 generated tokens, traj_index [B] rollout of
    each row; any float dtype (the result has base's)."""
    if part not in PARTS:
        raise ValueError(f"part: expected one of {list(PARTS)}, got {part!r}")
    mask = mask.to(base.dtype)
    pos, neg = base > 0, base < 0
    right, wrong = label > 0, label < 0
    credited = (pos & right) | (neg & wrong)                                  # [B]
    if part == "free_zero":
        return (base * (label != 0).to(base.dtype))[:, None] * mask
    if part == "spare_right":
        return (base * (~(neg & right)).to(base.dtype))[:, None] * mask
    # s_i = generated tokens / credited tokens of rollout i (0 when nothing is credited)
    n = int(traj_index.max()) + 1 if len(traj_index) else 0
    tokens = mask.sum(1)                                                      # [B]
    total = torch.zeros(n, dtype=base.dtype).index_add_(0, traj_index, tokens)
    cred = torch.zeros(n, dtype=base.dtype).index_add_(0, traj_index,
                                                       tokens * credited.to(base.dtype))
    scale = torch.where(cred > 0, total / cred.clamp_min(1), torch.zeros_like(total))
    s = scale[traj_index]                                                     # [B]
    if part == "mask":
        factor = credited.to(base.dtype)
    elif part == "equal_total":
        factor = credited.to(base.dtype) * s
    else:                                                                     # blame_wrong
        factor = torch.where(neg & wrong, s, torch.ones_like(s))
    return (base * factor)[:, None] * mask


# their names in `sharpo compare` reports (Estimator.label)
ORACLE_LABELS = {"oracle": "Oracle: perfect credit",
                 "oracle_equal_total": "Oracle, equal total |A| per rollout",
                 "oracle_free_zero": "Oracle part: free moves 0",
                 "oracle_spare_right": "Oracle part: right moves of failures unblamed",
                 "oracle_blame_wrong": "Oracle part: wrong moves of failures blamed more"}


def _register(name: str, part: str, doc: str):
    def fn(batch: StepBatch, cfg: GroupParams) -> CreditOutput:
        labels = credit_labels(batch, name)
        base = batch.episode_advantages(cfg)[batch.traj_index]
        label = row_labels(batch, labels)
        adv = oracle_token_advantages(base, label, batch.response_mask, batch.traj_index, part)
        kept = adv.abs().sum() / (base.abs()[:, None] * batch.response_mask).sum().clamp_min(1e-12)
        return CreditOutput(adv, base, stats={f"{name}/abs_ratio_to_grpo": float(kept)})
    fn.__name__ = name
    fn.__doc__ = doc
    register_estimator(name, params=GroupParams, needs_labels=True, label=ORACLE_LABELS[name])(fn)


_register("oracle", "mask", "Perfect credit: A_i on the moves the outcome is about only.")
_register("oracle_equal_total", "equal_total",
          "Perfect credit rescaled to GRPO's total |A_i| per rollout.")
_register("oracle_free_zero", "free_zero", "GRPO with the free moves' advantage zeroed.")
_register("oracle_spare_right", "spare_right",
          "GRPO without blame on the right moves of failed rollouts.")
_register("oracle_blame_wrong", "blame_wrong",
          "GRPO with the wrong moves of failed rollouts blamed as the equal-total oracle does.")

ORACLE_METHODS = ("oracle", "oracle_equal_total", "oracle_free_zero", "oracle_spare_right",
                  "oracle_blame_wrong")
