"""Credit estimators (sharpo_train/estimators/: the registry, grpo.py, sharpo.py) and loss pieces (losses.py)."""
import math

import pytest
import torch

from sharpo_train.step.batch import StepBatch
from sharpo_train.step.group_norm import grouped_normalise
from sharpo_train.estimators import ESTIMATORS, EstimatorConfig, register_estimator
from sharpo_train.step.losses import AGGREGATIONS, aggregate, kl_low_var, ppo_clip_loss, token_weights


def test_group_advantages_match_the_formula():
    r = torch.tensor([1., 0., 0., 1., 1., 0.5, 0.5, 0.5])
    g = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2])
    a = grouped_normalise(r.float(), g, std=True, eps=1e-6)
    g0 = r[:4]
    want0 = (g0 - g0.mean()) / (g0.std() + 1e-6)
    g1 = r[4:7]
    want1 = (g1 - g1.mean()) / (g1.std() + 1e-6)
    torch.testing.assert_close(a[:4], want0)
    torch.testing.assert_close(a[4:7], want1)
    assert a[7] == 0                                  # a group of one has no signal
    b = grouped_normalise(r.float(), g, std=False)        # Dr. GRPO: centred only
    torch.testing.assert_close(b[:4], g0 - g0.mean())
    assert torch.all(grouped_normalise(torch.ones(4), torch.zeros(4, dtype=torch.long)) == 0)


def make_batch(with_teacher=True):
    """3 trajectories in 1 group; trajectory 0 has two turn rows."""
    rewards = torch.tensor([1., 0., 1.])
    group_of = torch.zeros(3, dtype=torch.long)
    traj = torch.tensor([0, 0, 1, 2])
    L = 6
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0],
                         [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.float32)
    seg = torch.tensor([[0, 0, 1, 1, -1, -1], [0, 0, -1, -1, -1, -1],
                        [0, 0, 0, 1, 1, -1], [-1, 0, 0, 1, -1, -1]])
    g = torch.Generator().manual_seed(0)
    student = -torch.rand(4, L, generator=g) * 3
    teacher = student + torch.randn(4, L, generator=g)
    has = torch.tensor([True, True, True, False])
    return StepBatch(rewards=rewards, group_of=group_of, traj_index=traj, response_mask=mask,
                     segment_ids=seg, old_logp=student,
                     teacher_logp=teacher if with_teacher else None,
                     has_teacher=has if with_teacher else None)


def test_grpo_broadcasts_a_i_over_generated_tokens_only():
    batch = make_batch(False)
    out = ESTIMATORS["grpo"].fn(batch, EstimatorConfig())
    a = grouped_normalise(batch.rewards.float(), batch.group_of)
    torch.testing.assert_close(out.advantages, a[batch.traj_index][:, None] * batch.response_mask)
    assert not ESTIMATORS["grpo"].needs_teacher(EstimatorConfig())


def test_sharpo_matches_spec_by_hand():
    batch = make_batch(True)
    cfg = EstimatorConfig(lam=0.2, alpha=0.5, tau=1.0, rho_min=0.25, rho_max=4.0)
    out = ESTIMATORS["sharpo"].fn(batch, cfg)
    assert ESTIMATORS["sharpo"].needs_teacher(cfg)
    assert not ESTIMATORS["sharpo"].needs_teacher(EstimatorConfig(lam=0.0))   # §4: the base exactly
    a = grouped_normalise(batch.rewards.float(), batch.group_of)
    delta = batch.teacher_logp - batch.old_logp
    # trajectory 0 (rows 0, 1): segments of lengths 2, 2 | 2 -> mbar = 2; trajectory 1: 3, 2
    expect = a[batch.traj_index][:, None] * batch.response_mask
    for row, segs, mbar in ((0, [(0, [0, 1]), (1, [2, 3])], 2.0), (1, [(0, [0, 1])], 2.0),
                            (2, [(0, [0, 1, 2]), (1, [3, 4])], 2.5)):
        A = a[batch.traj_index[row]]
        for k, toks in segs:
            gap = delta[row, toks].mean()
            u = max(-0.5, min(0.5, math.tanh(gap.item() / 2)))
            w = 1 + math.copysign(1, A.item()) * u if A != 0 else 1 + 0 * u
            rho = min(4.0, max(0.25, mbar / len(toks)))
            expect[row, toks] = A * ((1 - 0.2) + 0.2 * rho * w)
            assert out.segments.gap[row, k].item() == pytest.approx(gap.item(), abs=1e-5)
    # row 3 has no teacher: plain A_i everywhere
    torch.testing.assert_close(out.advantages, expect, rtol=1e-5, atol=1e-6)
    assert out.stats["sharpo/weight_min"] >= 0.5 and out.stats["sharpo/weight_max"] <= 1.5


