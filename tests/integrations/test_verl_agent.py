"""sharpo_train.integrations.verl_agent: SHARPO in verl-agent's RayPPOTrainer.fit().

The property tests run on verl 0.9.1's DataProto (.venv-verl) with batches shaped as
verl-agent's rollout makes them (one row per step, episode by episode, its ``anchor_obs``),
then changed as its fit() changes them: copied rows (adjust_batch), reordered rows
(_balance_batch), the invalid-action penalty on single steps, and the base estimator's
``advantages`` (verl-agent's GRPO as verl_support.step_grpo reads its code). The one
stand-in is the actor worker group (verl_support.CpuActorWorkerGroup: its FSDP workers
need GPUs).

`test_against_verl_agent_checkout` runs tests/integrations/verl_agent_checkout.py against a
verl-agent source tree named by VERL_AGENT_SRC (docs/integrations.md says how to get one),
in a subprocess, since verl-agent brings its own `verl` package: there the base is
verl-agent's own compute_advantage (GRPO and GiGPO) and lam = 0 is checked equal to it.
"""
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from integrations.verl_support import (AGENT_EPISODES, AGENT_SOLO, CpuActorWorkerGroup, agent_hint,
                                       agent_step_rows, expected_agent_advantages, needs_verl, step_grpo)

LAM, ALPHA, TAU, HINT, PLEN, COEF = 0.3, 0.5, 0.5, 96, 256, 0.1


@pytest.fixture(scope="module")
def policy():
    from sharpo_train.models.policy import build_policy

    torch.manual_seed(0)
    model, tok = build_policy(None)
    return model.eval(), tok


def agent_config(**sharpo):
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "algorithm": {"adv_estimator": "sharpo", "use_kl_in_reward": False, "norm_adv_by_std_in_grpo": True,
                      "sharpo": {"lam": LAM, "alpha": ALPHA, "tau": TAU, "max_hint_tokens": HINT, **sharpo}},
        "data": {"max_prompt_length": PLEN},
        "actor_rollout_ref": {"actor": {"use_invalid_action_penalty": True, "invalid_action_penalty_coef": COEF},
                              "rollout": {"multi_turn": {"enable": False}}},
    })


def rollout_batch(tok, rows, anchors=True):
    """The DataProto verl-agent's gather_rollout_data returns (tensors as its workers pad them)."""
    from verl import DataProto

    from sharpo_train.integrations.common import left_pad

    t = left_pad([r["prompt"] for r in rows], [r["response"] for r in rows], tok.pad_token_id)
    t.pop("response_mask")
    nt = {"uid": np.array([r["uid"] for r in rows], dtype=object),
          "traj_uid": np.array([r["traj_uid"] for r in rows], dtype=object),
          "episode_rewards": np.array([r["reward"] for r in rows], dtype=object),
          "is_action_valid": np.array([r["valid"] for r in rows], dtype=object)}
    if anchors:
        nt["anchor_obs"] = np.array([r["anchor"] for r in rows], dtype=object)
    return DataProto.from_dict(tensors=t, non_tensors=nt)


def rewards_and_old_log_probs(batch, worker, coef=COEF, base=None):
    """fit()'s steps between the reorder and SHARPO: response_mask, the episode reward on
    the last response token (EpisodeRewardManager), minus coef on an invalid step
    (apply_invalid_action_penalty), old log-probs from the worker group, and the base
    estimator's ``advantages``: ``base`` [B] per batch row (default: verl-agent's GRPO as
    verl_support.step_grpo reads it; verl_agent_checkout.py runs verl-agent's own)."""
    b = batch.batch
    T = b["responses"].shape[1]
    b["response_mask"] = b["attention_mask"][:, -T:]
    scores = torch.zeros(len(batch), T)
    last = b["response_mask"].sum(-1) - 1
    for i in range(len(batch)):
        scores[i, last[i]] = float(batch.non_tensor_batch["episode_rewards"][i])
        scores[i, last[i]] -= coef * (1.0 - float(batch.non_tensor_batch["is_action_valid"][i]))
    b["token_level_scores"] = scores
    b["token_level_rewards"] = scores.clone()
    b["old_log_probs"] = worker.compute_log_prob(batch).batch["old_log_probs"]
    if base is not None:
        b["advantages"] = torch.as_tensor(base, dtype=torch.float32)[:, None] * b["response_mask"].float()
        b["returns"] = b["advantages"].clone()
    worker.calls.clear()
    return batch


