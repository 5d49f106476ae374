"""SHARPO inside verl-agent's ``RayPPOTrainer.fit()`` (docs/integrations.md, "verl-agent").

verl-agent (github.com/langfengQ/verl-agent) trains with its own fork of verl (DataProto
batches, legacy ``RayPPOTrainer``). Its rollout (``TrajectoryCollector.gather_rollout_data``)
emits one row per environment step, episode by episode, steps in order; non-tensor ``uid``
names the group, ``traj_uid`` the episode, ``episode_rewards`` the episode's summed
environment reward, ``anchor_obs`` the observation text the step was taken in. Then
``fit()`` changes the rows before the advantage:

- ``adjust_batch`` appends copies of random rows so the batch divides the worker group;
- ``_balance_batch`` (``trainer.balance_batch``, on by default) reorders every row;
- ``apply_invalid_action_penalty`` (on in verl-agent's examples) subtracts
  ``invalid_action_penalty_coef`` from the reward of each step with an invalid action, so
  the rows of one episode carry different rewards.

SHARPO starts from verl-agent's own advantage (``algorithm.sharpo.base``, default ``grpo``;
``gigpo``): fit() runs verl-agent's ``compute_advantage`` with the base estimator, exactly
as it would for ``adv_estimator=grpo`` / ``gigpo`` (step rows, copies included, the
invalid-action penalty inside), and SHARPO rescales that advantage per segment
(docs/method.md §4 with each row's base advantage as A_i). ``lam = 0`` leaves it untouched
and scores no teacher. ``base=episode_grpo`` is the named alternative: GRPO over episode
outcomes, each episode counted once, a group of one episode 0 (docs/method.md §1), the
invalid-action penalty added on its own step after the weighting.

Calls placed by configs/verl_agent/ray_trainer.patch:

- right after the rollout: ``mark_rows(batch)`` (non-tensor ``sharpo_row`` [B] int64 = the
  row's position in episode/step order; copies carry their original's mark, reordering
  moves it) and ``base_estimator(config)``: the estimator fit() then runs (its GiGPO step
  returns included) in place of ``sharpo``;
- after ``compute_advantage``: ``sharpo_advantage(trainer, batch)``: takes each marked row
  once, in mark order (a peer's hint lists its steps in order, none repeated), builds the
  teacher batch there, scores the rows that have a teacher with one
  ``trainer.actor_rollout_wg.compute_log_prob`` call (no grad, the old policy), reweights
  the base per segment and writes ``advantages`` = ``returns`` [B, T] back to every row,
  copies included.

The hint (docs/method.md §3) is the successful peer's steps in order, each its action (the
reply's last ``<action>...</action>``) with the observation that followed it: the next
step's ``anchor_obs`` (none after the peer's last step; actions only when the rollout
carries no text ``anchor_obs``).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from sharpo_kernels import SharpoCoefficients, segment_advantage
from sharpo_train.envs.turn_prompt import parse_action
from sharpo_train.hint import render_lines
from sharpo_train.integrations import engine_settings
from sharpo_train.integrations.engine_settings import AGENT_KEYS, BASES, _get, agent_settings  # noqa: F401
from sharpo_train.integrations.verl import build_segment_ids, build_teacher_batch, episode_advantages
from sharpo_train.integrations.common import teacher_pass
from sharpo_train.estimators.sharpo_stats import lam_zero_stats, sharpo_step_stats

ROW_KEY = "sharpo_row"
_NEEDS_TENSORS = ("prompts", "responses", "attention_mask", "response_mask", "token_level_rewards",
                  "old_log_probs", "advantages")
_NEEDS_NON_TENSORS = ("uid", "traj_uid", "episode_rewards")
_TEACHER_FIELDS = ("input_ids", "attention_mask", "position_ids", "responses", "prompts")


def check_config(config, engine: str = "verl-agent") -> dict[str, Any]:
    """What the patched ``RayPPOTrainer.__init__`` runs (configs/verl_agent/ray_trainer.patch),
    before any worker or model starts: ``engine_settings.check_config`` (the settings, a typo
    refused by name) and, for the DictConfig of a run, ``fused_kernels_setup``: with
    ``algorithm.sharpo.fused_logprobs`` (default true) ``use_fused_kernels`` and the torch
    backend go on, so the actor's, reference's and teacher's log-prob passes run through
    sharpo's kernel (fused_verl.py; the workers need ``sharpo_train.integrations.verl.register``
    as their ``worker_process_setup_hook``). Returns the settings."""
    cfg = engine_settings.check_config(config, engine)
    if hasattr(config, "_get_node"):                 # an OmegaConf config, not a plain dict of overrides
        engine_settings.fused_kernels_setup(config, cfg, engine)
    return cfg


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


def base_estimator(config) -> str:
    """The verl-agent advantage estimator fit() runs for ``adv_estimator=sharpo``: ``grpo``
    or ``gigpo`` (``algorithm.sharpo.base``; ``episode_grpo`` runs ``grpo``, which
    sharpo_advantage then replaces). Checks every ``algorithm.sharpo.*`` key."""
    base = agent_settings(config)["base"]
    return "grpo" if base == "episode_grpo" else base


def _check_batch(batch) -> None:
    for key in _NEEDS_TENSORS:
        if key not in batch.batch.keys():
            raise ValueError(f"{key}: missing from batch.batch (sharpo_advantage runs after verl-agent's "
                             f"compute_advantage with the base estimator; configs/verl_agent/ray_trainer.patch)")
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


def engine_row_advantages(adv: torch.Tensor, mask: torch.Tensor, first, back, base: str) -> torch.Tensor:
    """[B, T] advantages verl-agent's base estimator wrote -> [U] the one value of each
    distinct row (at its first response token; 0 for a row without one). ValueError when a
    row's tokens differ or copies of one row differ (then it is no outcome-style base)."""
    on = mask.bool()                                                   # [B, T]
    at = on.float().argmax(-1, keepdim=True)                           # [B, 1]
    row = adv.float().gather(1, at)[:, 0] * on.any(-1)                 # [B]
    if bool(((adv.float() - row[:, None]) * on).ne(0).any()):
        raise ValueError(f"advantages: verl-agent's {base} advantage differs between the tokens of one row; "
                         "SHARPO needs one base advantage per row")
    uniq = row[torch.as_tensor(first, dtype=torch.long)]
    if not torch.equal(uniq[torch.as_tensor(back, dtype=torch.long)], row):
        raise ValueError(f"advantages: copies of one row got different {base} advantages")
    return uniq