def test_sharpo_sign_follows_a_i():
    batch = make_batch(True)
    out = ESTIMATORS["sharpo"].fn(batch, EstimatorConfig())
    a = grouped_normalise(batch.rewards.float(), batch.group_of)[batch.traj_index]
    m = batch.response_mask.bool()
    assert torch.all(torch.sign(out.advantages[m]) == torch.sign(a[:, None].expand_as(m)[m]))


def test_registering_a_method_needs_no_trainer_change():
    @register_estimator("test_flat")
    def flat(batch, cfg):
        from sharpo_train.estimators import CreditOutput
        base = torch.ones(len(batch.traj_index))
        return CreditOutput(batch.response_mask.clone(), base)
    try:
        from sharpo_train.loops.train_config import config_from_dict
        cfg = config_from_dict({"method": "test_flat", "env": {"name": "synthetic"}})
        assert cfg.method == "test_flat"
    finally:
        ESTIMATORS.pop("test_flat")


def test_ppo_clip_loss_values():
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.0]]))   # ratios 1.5, 0.5, 1.0 vs old 0
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, -1.0, 2.0]])
    loss, clipped = ppo_clip_loss(logp, old, adv, 0.2)
    torch.testing.assert_close(loss, torch.tensor([[-1.2, 0.8, -2.0]]))
    assert clipped.tolist() == [[True, True, False]]
    loss_hi, _ = ppo_clip_loss(logp, old, adv, 0.2, clip_high=0.6)   # clip-higher
    torch.testing.assert_close(loss_hi, torch.tensor([[-1.5, 0.8, -2.0]]))


def test_aggregations_and_micro_batches():
    v = torch.tensor([[1., 2., 3.], [4., 0., 0.], [5., 6., 0.]])
    m = torch.tensor([[1., 1., 1.], [1., 0., 0.], [1., 1., 0.]])
    traj = torch.tensor([7, 7, 3])         # rows 0 and 1 are turns of one trajectory
    assert aggregate(v, token_weights(m, "token-mean")).item() == pytest.approx(21 / 6)
    assert aggregate(v, token_weights(m, "seq-mean-token-mean")).item() == \
        pytest.approx((2 + 4 + 5.5) / 3)
    # trajectory 7: (1+2+3+4)/4 tokens; trajectory 3: (5+6)/2; then the mean of the two
    assert aggregate(v, token_weights(m, "traj-mean-token-mean", traj)).item() == \
        pytest.approx((10 / 4 + 11 / 2) / 2)
    # micro-batches with the whole mini-batch's weights add up to the full value
    for mode in AGGREGATIONS:
        w = token_weights(m, mode, traj)
        assert w.sum().item() == pytest.approx(1.0)
        assert torch.all(w[m == 0] == 0)
        parts = aggregate(v[:1], w[:1]) + aggregate(v[1:], w[1:])
        assert parts.item() == pytest.approx(aggregate(v, w).item())
    with pytest.raises(ValueError, match="loss.agg"):
        token_weights(m, "sum")
    with pytest.raises(ValueError, match="traj_index"):
        token_weights(m, "traj-mean-token-mean")


def test_traj_mean_keeps_a_group_zero_sum():
    """GRPO advantages of a group sum to 0 over trajectories; with per-turn rows a long
    failure outweighs a short success under token-mean, never under traj-mean."""
    adv = torch.tensor([[1., 1.], [-1., -1.], [-1., -1.], [-1., -1.]])   # success: 1 row
    m = torch.ones(4, 2)
    traj = torch.tensor([0, 1, 1, 1])                                    # failure: 3 rows
    assert aggregate(adv, token_weights(m, "token-mean")).item() < -0.4
    assert aggregate(adv, token_weights(m, "traj-mean-token-mean", traj)).item() == \
        pytest.approx(0.0, abs=1e-6)