def fit_step(policy, *, copies=(), order=None, coef=COEF, config=None, mark=True, world_size=2,
             poison=None, episodes=AGENT_EPISODES, anchors=True):
    """Rollout -> mark_rows -> copies -> reorder -> rewards -> the base -> sharpo_advantage.
    Returns (rows, batch, metrics, worker, orig_of: the rollout row of every batch row)."""
    from verl import DataProto

    from sharpo_train.integrations.verl_agent import mark_rows, sharpo_advantage

    model, tok = policy
    rows = agent_step_rows(tok, episodes)
    batch = rollout_batch(tok, rows, anchors)
    orig_of = list(range(len(rows))) + list(copies)
    if mark:
        mark_rows(batch)
    if copies:                                        # adjust_batch(mode="copy")
        batch = DataProto.concat([batch, batch.select_idxs(np.array(copies))])
    if order is not None:                             # _balance_batch
        batch.reorder(torch.as_tensor(order))
        orig_of = [orig_of[j] for j in order]
    worker = CpuActorWorkerGroup(model, world_size=world_size)
    base = step_grpo(rows, coef, orig_of)
    batch = rewards_and_old_log_probs(batch, worker, coef, [base[r] for r in orig_of])
    if poison is not None:                            # bad-input tests change the batch here
        poison(batch)
    trainer = SimpleNamespace(config=config or agent_config(), tokenizer=tok, actor_rollout_wg=worker)
    batch, metrics = sharpo_advantage(trainer, batch)
    return rows, batch, metrics, worker, orig_of


def expected(policy, rows, T, base, **kw):
    model, tok = policy
    return expected_agent_advantages(model, tok, rows, base=base, lam=kw.pop("lam", LAM), alpha=ALPHA, tau=TAU,
                                     max_prompt_length=PLEN + HINT, max_hint_tokens=HINT, width=T, **kw)


@needs_verl
def test_copied_and_reordered_rows_get_the_engine_base_reweighted(policy):
    model, tok = policy
    copies = [1, 4, 6, 8, 0, 2]                                 # 10 rows + 6 copies
    order = torch.randperm(16, generator=torch.Generator().manual_seed(3)).tolist()
    rows, batch, metrics, worker, orig_of = fit_step(policy, copies=copies, order=order, world_size=4)
    T = batch.batch["responses"].shape[1]
    base = step_grpo(rows, COEF, orig_of)                       # copies count, as in verl-agent's GRPO
    want, t_prompts = expected(policy, rows, T, base)
    assert batch.non_tensor_batch["sharpo_row"].tolist() == orig_of
    torch.testing.assert_close(batch.batch["advantages"].double(), want[orig_of], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batch.batch["returns"], batch.batch["advantages"])
    assert not torch.allclose(want[0], want[0, 0].expand_as(want[0]))    # the teacher reweights tokens

    # one teacher call; its rows: each row with a teacher once, in episode/step order, its
    # hint the peer's steps in order (none repeated), padded to the worker group's size
    assert len(worker.calls) == 1
    sent = worker.calls[0]
    with_teacher = [r for r, tp in enumerate(t_prompts) if tp is not None]
    assert len(with_teacher) == 6 and len(sent) == 8            # padded to a multiple of 4
    real = sent.batch["attention_mask"].bool()
    got = [sent.batch["input_ids"][i][real[i]].tolist() for i in range(len(sent))]
    for i, r in enumerate(with_teacher):
        assert got[i] == t_prompts[r] + rows[r]["response"]
    assert metrics["sharpo/copied_rows"] == 6.0 and metrics["sharpo/teacher_rows"] == len(with_teacher)
    for k in ("sharpo/teacher_coverage", "sharpo/gap_mean", "sharpo/weight_mean", "sharpo/penalty_mean",
              "sharpo/base_abs_mean"):
        assert isinstance(metrics[k], float)


