"""The registered estimator a TRL run names (``SharpoConfig.estimator``; docs/integrations.md,
"another estimator"), asked what the trainer asks it (estimators/registry.py):

- ``estimator_and_params(config)``: the named estimator and its params. SHARPO's are the
  config's own fields (lam, alpha, ...: the kernel's coefficients); another estimator's are
  its params dataclass built from ``config.estimator_params`` (a dict, or JSON object text
  from the command line) and validated. An unknown name or key is a ValueError naming the
  field with the closest name.
- ``trl_step_batch(...)``: one TRL generation batch as the ``StepBatch`` the trainer gives
  an estimator (step/batch.py): one completion = one trajectory of one row, groups of
  ``num_generations``, A_i = TRL's own GRPO advantage (its ``scale_rewards``: so
  ``norm_std`` / ``eps`` are TRL's settings here, not the estimator's; docs/method.md §1).

The drop-in then calls ``Estimator.needs_teacher(params)`` (whether the teacher pass runs)
and ``Estimator.fn(batch, params)`` (the [B, T] advantages TRL's loss reads), as
loops/trainer.py does.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from sharpo_train.errors import did_you_mean
from sharpo_train.estimators import Estimator, GroupParams
from sharpo_train.integrations.common import named_estimator
from sharpo_train.step.batch import StepBatch

SHARPO = "sharpo"                  # the default: SharpoConfig's own fields are its params
TRL_OWNED = tuple(f.name for f in dataclasses.fields(GroupParams))   # A_i's: TRL's scale_rewards


def estimator_and_params(config) -> tuple[Estimator, object]:
    """(``ESTIMATORS[config.estimator]``, its params) for a SharpoConfig ``config``
    (``estimator``, ``estimator_params``): ValueError/TypeError naming the field."""
    est = named_estimator(config.estimator, "estimator")
    given = {} if config.estimator_params is None else config.estimator_params
    if not isinstance(given, dict):
        raise TypeError(f"estimator_params: expected a dict (or JSON object text), got "
                        f"{type(given).__name__} {given!r}")
    if config.estimator == SHARPO:
        if given:
            raise ValueError(f"estimator_params: SHARPO's settings are SharpoConfig's own fields "
                             f"(lam, alpha, tau, ...), got {sorted(given)}")
        return est, config
    if est.needs_labels:
        raise ValueError(f"estimator: {config.estimator!r} reads the environment's exact credit "
                         "labels, which a TRL run does not have")
    known = [f.name for f in dataclasses.fields(est.params) if f.init]
    for key in given:
        if key in TRL_OWNED:
            raise ValueError(f"estimator_params: {key!r} is TRL's here: A_i is TRL's own GRPO "
                             "advantage (set scale_rewards)")
        if key not in known:
            raise ValueError(f"estimator_params: estimator {config.estimator!r} has no key "
                             f"{key!r}{did_you_mean(key, known)}; its keys: {known}")
    params = est.params(**given)
    check = getattr(params, "validate", None)
    if callable(check):
        try:
            check()
        except ValueError as exc:            # ConfigError "key: expected ..." of the params
            raise ValueError(f"estimator_params.{exc}") from None
    return est, params


def trl_step_batch(params, *, rewards: torch.Tensor, base: torch.Tensor, group_size: int,
                   loss_mask: torch.Tensor, segment_ids: torch.Tensor, prompts: list,
                   completions: list, student: torch.Tensor, teacher: torch.Tensor,
                   has_teacher: torch.Tensor, entropy: Optional[torch.Tensor],
                   step: int) -> StepBatch:
    """The ``StepBatch`` of one TRL generation batch of B completions (CPU tensors):
    rewards [B] (the weighted total), base [B] TRL's A_i, loss_mask / segment_ids /
    student / teacher / entropy [B, T], has_teacher [B] bool; prompts / completions [B]
    token lists; ``step`` the training step (1, 2, ...)."""
    def cpu(t: torch.Tensor) -> torch.Tensor:
        return t.detach().cpu()

    B = int(rewards.shape[0])
    batch = StepBatch(rewards=cpu(rewards).float(),
                      group_of=torch.arange(B, dtype=torch.long) // group_size,
                      traj_index=torch.arange(B, dtype=torch.long),
                      response_mask=cpu(loss_mask).float(), segment_ids=cpu(segment_ids).long(),
                      prompt_ids=list(prompts), response_ids=list(completions), turn=[0] * B)
    # A_i is TRL's: episode_advantages(params) reads it back at the params' own (norm_std, eps)
    batch.episode_adv = cpu(base).float()
    batch.episode_adv_norm = (params.norm_std, params.eps)
    batch.old_logp, batch.teacher_logp = cpu(student).float(), cpu(teacher).float()
    batch.has_teacher = cpu(has_teacher).bool()
    batch.old_entropy = None if entropy is None else cpu(entropy).float()
    batch.step = step
    return batch