def episode_grpo_advantages(outcome: torch.Tensor, uid, traj_uid, norm_adv_by_std: bool) -> torch.Tensor:
    """[U] A_i of each distinct row's episode: GRPO over episode outcomes, each episode once
    (verl-agent's own GRPO over one row per episode), a group of one episode 0 (§1)."""
    rewards = torch.zeros(len(outcome), 1)
    rewards[:, 0] = outcome
    traj_index, a_ep, _, group = episode_advantages(rewards, uid, traj_uid, norm_adv_by_std=norm_adv_by_std)
    alone = torch.bincount(group)[group] == 1                         # [N] only episode of its group
    return torch.where(alone, torch.zeros_like(a_ep), a_ep)[traj_index]


def peer_steps(responses: list[str], anchors: Optional[list]) -> list[tuple[Optional[str], str]]:
    """A peer episode's steps as (action, observation after it): the action of each reply
    (None: invalid), the next step's observation (text ``anchor_obs``), "" after the last."""
    steps = []
    for k, text in enumerate(responses):
        after = anchors[k + 1] if anchors is not None and k + 1 < len(anchors) else ""
        steps.append((parse_action(text), after if isinstance(after, str) else ""))
    return steps


def render_peer(steps, max_observation_chars: int) -> str:
    """The hint's body (the ``{hint}`` of the template): one numbered line per step, its
    action and the observation that followed it (docs/method.md §3; sharpo_train/hint.py)."""
    return render_lines(steps, max_observation_chars)


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
    """SHARPO's advantage step for verl-agent's ``fit()``, after ``compute_advantage`` ran
    with ``base_estimator(config)``; returns (batch, metrics).

    ``trainer`` is the ``RayPPOTrainer`` (reads ``config``, ``tokenizer``,
    ``actor_rollout_wg``). ``batch`` is the step's DataProto: tensors ``prompts`` [B, P]
    (left-padded), ``responses`` [B, T], ``attention_mask`` [B, P+T], ``response_mask``
    [B, T], ``token_level_rewards`` [B, T], ``old_log_probs`` [B, T], ``advantages`` [B, T]
    (the base); non-tensors ``uid``, ``traj_uid``, ``episode_rewards``, ``sharpo_row``,
    ``anchor_obs`` (optional). Writes ``advantages`` and ``returns`` [B, T] fp32 (``lam = 0``
    with an engine base: left as the base wrote them). Metrics are ``sharpo/*`` floats.
    """
    config = trainer.config
    if _get(config, "algorithm.use_kl_in_reward", False):
        raise ValueError("algorithm.use_kl_in_reward: not supported with adv_estimator=sharpo")
    if _get(config, "actor_rollout_ref.rollout.multi_turn.enable", False):
        raise ValueError("actor_rollout_ref.rollout.multi_turn.enable: not supported with adv_estimator=sharpo "
                         "(verl-agent's environment loop already makes one row per step)")
    cfg = agent_settings(config)
    base_name = cfg["base"]
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
    resp_mask = b["response_mask"][idx]
    uid = np.asarray(nt["uid"], dtype=object)[first]
    traj_uid = np.asarray(nt["traj_uid"], dtype=object)[first]
    try:
        outcome = torch.as_tensor(np.asarray(nt["episode_rewards"], dtype=np.float64)[first], dtype=torch.float32)
    except (TypeError, ValueError):
        raise ValueError("episode_rewards: expected one number per row") from None
    _check_rewards(outcome, b["token_level_rewards"][idx].float().sum(-1), traj_uid, first)
    penalty = b["token_level_rewards"][idx].float().sum(-1) - outcome          # [U]
    norm = bool(_get(config, "algorithm.norm_adv_by_std_in_grpo", True))
    if base_name == "episode_grpo":
        base = episode_grpo_advantages(outcome, uid, traj_uid, norm)           # [U]
    else:
        base = engine_row_advantages(b["advantages"], b["response_mask"], first, back, base_name)
    metrics = {"sharpo/teacher_rows": 0.0, "sharpo/copied_rows": float(len(back) - len(first)),
               "sharpo/penalty_mean": float(penalty.mean()) if len(first) else 0.0,
               "sharpo/base_abs_mean": float(base.abs().mean()) if len(first) else 0.0}

    # the named estimator's rule (SHARPO: lam = 0 is the base exactly: no teacher to score)
    if not teacher_pass(cfg, str(_get(config, "algorithm.adv_estimator", "sharpo"))):
        if base_name == "episode_grpo":
            adv = (base + penalty)[:, None] * resp_mask.float()
            b["advantages"], b["returns"] = adv[back_t], adv[back_t].clone()
        metrics.update(lam_zero_stats())
        return batch, metrics

    prompt_mask = b["attention_mask"][idx, :P].bool()
    prompts = [p[m].tolist() for p, m in zip(b["prompts"][idx], prompt_mask)]
    responses = [r[m.bool()].tolist() for r, m in zip(responses_all[idx], resp_mask)]
    texts = [trainer.tokenizer.decode(r, skip_special_tokens=True) for r in responses]
    anchors = np.asarray(nt["anchor_obs"], dtype=object)[first].tolist() if "anchor_obs" in nt else None

    def peer_hint(rows: list[int]) -> str:
        steps = peer_steps([texts[r] for r in rows], None if anchors is None else [anchors[r] for r in rows])
        return render_peer(steps, cfg["max_observation_chars"])

    teacher = build_teacher_batch(
        trainer.tokenizer, prompts, responses, uid, traj_uid, outcome.tolist(),
        max_prompt_length=cfg["max_teacher_prompt_length"], max_hint_tokens=cfg["max_hint_tokens"],
        success_threshold=cfg["success_threshold"], hint_template=cfg["hint_template"], response_width=T,
        peer_hint=peer_hint)
    has_teacher = teacher.batch["sharpo_has_teacher"]
    student = b["old_log_probs"][idx].float()
    teacher_lp = student.clone()                # rows without a teacher: never read by the kernel
    rows = torch.nonzero(has_teacher).flatten().tolist()
    if rows:
        teacher_lp[rows] = _score_teacher_rows(trainer.actor_rollout_wg, teacher, rows, T)

    traj_index = torch.as_tensor(np.unique(traj_uid.astype(str), return_inverse=True)[1].reshape(-1),
                                 dtype=torch.long)
    seg = segment_advantage(teacher_lp, student, build_segment_ids(trainer.tokenizer, responses, T), base,
                            has_teacher=has_teacher, response_mask=resp_mask, traj_index=traj_index,
                            **SharpoCoefficients.of(cfg).kwargs())
    adv = seg.advantages                                                       # [U, T]
    if base_name == "episode_grpo":
        adv = adv + penalty[:, None] * resp_mask.float()
    b["advantages"] = adv[back_t]
    b["returns"] = adv[back_t].clone()
    metrics.update(sharpo_step_stats(seg, base, has_teacher, alpha=cfg["alpha"], tau=cfg["tau"],
                                     traj_index=traj_index))
    metrics["sharpo/teacher_rows"] = float(len(rows))
    return batch, metrics