@needs_verl
def test_hint_is_the_peers_actions_each_with_the_observation_that_followed(policy):
    model, tok = policy
    rows, _, _, worker, _ = fit_step(policy)
    sent = worker.calls[0]
    real = sent.batch["attention_mask"].bool()
    t1 = tok.decode(sent.batch["input_ids"][2][real[2]])       # rollout row 2: episode t1, peer t0
    assert "A successful attempt at this task:\n1. go to fridge 1 -> Task: heat an egg. You see an egg.\n" \
           "2. take egg 1" in t1
    assert "<think>" not in t1.split("A successful attempt")[1].split("<|im_end|>")[0]
    assert agent_hint(rows, "t0") == "1. go to fridge 1 -> Task: heat an egg. You see an egg.\n2. take egg 1"
    # a rollout without text anchor_obs: the actions alone
    _, _, _, worker, _ = fit_step(policy, anchors=False)
    sent = worker.calls[0]
    real = sent.batch["attention_mask"].bool()
    t1 = tok.decode(sent.batch["input_ids"][2][real[2]])
    assert "A successful attempt at this task:\n1. go to fridge 1\n2. take egg 1" in t1


@needs_verl
def test_lam_zero_is_the_engine_advantage_and_scores_no_teacher(policy):
    copies = [1, 4]
    _, batch, metrics, worker, orig_of = fit_step(policy, copies=copies, order=list(range(12))[::-1],
                                                  config=agent_config(lam=0.0))
    rows = agent_step_rows(policy[1])
    base = step_grpo(rows, COEF, orig_of)
    want = torch.tensor([base[r] for r in orig_of], dtype=torch.float32)[:, None] * \
        batch.batch["response_mask"].float()
    assert torch.equal(batch.batch["advantages"], want)         # bit for bit: left as the base wrote it
    assert worker.calls == [] and metrics["sharpo/teacher_rows"] == 0.0


@needs_verl
def test_any_order_gives_the_same_advantages_and_copies_their_originals(policy):
    _, plain, _, _, _ = fit_step(policy)
    order = list(range(10))[::-1]
    _, moved, _, _, orig_of = fit_step(policy, order=order)
    torch.testing.assert_close(moved.batch["advantages"], plain.batch["advantages"][torch.as_tensor(orig_of)])
    _, copied, _, _, orig_of = fit_step(policy, copies=[0, 9], order=list(range(12))[::-1])
    adv = copied.batch["advantages"]
    for i, j in ((orig_of.index(0), len(orig_of) - 1 - orig_of[::-1].index(0)),
                 (orig_of.index(9), len(orig_of) - 1 - orig_of[::-1].index(9))):
        assert i != j and torch.equal(adv[i], adv[j])


@needs_verl
def test_group_of_one_follows_the_engine_by_default_and_the_method_with_episode_grpo(policy):
    """A group of one episode: verl-agent's GRPO normalises over its step rows (t6: two
    steps of equal reward, A = 0; t7: one row, A = r, verl-agent's mean 0 / std 1 rule);
    base=episode_grpo follows docs/method.md §1 (A = 0)."""
    rows, batch, _, worker, _ = fit_step(policy, episodes=AGENT_SOLO, world_size=1)
    T = batch.batch["responses"].shape[1]
    mask = batch.batch["response_mask"].float()
    torch.testing.assert_close(batch.batch["advantages"], torch.tensor([0.0, 0.0, 10.0])[:, None] * mask,
                               rtol=0, atol=1e-4)
    assert worker.calls == []                                   # the only successes of their groups
    _, ep, m, _, _ = fit_step(policy, episodes=AGENT_SOLO, config=agent_config(base="episode_grpo"),
                              world_size=1)
    assert torch.equal(ep.batch["advantages"], torch.zeros_like(mask))
    assert m["sharpo/base_abs_mean"] == 0.0


