"""SHARPO inside verl 0.9.1 (extra ``[verl]``; docs/integrations.md, docs/training.md).

Row layout (verl-agent's, also verl v1's multi-output agent loops): one row per
environment step. Non-tensor ``uid`` names the group (one task, G episodes), ``traj_uid``
the episode; every row of an episode carries the episode's reward on its last valid token.

- ``compute_sharpo_advantage(data)``: DataProto in, ``advantages``/``returns`` [B, T] out.
  A_i is the installed verl's own GRPO advantage (``grpo_episode_advantage``: verl's or
  verl-agent's ``compute_grpo_outcome_advantage``, whichever signature) of the episode,
  each episode counted once in its group; ``traj_uid`` becomes the kernel's
  ``traj_index`` (docs/training.md), so mbar is taken over the whole episode.
- ``sharpo_settings`` / ``check_config`` (engine_settings.py, verl-free): ``algorithm.sharpo.*`` checked
  (unknown keys, look-alike sections and bad values refused), at ``SharpoTrainerMixin.__init__``.
- ``"sharpo"`` is registered with ``@register_adv_est`` so ``algorithm.adv_estimator=sharpo``
  validates; the registered function cannot see teacher log-probs (verl passes an estimator
  only rewards, mask, uid and config) and says so: the trainer mixin routes the name.
- ``build_teacher_batch``: successful peer per ``uid`` group -> hint -> teacher rows
  (``prompts`` left-padded, ``responses`` right-padded, ``position_ids`` recomputed), the
  hint cut and never the task (docs/method.md §3).
- ``SharpoTrainerMixin``: for the v1 trainer (``verl.trainer.ppo.v1.PPOTrainer``); its
  ``_compute_advantage`` runs after old log-probs: teacher batch, one no-grad log-prob
  pass through the actor worker group, segment ids from the response tokens, then
  ``compute_sharpo_advantage``. ``SharpoPPOTrainerSync`` is registered as the v1 trainer
  mode ``sharpo_sync``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

from verl.protocol import DataProto
from verl.trainer.ppo import core_algos

from sharpo_kernels import SHARPO_DEFAULTS, SharpoCoefficients, segment_advantage
from sharpo_train.step.teacher_rule import SUCCESS_THRESHOLD, successful_peers
from sharpo_train.estimators.sharpo_stats import lam_zero_stats, sharpo_step_stats
from sharpo_train.hint import HINT_DEFAULTS, render_lines, response_line
from sharpo_train.integrations.common import generation_suffix_ids, insert_hint, left_pad, response_segment_ids, teacher_pass
# algorithm.sharpo.* (DEFAULTS) and their checks, verl-free (engine_settings.py)
from sharpo_train.integrations.engine_settings import (DEFAULTS, check_config, check_engine_estimator,  # noqa: F401
                                                       fused_kernels_setup, sharpo_settings, verl_settings)
from sharpo_train.integrations.fused_verl import install as install_fused_logprobs

try:  # the v1 trainer's data plane; absent in a bare verl install
    import transfer_queue as tq
except ImportError:  # pragma: no cover - the [verl] extra installs it
    tq = None

TEACHER_KEY_PREFIX = "sharpoteacher"


def _nonneg_index(values: np.ndarray) -> torch.Tensor:
    """[B] labels -> [B] int64 ids numbered in order of first appearance."""
    seen: dict = {}
    return torch.tensor([seen.setdefault(v, len(seen)) for v in values.tolist()], dtype=torch.long)


def episode_advantages(token_level_rewards: torch.Tensor, uid: np.ndarray, traj_uid: np.ndarray, *,
                       norm_adv_by_std: bool = True, epsilon: float = 1e-6):
    """-> (traj_index [B] int64, A [N] fp32 per episode, reward [N], group [N] int64).

    Reward of an episode = the sum of ``token_level_rewards`` of one of its rows (all its
    rows must agree). A = verl's GRPO advantage over the episodes of each uid group.
    """
    B = token_level_rewards.shape[0]
    if len(uid) != B or len(traj_uid) != B:
        raise ValueError(f"uid/traj_uid: expected {B} entries, got {len(uid)}/{len(traj_uid)}")
    traj_index = _nonneg_index(np.asarray(traj_uid, dtype=object))
    scores = token_level_rewards.float().sum(-1)
    bad = ~torch.isfinite(scores)
    if bool(bad.any()):
        r = int(bad.nonzero()[0, 0])
        raise ValueError(f"token_level_rewards: non-finite reward {float(scores[r])} in row {r} "
                         f"(traj_uid {traj_uid[r]!r}); rewards must be finite")
    N = int(traj_index.max()) + 1 if B else 0
    first = torch.full((N,), B, dtype=torch.long).scatter_reduce(0, traj_index, torch.arange(B), "amin")
    reward = scores[first]
    if not torch.allclose(scores, reward[traj_index], atol=1e-6, rtol=1e-6):
        raise ValueError("token_level_rewards: rows of one traj_uid carry different rewards")
    ep_uid = np.asarray(uid, dtype=object)[first.numpy()]
    for r in range(B):
        if uid[r] != ep_uid[traj_index[r]]:
            raise ValueError(f"uid: rows of traj_uid {traj_uid[r]!r} belong to different uid groups")
    adv = grpo_episode_advantage(reward, ep_uid, norm_adv_by_std=norm_adv_by_std, epsilon=epsilon)
    return traj_index, adv, reward, _nonneg_index(ep_uid)


def grpo_episode_advantage(reward: torch.Tensor, groups: np.ndarray, *, norm_adv_by_std: bool = True,
                           epsilon: float = 1e-6) -> torch.Tensor:
    """[N] episode rewards -> [N] fp32 advantages by the installed verl's own
    ``core_algos.compute_grpo_outcome_advantage``, one row per episode (docs/method.md §1).

    verl-agent's fork of that function takes a required ``traj_index`` (verl 0.9.1's does
    not): it is passed, one id per episode, when the signature names it. With one row per
    episode its ``compute_mean_std_cross_steps`` modes agree.
    """
    N = reward.shape[0]
    fn = core_algos.compute_grpo_outcome_advantage
    kwargs = dict(token_level_rewards=reward.float()[:, None], response_mask=torch.ones(N, 1),
                  index=np.asarray(groups, dtype=object), epsilon=epsilon, norm_adv_by_std_in_grpo=norm_adv_by_std)
    if "traj_index" in inspect.signature(fn).parameters:
        kwargs["traj_index"] = np.arange(N)
    adv, _ = fn(**kwargs)      # [N, 1]
    return adv[:, 0].float()


def compute_sharpo_advantage(data: DataProto, coefficients: SharpoCoefficients = SHARPO_DEFAULTS, *,
                             norm_adv_by_std: bool = True, epsilon: float = 1e-6) -> DataProto:
    """SHARPO advantages (docs/method.md §4) for a verl batch in the per-step row layout,
    with ``coefficients`` (lam, alpha, tau, rho_min, rho_max; ``SharpoCoefficients.of(cfg)``
    of ``sharpo_settings``).

    Reads tensors ``token_level_rewards``, ``response_mask``, ``old_log_probs``,
    ``teacher_log_probs`` ([B, T] fp32), ``sharpo_segment_ids`` ([B, T] int, -1 outside any
    segment), ``sharpo_has_teacher`` ([B] bool) and non-tensors ``uid``, ``traj_uid``.
    Writes ``advantages`` and ``returns`` ([B, T] fp32, equal) and returns ``data``; per-step
    summaries go to ``data.meta_info["sharpo_metrics"]``.
    """
    for key in ("token_level_rewards", "response_mask", "old_log_probs", "teacher_log_probs",
                "sharpo_segment_ids", "sharpo_has_teacher"):
        if key not in data.batch.keys():
            raise ValueError(f"{key}: missing from data.batch")
    for key in ("uid", "traj_uid"):
        if key not in data.non_tensor_batch:
            raise ValueError(f"{key}: missing from data.non_tensor_batch")
    b = data.batch
    if b["sharpo_has_teacher"].dtype != torch.bool:
        raise TypeError(f"sharpo_has_teacher: expected a bool tensor, got "
                        f"{b['sharpo_has_teacher'].dtype} (build_teacher_batch writes bool)")
    if b["sharpo_segment_ids"].dtype.is_floating_point or b["sharpo_segment_ids"].dtype == torch.bool:
        raise TypeError(f"sharpo_segment_ids: expected an integer tensor, got "
                        f"{b['sharpo_segment_ids'].dtype} (build_segment_ids writes int64)")
    traj_index, a_ep, _, _ = episode_advantages(
        b["token_level_rewards"], data.non_tensor_batch["uid"], data.non_tensor_batch["traj_uid"],
        norm_adv_by_std=norm_adv_by_std, epsilon=epsilon)
    has_teacher = b["sharpo_has_teacher"]
    student = b["old_log_probs"].float()
    # rows without a teacher are never read by the kernel; give them finite values
    teacher = torch.where(has_teacher[:, None], b["teacher_log_probs"].float(), student)
    base = a_ep[traj_index]
    seg = segment_advantage(teacher, student, b["sharpo_segment_ids"].long(), base, has_teacher=has_teacher,
                            response_mask=b["response_mask"], traj_index=traj_index, **coefficients.kwargs())
    data.batch["advantages"] = seg.advantages
    data.batch["returns"] = seg.advantages.clone()
    data.meta_info["sharpo_metrics"] = lam_zero_stats() if not teacher_pass(coefficients, "sharpo") else sharpo_step_stats(
        seg, base, has_teacher, alpha=coefficients.alpha, tau=coefficients.tau, traj_index=traj_index)
    return data


def _needs_teacher_message(*_, **__):
    raise RuntimeError(
        "adv_estimator=sharpo needs teacher log-probs, which verl does not pass to a registered "
        "estimator: train with sharpo_train.integrations.verl.SharpoTrainerMixin (v1 trainer mode "
        "'sharpo_sync') or call compute_sharpo_advantage yourself (docs/integrations.md)")


def register() -> None:
    """Register ``"sharpo"`` as an advantage estimator and ``sharpo_sync`` as a v1 trainer
    mode, and put sharpo's kernel under verl's fused log-prob path (fused_verl.install)
    (idempotent; also usable as a Ray worker_process_setup_hook)."""
    registry = getattr(core_algos, "ADV_ESTIMATOR_REGISTRY", None)
    if registry is not None and "sharpo" not in registry:   # older verl forks have no registry
        core_algos.register_adv_est("sharpo")(_needs_teacher_message)
    install_fused_logprobs()          # verl's torch fused head -> linear_logprobs (fused_verl.py)
    try:
        _register_trainer()
    except ImportError:   # a verl without the v1 trainer (e.g. verl-agent's fork): DataProto API only
        pass


# ----------------------------------------------------------------- teacher batch
def peer_hint_text(tokenizer, response_ids: Sequence[Sequence[int]]) -> str:
    """The peer's trajectory as hint text (the template's ``{hint}``): its generated
    responses, one ``hint.response_line`` per step."""
    return render_lines([tokenizer.decode(list(r), skip_special_tokens=True).strip() for r in response_ids],
                        line=response_line)


def build_teacher_batch(tokenizer, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                        uid: Sequence, traj_uid: Sequence, rewards: Sequence[float], *,
                        max_prompt_length: int, max_hint_tokens: int = HINT_DEFAULTS.max_hint_tokens,
                        success_threshold: float = SUCCESS_THRESHOLD,
                        hint_template: str = HINT_DEFAULTS.template,
                        response_width: Optional[int] = None,
                        peer_hint: Optional[Callable[[list[int]], str]] = None) -> DataProto:
    """Teacher rows for a per-step batch (one row per environment step, unpadded ids).

    ``rewards[r]`` is row r's episode reward. Each episode's peer follows
    ``successful_peers`` (step/teacher_rule.py) over episodes; its hint is ``peer_hint_text`` of the peer's
    rows in batch order. Row r's teacher prompt = its prompt with the hint inserted at the
    end of the last user message (``common.insert_hint``: at most ``max_hint_tokens``,
    total prompt <= ``max_prompt_length``, the hint cut, never the task). Rows without a
    teacher keep their own prompt. Returns a DataProto with ``prompts`` [B, P] left-padded,
    ``responses`` [B, R], ``input_ids``, ``attention_mask``, ``position_ids`` [B, P+R],
    ``response_mask`` [B, R], ``sharpo_has_teacher`` [B] bool, and non-tensor ``hint``;
    R = the longest response or ``response_width`` (pass the student batch's width to get
    teacher log-probs aligned with ``old_log_probs``). ``peer_hint``: the peer's rows
    (batch positions, in batch order) -> its hint text (verl-agent: actions with their
    observations); default ``peer_hint_text`` of their responses.
    """
    B = len(prompts)
    traj_index = _nonneg_index(np.asarray(list(traj_uid), dtype=object)).tolist()
    N = max(traj_index, default=-1) + 1
    ep_rows: list[list[int]] = [[] for _ in range(N)]
    for r, e in enumerate(traj_index):
        ep_rows[e].append(r)
    ep_group = [uid[rows[0]] for rows in ep_rows]
    ep_success = [float(rewards[rows[0]]) >= success_threshold for rows in ep_rows]
    peers = successful_peers(ep_group, ep_success)
    if peer_hint is None:
        def peer_hint(rows):
            return peer_hint_text(tokenizer, [responses[r] for r in rows])
    hints = [None if p is None else peer_hint(ep_rows[p]) for p in peers]
    suffix = generation_suffix_ids(tokenizer)
    t_prompts, has_teacher, used = [], [], []
    for r in range(B):
        hint = hints[traj_index[r]]
        ids = None if hint is None else insert_hint(
            tokenizer, prompts[r], hint, max_prompt_length=max_prompt_length,
            max_hint_tokens=max_hint_tokens, suffix_ids=suffix, template=hint_template)
        has_teacher.append(ids is not None)
        t_prompts.append(ids if ids is not None else list(prompts[r]))
        used.append(hint if ids is not None else None)
    tensors = left_pad(t_prompts, responses, tokenizer.pad_token_id, response_width)
    tensors["sharpo_has_teacher"] = torch.tensor(has_teacher, dtype=torch.bool)
    return DataProto.from_dict(tensors=tensors, non_tensors={"hint": np.array(used, dtype=object)})


def build_segment_ids(tokenizer, responses: Sequence[Sequence[int]], width: int) -> torch.Tensor:
    """[B, width] int64 segment ids of each response (-1 padding)."""
    out = torch.full((len(responses), width), -1, dtype=torch.long)
    for b, r in enumerate(responses):
        out[b, :len(r)] = torch.tensor(response_segment_ids(tokenizer, r), dtype=torch.long)
    return out


# ----------------------------------------------------------------- v1 trainer mixin
def _rows(t) -> list[torch.Tensor]:
    """Nested (jagged) or padded [B, ...] tensor -> list of per-row tensors."""
    return list(t.unbind(0))


def _pad_right(rows: Sequence[torch.Tensor], width: int, fill=0, dtype=None) -> torch.Tensor:
    out = torch.full((len(rows), width), fill, dtype=dtype or rows[0].dtype)
    for b, v in enumerate(rows):
        out[b, :v.numel()] = v
    return out


def keys_to_uids(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """v1 TransferQueue keys ``{uid}_{session_id}_{index}`` -> (uid, traj_uid = uid_session)."""
    uid, traj = [], []
    for k in keys:
        parts = k.rsplit("_", 2)
        if len(parts) != 3:
            raise ValueError(f"batch.keys: expected '{{uid}}_{{session}}_{{index}}', got {k!r}")
        uid.append(parts[0])
        traj.append(f"{parts[0]}_{parts[1]}")
    return np.array(uid, dtype=object), np.array(traj, dtype=object)


class SharpoTrainerMixin:
    """Mix into a verl v1 ``PPOTrainer`` subclass (before it in the bases). With
    ``algorithm.adv_estimator=sharpo`` its ``_compute_advantage`` computes SHARPO; any other
    estimator goes to the parent. Settings: ``algorithm.sharpo.*``, the keys of ``DEFAULTS``
    (the kernel's coefficients, success_threshold, max_hint_tokens,
    max_teacher_prompt_length, hint_template; ``max_teacher_prompt_length`` defaults to
    ``data.max_prompt_length + max_hint_tokens``).
    """

    def __init__(self, config, *args, **kwargs):
        # settings checked at construction (verl's TaskRunnerV1 builds the trainer before
        # trainer.init() starts workers and loads models): engine_settings.check_config
        if str(config.algorithm.adv_estimator) == "sharpo":
            fused_kernels_setup(config, check_config(config, "verl"))
        elif getattr(core_algos, "ADV_ESTIMATOR_REGISTRY", None) is not None:
            # a sharpo estimator verl does not have (rlsd, a user's own): refused by name
            check_engine_estimator(config.algorithm.adv_estimator, core_algos.ADV_ESTIMATOR_REGISTRY)
        super().__init__(config, *args, **kwargs)

    def _sharpo_settings(self) -> dict[str, Any]:
        return verl_settings(self.config)

    def _compute_advantage(self, batch, metrics: dict):
        if str(self.config.algorithm.adv_estimator) != "sharpo":
            return super()._compute_advantage(batch, metrics)
        if self.config.algorithm.get("use_kl_in_reward", False):
            raise ValueError("algorithm.use_kl_in_reward: not supported with adv_estimator=sharpo")
        cfg = self._sharpo_settings()
        keys = list(batch.keys)
        td = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id,
                             select_fields=["prompts", "responses", "response_mask", "rm_scores", "old_log_probs"])
        prompts = [p.tolist() for p in _rows(td["prompts"])]
        responses = [r.tolist() for r in _rows(td["responses"])]
        R = max(len(r) for r in responses)
        mask_rows = _rows(td["response_mask"])
        data = DataProto.from_dict(tensors={
            "response_mask": _pad_right(mask_rows, R),
            "token_level_rewards": _pad_right(_rows(td["rm_scores"]), R, 0.0, torch.float32),
            "old_log_probs": _pad_right(_rows(td["old_log_probs"]), R, 0.0, torch.float32),
        })
        uid, traj_uid = keys_to_uids(keys)
        data.non_tensor_batch["uid"], data.non_tensor_batch["traj_uid"] = uid, traj_uid

        # the named estimator's rule (SHARPO: lam = 0 is its base exactly: no teacher batch, §4)
        if not teacher_pass(cfg, str(self.config.algorithm.adv_estimator)):
            has_teacher = torch.zeros(len(keys), dtype=torch.bool)
            data.batch["teacher_log_probs"] = data.batch["old_log_probs"].clone()
            data.batch["sharpo_has_teacher"] = has_teacher
            data.batch["sharpo_segment_ids"] = torch.full((len(keys), R), -1, dtype=torch.long)
            return self._sharpo_put(batch, keys, td, data, metrics, cfg)
        rewards = data.batch["token_level_rewards"].sum(-1).tolist()
        teacher = build_teacher_batch(
            self.tokenizer, prompts, responses, uid, traj_uid, rewards,
            max_prompt_length=cfg["max_teacher_prompt_length"], max_hint_tokens=cfg["max_hint_tokens"],
            success_threshold=cfg["success_threshold"], hint_template=cfg["hint_template"])
        has_teacher = teacher.batch["sharpo_has_teacher"]
        teacher_lp = torch.zeros(len(keys), R)
        if bool(has_teacher.any()):
            # every row goes through the worker group (rows without a teacher are scored with
            # their own prompt and ignored): the batch keeps the size and order that verl's
            # _balance_batch made divisible across data-parallel ranks
            rows = list(range(len(keys)))
            teacher_lp[rows] = self._sharpo_teacher_log_probs(batch, keys, teacher, rows, R)
        data.batch["teacher_log_probs"] = teacher_lp
        data.batch["sharpo_has_teacher"] = has_teacher
        data.batch["sharpo_segment_ids"] = build_segment_ids(self.tokenizer, responses, R)
        return self._sharpo_put(batch, keys, td, data, metrics, cfg)

    def _sharpo_put(self, batch, keys: list[str], td, data: DataProto, metrics: dict, cfg: dict):
        """compute_sharpo_advantage on ``data``, its ``sharpo/*`` metrics into ``metrics``,
        ``advantages``/``returns`` back into TransferQueue (nested, as verl stores them)."""
        data = compute_sharpo_advantage(
            data, SharpoCoefficients.of(cfg),
            norm_adv_by_std=self.config.algorithm.get("norm_adv_by_std_in_grpo", True))
        metrics.update(data.meta_info["sharpo_metrics"])

        from tensordict import TensorDict
        from verl.workers.utils.padding import response_to_nested
        out = {f: response_to_nested(data.batch[f], td["response_mask"]) for f in ("advantages", "returns")}
        return tq.kv_batch_put(keys=keys, partition_id=batch.partition_id,
                               fields=TensorDict(out, batch_size=len(keys)))

    def _sharpo_teacher_log_probs(self, batch, keys: list[str], teacher: DataProto, rows: list[int],
                                  width: int) -> torch.Tensor:
        """[len(rows), width] fp32 log-probs of the response tokens under the teacher prompts.

        The teacher rows go into TransferQueue as copies of the student rows (every field
        the agent loop stored) with ``prompts``/``input_ids``/``attention_mask``/
        ``position_ids`` replaced (unpadded, as the v1 data plane stores them), are scored
        by the actor worker group's ``compute_log_prob`` (no grad, the old policy) and are
        removed again.
        """
        from tensordict import TensorDict
        from verl.workers.utils.padding import response_from_nested

        src = tq.kv_batch_get(keys=[keys[r] for r in rows], partition_id=batch.partition_id)
        t = teacher.batch
        fields: dict[str, Any] = {}
        prompts, inputs, attn, pos = [], [], [], []
        for r in rows:
            real = t["attention_mask"][r].bool()
            P = t["prompts"].shape[1]
            prompts.append(t["prompts"][r][real[:P]])
            inputs.append(t["input_ids"][r][real])
            attn.append(torch.ones(int(real.sum()), dtype=torch.long))
            pos.append(t["position_ids"][r][real])
        nested = {"prompts": prompts, "input_ids": inputs, "attention_mask": attn, "position_ids": pos}
        for name in src.keys():
            if name in nested:
                continue
            fields[name] = src[name]
        for name, vals in nested.items():
            fields[name] = torch.nested.as_nested_tensor(vals, layout=torch.jagged)
        tkeys = [f"{TEACHER_KEY_PREFIX}{keys[r]}" for r in rows]
        tags = [{"status": "success", "prompt_len": len(p), "response_len": len(i) - len(p),
                 "seq_len": len(i)} for p, i in zip(prompts, inputs)]
        meta = tq.kv_batch_put(keys=tkeys, partition_id=batch.partition_id,
                               fields=TensorDict(fields, batch_size=len(rows)), tags=tags)
        meta.extra_info.update({"calculate_entropy": False, "compute_loss": False,
                                "temperature": self.config.actor_rollout_ref.rollout.temperature})
        try:
            self.actor_rollout_wg.compute_log_prob(meta)
            out = tq.kv_batch_get(keys=tkeys, partition_id=batch.partition_id,
                                  select_fields=["log_probs", "response_mask"])
            lp = response_from_nested(out["log_probs"], out["response_mask"])
        finally:
            tq.kv_clear(keys=tkeys, partition_id=batch.partition_id)
        return _pad_right(_rows(lp), width, 0.0, torch.float32)


SharpoPPOTrainerSync = None


def _register_trainer() -> None:
    """Define and register ``SharpoPPOTrainerSync`` (v1 trainer mode ``sharpo_sync``)."""
    global SharpoPPOTrainerSync
    if SharpoPPOTrainerSync is not None:
        return
    from verl.trainer.ppo.v1 import trainer_base
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    class _SharpoPPOTrainerSync(SharpoTrainerMixin, PPOTrainerSync):
        """verl's synchronous v1 trainer with SHARPO's advantage step."""

    _SharpoPPOTrainerSync.__name__ = _SharpoPPOTrainerSync.__qualname__ = "SharpoPPOTrainerSync"
    existing = trainer_base.TRAINER_REGISTRY.get("sharpo_sync")
    if existing is None:
        existing = trainer_base.register_trainer("sharpo_sync")(_SharpoPPOTrainerSync)
    SharpoPPOTrainerSync = existing


register()
