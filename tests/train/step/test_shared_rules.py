"""The credit rules the trainer and the integrations share (teacher rule: step/teacher_rule.py,
group statistics: step/group_norm.py, SHARPO's step statistics: estimators/sharpo_stats.py),
each checked against a plain loop and against what the trainer and the TRL/verl paths
compute with it."""
import math
import random

import pytest
import torch

from sharpo_kernels import SHARPO_DEFAULTS, effective_coefficient, segment_advantage
from sharpo_kernels.testing import random_batch
from sharpo_train.step.group_norm import grouped_normalise
from sharpo_train.estimators.sharpo_stats import scored_segments, sharpo_step_stats
from sharpo_train.step.teacher_rule import successful_peers


def loop_peers(groups, success, valid, choice, rng):
    """The teacher rule as written in docs/method.md §3, one episode at a time (random draws:
    groups in order of their first valid episode, as the trainer always drew them)."""
    order = []
    for g, ok in zip(groups, valid):
        if ok and g not in order:
            order.append(g)
    out = [None] * len(groups)
    for g in order:
        members = [e for e in range(len(groups)) if groups[e] == g and valid[e]]
        for e in members:
            cands = [w for w in members if success[w] and w != e]
            if cands:
                out[e] = cands[0] if choice == "first" else rng.choice(cands)
    return out


@pytest.mark.parametrize("choice", ["first", "random"])
def test_successful_peers_follow_the_rule(choice):
    rng = random.Random(5)
    for trial in range(200):
        n = rng.randint(0, 12)
        groups = [rng.choice("abc") for _ in range(n)]
        success = [rng.random() < 0.4 for _ in range(n)]
        valid = [rng.random() < 0.85 for _ in range(n)]
        got = successful_peers(groups, success, choice=choice, valid=valid,
                               rng=random.Random(trial))
        assert got == loop_peers(groups, success, valid, choice, random.Random(trial))
        for e, p in enumerate(got):
            if p is not None:
                assert groups[p] == groups[e] and success[p] and p != e and valid[p]


def test_trainer_and_integrations_pick_the_same_peers():
    """teacher.assign_teachers (trainer, episodes) with choice=first and the integrations'
    call on (group, success) give the same peers."""
    from sharpo_train.envs.base import Task
    from sharpo_train.step.rollout import Episode
    from sharpo_train.step.teacher import assign_teachers
    rng = random.Random(0)
    for _ in range(50):
        n = rng.randint(1, 10)
        eps = [Episode(Task(f"t{e}", "Pick"), rng.randint(0, 2), e, reward=float(ok), success=ok)
               for e, ok in enumerate(rng.random() < 0.5 for _ in range(n))]
        trainer = assign_teachers(eps, "first")
        integration = successful_peers([ep.group for ep in eps],
                                       [ep.reward >= 0.5 for ep in eps])   # SUCCESS_THRESHOLD
        assert trainer == integration


def test_successful_peers_refuse_bad_input():
    with pytest.raises(ValueError, match="success"):
        successful_peers(["a", "b"], [True])
    with pytest.raises(ValueError, match="valid"):
        successful_peers(["a"], [True], valid=[True, False])
    with pytest.raises(ValueError, match="teacher.choice"):
        successful_peers(["a"], [True], choice="best")


@pytest.mark.parametrize("std", [True, False])
def test_group_statistics_match_a_loop(std):
    g = torch.Generator().manual_seed(1)
    for n in (0, 1, 2, 7, 30):
        r = torch.rand(n, generator=g, dtype=torch.float64).round(decimals=1)
        keys = torch.randint(0, 4, (n,), generator=g)
        valid = torch.rand(n, generator=g) < 0.8
        got = grouped_normalise(r, keys, std=std, eps=1e-6, valid=valid)
        for i in range(n):
            mates = [r[j].item() for j in range(n) if keys[j] == keys[i] and valid[j]]
            if not valid[i] or len(mates) < 2:
                want = 0.0
            else:
                mean = sum(mates) / len(mates)
                sd = math.sqrt(sum((x - mean) ** 2 for x in mates) / (len(mates) - 1))
                want = (r[i].item() - mean) / ((sd + 1e-6) if std else 1.0)
            assert got[i].item() == pytest.approx(want, abs=1e-9)
    with pytest.raises(ValueError, match="keys"):
        grouped_normalise(torch.zeros(3), torch.zeros(2, dtype=torch.long), std=True)