@needs_verl
def test_episode_grpo_counts_each_episode_once_and_adds_the_penalty_on_its_step(policy):
    model, tok = policy
    from integrations.reference import grpo_verl

    cfg = agent_config(base="episode_grpo")
    rows, batch, m, _, orig_of = fit_step(policy, copies=[1, 4, 6, 8, 0, 2], config=cfg)
    episodes = list(dict.fromkeys(r["traj_uid"] for r in rows))
    a_ep = grpo_verl([next(r["reward"] for r in rows if r["traj_uid"] == e) for e in episodes],
                     [next(r["uid"] for r in rows if r["traj_uid"] == e) for e in episodes])
    alone = {"g3"}                                              # t5: the only episode of its group
    base = [0.0 if r["uid"] in alone else a_ep[episodes.index(r["traj_uid"])] for r in rows]
    pen = [0.0 if r["valid"] else -COEF for r in rows]
    T = batch.batch["responses"].shape[1]
    want, _ = expected(policy, rows, T, base, penalty=pen)
    torch.testing.assert_close(batch.batch["advantages"].double(), want[orig_of], rtol=1e-4, atol=1e-5)
    assert m["sharpo/penalty_mean"] == pytest.approx(sum(pen) / len(pen), rel=1e-5)
    # a penalty bigger than the success threshold's margin leaves success to the outcome
    # (episode_rewards): t4 (10 - 9.8 on its invalid step) stays t3's teacher
    _, free, _, _, _ = fit_step(policy, coef=0.0, config=cfg)
    _, big, _, worker, _ = fit_step(policy, coef=9.8, config=cfg)
    assert len(worker.calls) == 1
    torch.testing.assert_close(big.batch["advantages"][5] - free.batch["advantages"][5],
                               torch.zeros_like(free.batch["advantages"][5]))          # t3's step: valid
    assert bool((big.batch["advantages"][6] != free.batch["advantages"][6]).any())     # t4's invalid step
    # lam = 0: the episode base with the penalty, no teacher
    _, zero, _, worker, _ = fit_step(policy, config=agent_config(base="episode_grpo", lam=0.0))
    mask = zero.batch["response_mask"].double()
    torch.testing.assert_close(zero.batch["advantages"].double(),
                               torch.tensor([b + p for b, p in zip(base, pen)], dtype=torch.float64)[:, None] * mask,
                               rtol=1e-6, atol=1e-6)
    assert worker.calls == []


@needs_verl
def test_episode_grpo_calls_the_engines_grpo_with_and_without_traj_index(policy, monkeypatch):
    import inspect

    from verl.trainer.ppo import core_algos

    cfg = agent_config(base="episode_grpo")
    original = core_algos.compute_grpo_outcome_advantage
    assert "traj_index" not in inspect.signature(original).parameters        # verl 0.9.1's signature
    _, plain, _, _, _ = fit_step(policy, config=cfg)
    seen = []

    def forked(token_level_rewards, response_mask, index, traj_index, epsilon=1e-6,
               norm_adv_by_std_in_grpo=True, compute_mean_std_cross_steps=True):   # verl-agent's signature
        seen.append((np.asarray(index).tolist(), np.asarray(traj_index).tolist()))
        return original(token_level_rewards=token_level_rewards, response_mask=response_mask, index=index,
                        epsilon=epsilon, norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo)

    monkeypatch.setattr(core_algos, "compute_grpo_outcome_advantage", forked)
    _, forked_out, _, _, _ = fit_step(policy, config=cfg)
    torch.testing.assert_close(forked_out.batch["advantages"], plain.batch["advantages"])
    (groups, traj), = seen
    assert groups == [uid for uid, *_ in AGENT_EPISODES]          # one row per episode, in order
    assert len(set(traj)) == len(traj) == len(AGENT_EPISODES)


@needs_verl
def test_a_base_that_is_not_one_number_per_row_is_refused(policy):
    def varying(batch):
        batch.batch["advantages"][0, 1] += 1.0

    with pytest.raises(ValueError, match="advantages: verl-agent's grpo advantage differs between the tokens"):
        fit_step(policy, poison=varying)

    def copy_differs(batch):
        batch.batch["advantages"][-1] *= 2.0

    with pytest.raises(ValueError, match="copies of one row got different grpo advantages"):
        fit_step(policy, copies=[0], poison=copy_differs, world_size=1)

    def no_base(batch):
        batch.batch.pop("advantages")

    with pytest.raises(ValueError, match="advantages: missing from batch.batch"):
        fit_step(policy, poison=no_base)