def test_kl_low_var():
    a = torch.randn(5, 7)
    assert torch.all(kl_low_var(a, a) == 0)
    assert torch.all(kl_low_var(a, a + torch.randn(5, 7)) >= 0)


def faulted_batch():
    """Two groups of 4 one-turn episodes; faults: episode 2 (group 0), 5, 6, 7 (group 1)."""
    from sharpo_train.envs.base import Task
    from sharpo_train.step.rollout import Episode, Turn
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    faults = {2, 5, 6, 7}
    eps = []
    for e, r in enumerate(rewards):
        ep = Episode(Task(f"t{e // 4}", "Pick"), e // 4, e % 4, reward=r, success=r > 0,
                     error="worker 0: died or hung" if e in faults else None)
        ep.turns.append(Turn("u", [1, 2, 3], [4 + e, 5, 6][:1 + e % 3], "", "look"))
        eps.append(ep)
    return eps, faults


def test_env_faulted_episodes_leave_the_group_statistics_and_the_rows():
    """docs/training.md: an env fault is not a reward-0 failure. Faulted episodes give no
    rows and A = 0, the group statistics are over the healthy episodes only, and a group
    left with fewer than 2 healthy episodes has A = 0."""
    eps, faults = faulted_batch()
    batch = StepBatch.from_episodes(eps)
    assert batch.env_fault.tolist() == [e in faults for e in range(8)]
    assert set(batch.traj_index.tolist()) == {0, 1, 3, 4}          # no rows of faulted ones
    assert len(batch) == 4 and batch.response_ids[2] == eps[3].turns[0].response_ids
    cfg = EstimatorConfig()
    a = batch.episode_advantages(cfg)
    healthy = torch.tensor([1.0, 0.0, 1.0])                          # group 0 without episode 2
    want = (healthy - healthy.mean()) / (healthy.std() + cfg.eps)
    torch.testing.assert_close(a[[0, 1, 3]], want)
    assert a[2] == 0 and torch.all(a[4:] == 0)                      # group 1: one healthy episode
    # every estimator sees the same: grpo's row advantages come from these A_i
    out = ESTIMATORS["grpo"].fn(batch, cfg)
    torch.testing.assert_close(out.base, a[batch.traj_index])
    # counting the faulted episodes as reward-0 failures would give other values
    b = grouped_normalise(batch.rewards.float(), batch.group_of)
    assert b[4] != 0 and not torch.allclose(b[[0, 1, 3]], want)


def test_env_faulted_episodes_neither_get_nor_give_a_teacher():
    import random
    from sharpo_train.step.teacher import assign_teachers
    eps, faults = faulted_batch()
    eps[6].success, eps[6].reward = True, 1.0      # a "success" ended by a fault: no teacher
    for seed in range(5):
        t = assign_teachers(eps, "random", random.Random(seed))
        assert all(t[e] is None for e in faults)
        assert all(j is None or j not in faults for j in t)
        assert t[1] in (0, 3) and t[4] is None


def test_policy_loss_registry_and_config_key():
    from sharpo_train.loops.train_config import config_from_dict
    from sharpo_train.step.losses import POLICY_LOSSES, register_policy_loss
    cfg = config_from_dict({"env": {"name": "synthetic"}})
    assert cfg.loss.policy_loss == "ppo_clip" and "ppo_clip" in POLICY_LOSSES
    logp, old = torch.randn(3, 5), torch.randn(3, 5)
    adv = torch.randn(3, 5)
    got, clipped = POLICY_LOSSES["ppo_clip"](logp, old, adv, cfg.loss)
    want, want_clipped = ppo_clip_loss(logp, old, adv, cfg.loss.clip_ratio, cfg.loss.clip_ratio_high)
    assert torch.equal(got, want) and torch.equal(clipped, want_clipped)
    with pytest.raises(ValueError, match="loss.policy_loss"):
        config_from_dict({"env": {"name": "synthetic"}, "loss": {"policy_loss": "nope"}})

    @register_policy_loss("test_vanilla_pg")
    def vanilla(logp, old_logp, advantages, loss_cfg):
        return -advantages * logp, torch.zeros_like(logp, dtype=torch.bool)
    try:
        cfg = config_from_dict({"env": {"name": "synthetic"}, "loss": {"policy_loss": "test_vanilla_pg"}})
        assert cfg.loss.policy_loss == "test_vanilla_pg"
    finally:
        POLICY_LOSSES.pop("test_vanilla_pg")
