"""SHARPO inside verl-agent's ``RayPPOTrainer.fit()`` (docs/integrations.md, "verl-agent").

verl-agent (github.com/langfengQ/verl-agent) trains with its own fork of verl (DataProto
batches, legacy ``RayPPOTrainer``). Its rollout (``TrajectoryCollector.gather_rollout_data``)
emits one row per environment step, episode by episode, steps in order; non-tensor ``uid``
names the group, ``traj_uid`` the episode, ``episode_rewards`` the episode's summed
environment reward. Then ``fit()`` changes the rows before the advantage:

- ``adjust_batch`` appends copies of random rows so the batch divides the worker group;
- ``_balance_batch`` (``trainer.balance_batch``, on by default) reorders every row;
- ``apply_invalid_action_penalty`` (on in verl-agent's examples) subtracts
  ``invalid_action_penalty_coef`` from the reward of each step with an invalid action, so
  the rows of one episode carry different rewards.

Two calls, placed by configs/verl_agent/ray_trainer.patch:

- ``mark_rows(batch)`` right after the rollout: non-tensor ``sharpo_row`` [B] int64 = the
  row's position in episode/step order. Copies carry their original's mark, reordering
  moves it.
- ``sharpo_advantage(trainer, batch)`` in place of ``compute_advantage``: takes each marked
  row once, in mark order (so a peer's hint lists its steps in order, none repeated), builds
  the teacher batch there, scores the rows that have a teacher with one
  ``trainer.actor_rollout_wg.compute_log_prob`` call (no grad, the old policy), computes
  SHARPO over those unique rows (``verl.compute_sharpo_advantage``: A_i is verl-agent's own
  ``core_algos.compute_grpo_outcome_advantage`` over episode outcomes, each episode once)
  and writes ``advantages`` = ``returns`` [B, T] back to every row, copies included.

Rewards (docs/method.md §1, §4): the episode outcome is ``episode_rewards`` (success:
outcome >= ``success_threshold``; A_i from outcomes). The per-step penalty p_r = the row's
``token_level_rewards`` sum minus its outcome (-coef on an invalid step, 0 otherwise) is kept
as verl-agent applies it, on that step only: p_r is added to every response token of row r,
after the segment weighting (it is a per-step term, not an episode outcome to redistribute).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from sharpo_kernels import SharpoCoefficients
from sharpo_train.integrations.verl import (build_segment_ids, build_teacher_batch,
                                            compute_sharpo_advantage, sharpo_settings)

ROW_KEY = "sharpo_row"
_NEEDS_TENSORS = ("prompts", "responses", "attention_mask", "response_mask", "token_level_rewards",
                  "old_log_probs")
_NEEDS_NON_TENSORS = ("uid", "traj_uid", "episode_rewards")
_TEACHER_FIELDS = ("input_ids", "attention_mask", "position_ids", "responses", "prompts")


def mark_rows(batch):
    """Mark each row of a fresh rollout with its position (non-tensor ``sharpo_row``
    [B] int64). Call before ``adjust_batch`` and ``_balance_batch``. Returns ``batch``."""
    batch.non_tensor_batch[ROW_KEY] = np.arange(len(batch), dtype=np.int64)
    return batch


def unique_rows(marks) -> tuple[np.ndarray, np.ndarray]:
    """[B] marks -> (first [U]: batch position of each distinct mark, in mark order;
    back [B]: each row's index into ``first``)."""
    marks = np.asarray(marks)
    if marks.ndim != 1 or marks.dtype.kind not in "iu":
        raise ValueError(f"{ROW_KEY}: expected [B] integer marks from mark_rows, got dtype {marks.dtype} "
                         f"shape {marks.shape}")
    _, first, back = np.unique(marks, return_index=True, return_inverse=True)
    return first, back.reshape(-1)


def _get(cfg, path: str, default):
    for part in path.split("."):
        if cfg is None or not hasattr(cfg, "get"):
            return default
        cfg = cfg.get(part, None)
    return default if cfg is None else cfg


def _check_batch(batch) -> None:
    for key in _NEEDS_TENSORS:
        if key not in batch.batch.keys():
            raise ValueError(f"{key}: missing from batch.batch (sharpo_advantage runs after old log-probs "
                             f"and rewards, where compute_advantage ran)")
    for key in _NEEDS_NON_TENSORS:
        if key not in batch.non_tensor_batch:
            raise ValueError(f"{key}: missing from batch.non_tensor_batch (verl-agent's rollout sets it)")
    if ROW_KEY not in batch.non_tensor_batch:
        raise ValueError(f"{ROW_KEY}: missing from batch.non_tensor_batch: call "
                         "sharpo_train.integrations.verl_agent.mark_rows(batch) right after the rollout, "
                         "before adjust_batch and _balance_batch (configs/verl_agent/ray_trainer.patch)")
    if "multi_modal_inputs" in batch.non_tensor_batch:
        raise ValueError("multi_modal_inputs: adv_estimator=sharpo supports text-only batches")


def _check_rewards(outcome: torch.Tensor, step_reward: torch.Tensor, traj_uid, first) -> None:
    """episode_rewards [U] finite and one value per episode, token_level_rewards row sums
    [U] finite: ValueError naming the field and the batch row (a NaN here would otherwise
    reach the advantages of its episode, or be reported as another field's fault)."""
    for name, values in (("episode_rewards", outcome), ("token_level_rewards", step_reward)):
        bad = ~torch.isfinite(values)
        if bool(bad.any()):
            u = int(bad.nonzero()[0, 0])
            raise ValueError(f"{name}: non-finite value {float(values[u])} in batch row {int(first[u])} "
                             f"(traj_uid {traj_uid[u]!r}); rewards must be finite")
    seen: dict = {}
    for u, (t, r) in enumerate(zip(traj_uid.tolist(), outcome.tolist())):
        if seen.setdefault(t, (u, r))[1] != r:
            raise ValueError(f"episode_rewards: rows of traj_uid {t!r} carry different episode rewards "
                             f"({seen[t][1]} in batch row {int(first[seen[t][0]])}, {r} in row {int(first[u])})")


def _score_teacher_rows(worker_group, teacher, rows: list[int], width: int) -> torch.Tensor:
    """[len(rows), width] fp32 log-probs of the response tokens under the teacher prompts,
    by one ``compute_log_prob`` call. The call's batch repeats rows up to a multiple of the
    worker group's size (its dispatch splits the batch evenly); the repeats are dropped."""
    world = max(int(getattr(worker_group, "world_size", 1) or 1), 1)
    padded = rows + [rows[i % len(rows)] for i in range(-len(rows) % world)]
    idx = torch.tensor(padded, dtype=torch.long)
    proto = type(teacher).from_dict(tensors={k: teacher.batch[k][idx] for k in _TEACHER_FIELDS})
    out = worker_group.compute_log_prob(proto).batch["old_log_probs"]
    if tuple(out.shape) != (len(padded), width):
        raise ValueError(f"compute_log_prob: expected old_log_probs of shape {(len(padded), width)}, "
                         f"got {tuple(out.shape)}")
    return out[:len(rows)].float()


def sharpo_advantage(trainer, batch) -> tuple[Any, dict[str, float]]:
    """SHARPO's advantage step for verl-agent's ``fit()``; returns (batch, metrics).

    ``trainer`` is the ``RayPPOTrainer`` (reads ``config``, ``tokenizer``,
    ``actor_rollout_wg``). ``batch`` is the step's DataProto after old log-probs and rewards:
    tensors ``prompts`` [B, P] (left-padded), ``responses`` [B, T], ``attention_mask``
    [B, P+T], ``response_mask`` [B, T], ``token_level_rewards`` [B, T], ``old_log_probs``
    [B, T]; non-tensors ``uid``, ``traj_uid``, ``episode_rewards``, ``sharpo_row``.
    Writes ``advantages`` and ``returns`` [B, T] fp32. Metrics are ``sharpo/*`` floats.
    """
    config = trainer.config
    if _get(config, "algorithm.use_kl_in_reward", False):
        raise ValueError("algorithm.use_kl_in_reward: not supported with adv_estimator=sharpo")
    if _get(config, "actor_rollout_ref.rollout.multi_turn.enable", False):
        raise ValueError("actor_rollout_ref.rollout.multi_turn.enable: not supported with adv_estimator=sharpo "
                         "(verl-agent's environment loop already makes one row per step)")
    cfg = sharpo_settings(config.algorithm, _get(config, "data.max_prompt_length", None))
    _check_batch(batch)
    b, nt = batch.batch, batch.non_tensor_batch
    first, back = unique_rows(nt[ROW_KEY])
    idx, back_t = torch.as_tensor(first, dtype=torch.long), torch.as_tensor(back, dtype=torch.long)
    responses_all = b["responses"]
    if not torch.equal(responses_all, responses_all[idx][back_t]) or \
            any(not np.array_equal(np.asarray(nt[k])[first][back], np.asarray(nt[k])) for k in ("uid", "traj_uid")):
        raise ValueError(f"{ROW_KEY}: rows with one mark differ; mark_rows must run on the fresh rollout, "
                         "before rows are copied or reordered")

    # the distinct rows in episode/step order: [U, ...]
    P, T = b["prompts"].shape[1], responses_all.shape[1]
    prompt_mask = b["attention_mask"][idx, :P].bool()
    resp_mask = b["response_mask"][idx]
    prompts = [p[m].tolist() for p, m in zip(b["prompts"][idx], prompt_mask)]
    responses = [r[m.bool()].tolist() for r, m in zip(responses_all[idx], resp_mask)]
    uid = np.asarray(nt["uid"], dtype=object)[first]
    traj_uid = np.asarray(nt["traj_uid"], dtype=object)[first]
    try:
        outcome = torch.as_tensor(np.asarray(nt["episode_rewards"], dtype=np.float64)[first], dtype=torch.float32)
    except (TypeError, ValueError):
        raise ValueError("episode_rewards: expected one number per row") from None
    _check_rewards(outcome, b["token_level_rewards"][idx].float().sum(-1), traj_uid, first)
    penalty = b["token_level_rewards"][idx].float().sum(-1) - outcome          # [U]

    teacher = build_teacher_batch(
        trainer.tokenizer, prompts, responses, uid, traj_uid, outcome.tolist(),
        max_prompt_length=cfg["max_teacher_prompt_length"], max_hint_tokens=cfg["max_hint_tokens"],
        success_threshold=cfg["success_threshold"], hint_template=cfg["hint_template"], response_width=T)
    has_teacher = teacher.batch["sharpo_has_teacher"]
    teacher_lp = torch.zeros(len(first), T)
    rows = torch.nonzero(has_teacher).flatten().tolist()
    if rows:
        teacher_lp[rows] = _score_teacher_rows(trainer.actor_rollout_wg, teacher, rows, T)

    # outcome-only rewards: compute_sharpo_advantage reads the row sum as the episode reward
    outcome_rewards = torch.zeros(len(first), T)
    outcome_rewards[:, 0] = outcome
    view = type(batch).from_dict(
        tensors={"token_level_rewards": outcome_rewards, "response_mask": resp_mask,
                 "old_log_probs": b["old_log_probs"][idx].float(), "teacher_log_probs": teacher_lp,
                 "sharpo_segment_ids": build_segment_ids(trainer.tokenizer, responses, T),
                 "sharpo_has_teacher": has_teacher},
        non_tensors={"uid": uid, "traj_uid": traj_uid})
    view = compute_sharpo_advantage(
        view, SharpoCoefficients.of(cfg), norm_adv_by_std=bool(_get(config, "algorithm.norm_adv_by_std_in_grpo", True)))
    adv = view.batch["advantages"] + penalty[:, None] * resp_mask.float()        # [U, T]

    b["advantages"] = adv[back_t]
    b["returns"] = adv[back_t].clone()
    metrics = dict(view.meta_info["sharpo_metrics"])
    metrics["sharpo/teacher_rows"] = float(len(rows))
    metrics["sharpo/copied_rows"] = float(len(back) - len(first))
    metrics["sharpo/penalty_mean"] = float(penalty.mean()) if len(first) else 0.0
    return batch, metrics