@needs_verl
def test_base_setting_is_checked_and_named():
    from sharpo_train.integrations.verl_agent import base_estimator

    assert base_estimator(agent_config()) == "grpo"
    assert base_estimator(agent_config(base="gigpo")) == "gigpo"
    assert base_estimator(agent_config(base="episode_grpo")) == "grpo"
    with pytest.raises(ValueError, match=r"algorithm\.sharpo\.base: expected one of \['grpo', 'gigpo', 'episode_grpo'\]"):
        base_estimator(agent_config(base="gipgo"))
    with pytest.raises(ValueError, match=r"unknown key 'bse' \(did you mean 'base'\?\)"):
        base_estimator(agent_config(bse="gigpo"))
    with pytest.raises(ValueError, match=r"algorithm\.sharpo\.max_observation_chars"):
        base_estimator(agent_config(max_observation_chars=-1))


@needs_verl
def test_missing_or_broken_marks_are_refused(policy):
    with pytest.raises(ValueError, match="mark_rows"):
        fit_step(policy, mark=False)
    from sharpo_train.integrations.verl_agent import unique_rows

    first, back = unique_rows(np.array([3, 1, 1, 0, 3]))
    assert first.tolist() == [3, 1, 0] and back.tolist() == [2, 1, 1, 0, 2]
    with pytest.raises(ValueError, match="sharpo_row"):
        unique_rows(np.array(["a", "b"], dtype=object))


@needs_verl
def test_copy_marked_after_a_change_is_refused(policy):
    from verl import DataProto

    from sharpo_train.integrations.verl_agent import mark_rows, sharpo_advantage

    model, tok = policy
    rows = agent_step_rows(tok)
    batch = rollout_batch(tok, rows)
    mark_rows(batch)
    dup = batch.select_idxs(np.array([0, 1]))
    dup.batch["responses"] = dup.batch["responses"].flip(0)     # rows 0 and 1 swapped: marks lie
    batch = DataProto.concat([batch, dup])
    worker = CpuActorWorkerGroup(model, world_size=2)
    base = step_grpo(rows, COEF)
    batch = rewards_and_old_log_probs(batch, worker, base=base + base[:2])
    with pytest.raises(ValueError, match="rows with one mark differ"):
        sharpo_advantage(SimpleNamespace(config=agent_config(), tokenizer=tok, actor_rollout_wg=worker), batch)


@needs_verl
@pytest.mark.parametrize("key, row", [("episode_rewards", 3), ("token_level_rewards", 5)])
def test_non_finite_rewards_are_refused(policy, key, row):
    from sharpo_train.integrations.verl_agent import mark_rows, sharpo_advantage

    model, tok = policy
    rows = agent_step_rows(tok)
    batch = mark_rows(rollout_batch(tok, rows))
    worker = CpuActorWorkerGroup(model, world_size=2)
    batch = rewards_and_old_log_probs(batch, worker, base=step_grpo(rows, COEF))
    if key == "episode_rewards":
        batch.non_tensor_batch[key][row] = float("nan")
    else:
        batch.batch[key][row, 0] = float("inf")
    with pytest.raises(ValueError, match=key):
        sharpo_advantage(SimpleNamespace(config=agent_config(), tokenizer=tok, actor_rollout_wg=worker), batch)