def test_gigpo_episode_term_is_the_shared_group_statistic():
    from sharpo_train.estimators.gigpo import gigpo_row_advantages
    R = torch.tensor([1., 0., 0., 1., 1.], dtype=torch.float64)
    group = torch.tensor([0, 0, 0, 1, 1])
    zero = torch.zeros(5, dtype=torch.float64)
    adv, _ = gigpo_row_advantages(R, group, zero, torch.arange(5), mode="mean_std_norm")
    torch.testing.assert_close(adv, grouped_normalise(R, group, std=True))


def _segments(seed):
    b = random_batch(6, 20, segments=(1, 4), seed=seed, traj_groups=3)
    b["advantages"][1] = 0.0                     # a row with A_i = 0 is never scored
    b["has_teacher"][2] = False
    res = segment_advantage(**b, backend="torch")
    return b, res


def test_step_stats_loop_and_the_integrations_mask():
    b, res = _segments(3)
    base, ht = b["advantages"], b["has_teacher"]
    mask = scored_segments(res.gap, base, ht)
    for i in range(base.numel()):
        for k in range(res.gap.shape[1]):
            want = (k < int(res.num_segments[i]) and bool(ht[i]) and float(base[i]) != 0)
            assert bool(mask[i, k]) == want
    stats = sharpo_step_stats(res, base, ht, alpha=SHARPO_DEFAULTS.alpha, tau=SHARPO_DEFAULTS.tau)
    gaps = [float(res.gap[i, k]) for i in range(6) for k in range(res.gap.shape[1]) if mask[i, k]]
    assert stats["sharpo/segments_scored"] == len(gaps) > 0
    assert stats["sharpo/gap_mean"] == pytest.approx(sum(gaps) / len(gaps), rel=1e-5)
    assert stats["sharpo/weight_mean"] == pytest.approx(float(res.weight[mask].mean()), rel=1e-6)


def test_trainer_step_stats_are_the_shared_ones():
    """The trainer's sharpo estimator reports sharpo_step_stats of its own kernel output."""
    from sharpo_train.step.batch import StepBatch
    from sharpo_train.estimators import ESTIMATORS
    from sharpo_train.estimators.sharpo import SharpoParams
    b, _ = _segments(4)
    n = int(b["traj_index"].max()) + 1
    batch = StepBatch(rewards=torch.linspace(0, 1, n), group_of=torch.zeros(n, dtype=torch.long),
                      traj_index=b["traj_index"], response_mask=b["response_mask"].float(),
                      segment_ids=b["segment_ids"], old_logp=b["student_logp"],
                      teacher_logp=b["teacher_logp"], has_teacher=b["has_teacher"])
    p = SharpoParams(backend="torch")
    out = ESTIMATORS["sharpo"].fn(batch, p)
    want = sharpo_step_stats(out.segments, out.base, batch.has_teacher, alpha=p.alpha, tau=p.tau,
                             traj_index=batch.traj_index)
    assert {k: out.stats[k] for k in want} == pytest.approx(want, nan_ok=True)


def test_credit_page_factor_is_the_kernels_coefficient():
    """report/explain_colors.credit_factor == A~ / A_i the kernel applied on the segment."""
    from sharpo_train.analysis.report.explain_colors import credit_factor
    b = random_batch(10, 24, segments=(1, 4), seed=6, p_no_teacher=0.1, p_zero_advantage=0.0)
    lam = 0.3
    res = segment_advantage(**b, lam=lam, backend="torch")
    checked = 0
    for i in range(10):
        A = float(b["advantages"][i])
        for k in range(int(res.num_segments[i])):
            if not b["has_teacher"][i] or A == 0:
                continue
            pos = ((b["segment_ids"][i] == k) & (b["response_mask"][i] != 0)).nonzero()[0, 0]
            seg = {"weight": float(res.weight[i, k]), "length_factor": float(res.length_factor[i, k])}
            f = credit_factor(seg, lam)
            assert f == pytest.approx(float(res.advantages[i, pos]) / A, rel=1e-5)
            assert f == effective_coefficient(seg["weight"], seg["length_factor"], lam)
            checked += 1
    assert checked > 3