@needs_verl
@pytest.mark.parametrize("sharpo, match", [
    ({"lamda": 0.5}, r"unknown key 'lamda' \(did you mean 'lam'\?\); known keys: lam, alpha"),
    ({"max_hint_token": 9}, r"did you mean 'max_hint_tokens'"),
    ({"lam": 1.5}, r"algorithm\.sharpo\.lam: must lie in \[0, 1\]"),
    ({"alpha": "x"}, r"algorithm\.sharpo\.alpha"),
    ({"max_hint_tokens": 0}, r"algorithm\.sharpo\.max_hint_tokens: expected >= 8"),
    ({"max_teacher_prompt_length": "x"}, r"algorithm\.sharpo\.max_teacher_prompt_length: expected an int >= 1"),
    ({"success_threshold": None}, r"algorithm\.sharpo\.success_threshold"),
    ({"hint_template": "no slot"}, r"algorithm\.sharpo\.hint_template"),
])
def test_config_typos_and_bad_values_are_refused(policy, sharpo, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fit_step(policy, config=agent_config(**sharpo))


@needs_verl
def test_v1_route_refuses_the_same_typo():
    """The v1 mixin (trainer mode sharpo_sync) reads algorithm.sharpo.* through the same check."""
    from omegaconf import OmegaConf

    from sharpo_train.integrations.verl import SharpoTrainerMixin, sharpo_settings

    trainer = SimpleNamespace(config=OmegaConf.create({"algorithm": {"sharpo": {"lamda": 0.5}},
                                                       "data": {"max_prompt_length": 100}}))
    with pytest.raises(ValueError, match="lamda"):
        SharpoTrainerMixin._sharpo_settings(trainer)
    cfg = sharpo_settings(OmegaConf.create({"sharpo": {"lam": 0.5}}), 100)
    assert cfg["lam"] == 0.5 and cfg["max_teacher_prompt_length"] == 100 + cfg["max_hint_tokens"]
    assert sharpo_settings(OmegaConf.create({}), 10)["lam"] == 0.2
    with pytest.raises(ValueError, match="data.max_prompt_length"):
        sharpo_settings(OmegaConf.create({}), None)
    assert sharpo_settings(OmegaConf.create({"sharpo": {"max_teacher_prompt_length": 64}}), None)[
        "max_teacher_prompt_length"] == 64


@needs_verl
def test_kl_in_reward_and_multi_turn_are_refused(policy):
    cfg = agent_config()
    cfg.algorithm.use_kl_in_reward = True
    with pytest.raises(ValueError, match="use_kl_in_reward"):
        fit_step(policy, config=cfg)
    cfg = agent_config()
    cfg.actor_rollout_ref.rollout.multi_turn.enable = True
    with pytest.raises(ValueError, match="multi_turn"):
        fit_step(policy, config=cfg)


needs_checkout = pytest.mark.skipif(not os.environ.get("VERL_AGENT_SRC"),
                                    reason="VERL_AGENT_SRC is not set (a verl-agent source tree; docs/integrations.md)")


def _run_in_checkout(script: str) -> str:
    """Run tests/integrations/``script`` with the verl-agent tree first on PYTHONPATH (in
    ``VERL_AGENT_PYTHON``, else this Python); -> its stdout (AssertionError on failure)."""
    repo = Path(__file__).resolve().parents[2]
    src = Path(os.environ["VERL_AGENT_SRC"]).resolve()
    python = os.environ.get("VERL_AGENT_PYTHON", sys.executable)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(repo), str(repo / "tests")]))
    # about 2 min on an idle 2-core box; over 15 min was seen on a loaded one
    proc = subprocess.run([python, str(Path(__file__).with_name(script)), str(src)],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


@needs_checkout
def test_against_verl_agent_checkout():
    """verl-agent's own code: the patch applies, its patched RayPPOTrainer accepts
    adv_estimator=sharpo and calls mark_rows before adjust_batch / _balance_batch, the
    launch script's data step and overrides fit verl-agent's prepare.py and Hydra config,
    and sharpo_advantage works on a batch made by its gather_rollout_data, adjust_batch,
    _balance_batch, EpisodeRewardManager, apply_invalid_action_penalty and GRPO."""
    assert "verl-agent checkout: OK" in _run_in_checkout("verl_agent_checkout.py")


@needs_checkout
def test_fused_logprobs_against_verl_agent_checkout():
    """verl-agent's fused log-prob path (use_fused_kernels, turned on by the drop-in) with
    sharpo's kernel underneath: log-probs, entropy and gradients equal verl-agent's unfused
    path, fp32 <= 1e-5 relative, bf16 within 2e-2 (verl_agent_fused_checkout.py)."""
    assert "verl-agent fused: OK" in _run_in_checkout("verl_agent_fused_checkout.py")
