"""Gated credit and its controls (sharpo_train/estimators/gated.py, docs/estimators.md
"Gated credit"): each rule against a hand-computed case, against a plain-Python reference
on random batches (odd sizes, think tokens whose gap must be ignored, rollouts without a
teacher), the random mask's kept count, the step-matched control, and the refusals."""
import random

import pytest
import torch

from sharpo_train.envs.base import Task
from sharpo_train.estimators import ESTIMATORS, EstimatorConfig
from sharpo_train.estimators.gated import soft_weights
from sharpo_train.settings.loader import ConfigError
from sharpo_train.step.batch import StepBatch
from sharpo_train.step.rollout import Episode, Turn
from sharpo_train.step.segments import Span


def make_batch(groups, think=2, action=2):
    """groups: per group, per rollout (reward, [per turn: action-token gaps]) -> batch with
    old_logp -1 everywhere and teacher = old + 0.7 on think tokens (never read) + the gap on
    action tokens; has_teacher per rollout from ``gaps is not None``."""
    eps, teach, gaps = [], [], []
    for g, rollouts in enumerate(groups):
        for i, (reward, turn_gaps, n_turns) in enumerate(rollouts):
            turns = [Turn("u", [1, 2], list(range(10, 10 + think + action)), "", "a", "o",
                          spans=[Span("think", 0, think), Span("action", think, think + action)])
                     for _ in range(n_turns)]
            eps.append(Episode(Task(f"t{g}", "corridor"), g, i, turns, reward=reward,
                               success=reward > 0))
            teach.append(turn_gaps is not None)
            gaps.append(turn_gaps or [[9.0] * action] * n_turns)
    batch = StepBatch.from_episodes(eps)
    B, L = len(batch), batch.width
    batch.old_logp = torch.full((B, L), -1.0) * batch.response_mask
    teacher = batch.old_logp.clone()
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        teacher[b, :think] += 0.7
        teacher[b, think:think + action] += torch.tensor(gaps[e][t])
    batch.teacher_logp = teacher
    batch.has_teacher = torch.tensor([teach[e] for e in batch.episode])
    batch.step = 3
    return batch


# One group of four rollouts, A = R - mean (norm_std false) = +.5, -.5, -.5, +.5; three
# turns each; the rows' action-token gaps sum to D (two tokens each); rollout 3 has no
# teacher. D~ = D - the rollout's median: ep0 [0, .8, -.6], ep1 [-2.1, 0, .2], ep2 [0, 0, -2].
HAND = [[(1.0, [[0.1, 0.1], [0.5, 0.5], [-0.2, -0.2]], 3),
         (0.0, [[-1.0, -1.0], [0.05, 0.05], [0.1, 0.2]], 3),
         (0.0, [[0.25, 0.25], [0.2, 0.3], [-1.0, -0.5]], 3),
         (1.0, None, 3)]]
WANT = {  # per row, rollouts in order, turns in order
    ("gated", 0.1): [0, .5, 0, -.5, 0, 0, 0, 0, -.5, .5, .5, .5],
    ("gated_soft", 1.0): [0, .4, 0, -.5, 0, 0, 0, 0, -.5, .5, .5, .5],
    # turn means of |D~| over the teacher rows: .7, .267, .933; median .7; kappa .9:
    # turns 0 and 2 decisive; rollout 3 (no teacher) keeps its decisive rows
    ("gated_pooled", 0.1): [0, 0, 0, -.5, 0, 0, 0, 0, -.5, .5, 0, .5],
}


@pytest.mark.parametrize("method,theta", list(WANT))
def test_rules_by_hand(method, theta):
    batch = make_batch(HAND)
    cfg = EstimatorConfig(norm_std=False, gate_theta=theta, gate_soft_theta=theta,
                          gate_kappa=0.9)
    out = ESTIMATORS[method].fn(batch, cfg.params(method))
    rows = WANT[method, theta]
    want = torch.tensor(rows)[:, None] * batch.response_mask
    torch.testing.assert_close(out.advantages, want, rtol=0, atol=1e-6)
    kept = sum(x != 0 for x in rows) / 12
    assert out.stats["gated/kept_rows"] == pytest.approx(kept)
    if method == "gated_pooled":
        assert out.stats["gated/decisive_turns"] == pytest.approx(8 / 12)


def test_gap_is_a_sum_and_think_tokens_do_not_count():
    """A door the teacher rejects by 0.3 nats on each of 4 action tokens is a 1.2 gap: theta
    1.0 keeps it when summed (a mean, 0.3, would drop it); the think tokens' +0.7 never
    counts (it would shift every row the same and leave D~ unchanged, but not D)."""
    groups = [[(0.0, [[-0.3] * 4, [0.0] * 4, [0.0] * 4], 3), (1.0, None, 3)]]
    batch = make_batch(groups, think=3, action=4)
    out = ESTIMATORS["gated"].fn(batch, EstimatorConfig(norm_std=False, gate_theta=1.0)
                                 .params("gated"))
    assert out.advantages[0, 0] == pytest.approx(-0.5)
    assert (out.advantages[1:3] == 0).all()


def reference(groups, method, theta, kappa):
    """Plain Python: the rows' advantages of ``method`` (module table of gated.py)."""
    rows = []
    for g, rollouts in enumerate(groups):
        rewards = [r for r, _, _ in rollouts]
        mean = sum(rewards) / len(rewards)
        for i, (r, gaps, n) in enumerate(rollouts):
            a = r - mean
            if gaps is None:
                rows += [(g, t, a, None) for t in range(n)]
                continue
            d = sorted(sum(x) for x in gaps)
            med = d[n // 2] if n % 2 else (d[n // 2 - 1] + d[n // 2]) / 2
            rows += [(g, t, a, sum(gaps[t]) - med) for t in range(n)]
    sign = lambda a: (a > 0) - (a < 0)          # noqa: E731
    out = []
    for g, t, a, dt in rows:
        r1 = dt is None or sign(a) * dt > theta
        if method == "gated":
            out.append(a if r1 else 0.0)
        elif method == "gated_soft":
            out.append(a if dt is None else a * min(1.0, max(0.0, sign(a) * dt / theta)))
        else:
            taught = [x for x in rows if x[0] == g and x[3] is not None]
            if not taught:
                out.append(a)
                continue
            turns = sorted({x[1] for x in taught})
            means = {u: sum(abs(x[3]) for x in taught if x[1] == u) /
                     sum(1 for x in taught if x[1] == u) for u in turns}
            v = sorted(means.values())
            med = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
            decisive = t in means and means[t] > kappa * med
            out.append(a if decisive and r1 else 0.0)
    return out


@pytest.mark.parametrize("method", ["gated", "gated_soft", "gated_pooled"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rules_against_reference_on_random_batches(method, seed):
    rng = random.Random(seed)
    groups = []
    for _ in range(rng.randint(1, 3)):
        rollouts = []
        for _ in range(rng.randint(2, 5)):
            n = rng.randint(1, 6)
            gaps = None if rng.random() < 0.25 else [[rng.gauss(0, 1) for _ in range(3)]
                                                     for _ in range(n)]
            rollouts.append((float(rng.random() < 0.4), gaps, n))
        groups.append(rollouts)
    theta, kappa = rng.uniform(0.05, 1.0), rng.uniform(0.5, 1.5)
    batch = make_batch(groups, think=rng.randint(0, 3), action=3)
    cfg = EstimatorConfig(norm_std=False, gate_theta=theta, gate_soft_theta=theta,
                          gate_kappa=kappa)
    out = ESTIMATORS[method].fn(batch, cfg.params(method))
    want = torch.tensor(reference(groups, method, theta, kappa),
                        dtype=torch.float32)[:, None] * batch.response_mask
    torch.testing.assert_close(out.advantages, want, rtol=0, atol=1e-5)


def test_random_mask_keeps_r1s_count_at_random_rows():
    batch = make_batch(HAND)
    cfg = EstimatorConfig(norm_std=False, gate_theta=0.1).params("random_mask")
    seen = set()
    for step in range(12):
        batch.step = step
        adv = ESTIMATORS["random_mask"].fn(batch, cfg).advantages[:, 0]
        base = torch.tensor([.5] * 3 + [-.5] * 6 + [.5] * 3)
        assert ((adv == 0) | (adv == base)).all()
        assert int((adv[:9] != 0).sum()) == 3          # R1 keeps 3 of the 9 gated rows
        assert (adv[9:] == base[9:]).all()             # no teacher: kept, as R1
        seen.add(tuple((adv[:9] != 0).tolist()))
    assert len(seen) > 3                               # the rows change with the step
    batch.step = None
    with pytest.raises(ValueError, match="random_mask: batch.step"):
        ESTIMATORS["random_mask"].fn(batch, cfg)


def test_step_matched_control_is_grpo():
    batch = make_batch(HAND)
    cfg = EstimatorConfig(norm_std=False)
    got = ESTIMATORS["grpo_step_matched"].fn(batch, cfg).advantages
    torch.testing.assert_close(got, ESTIMATORS["grpo"].fn(batch, cfg).advantages)
    assert not ESTIMATORS["grpo_step_matched"].needs_teacher(cfg)
    for method in ("gated", "gated_pooled", "gated_soft", "random_mask"):
        assert ESTIMATORS[method].needs_teacher(cfg.params(method))


def test_oracle_share_beside_the_kept_share():
    batch = make_batch(HAND)
    # ep0 (A > 0) right at t1, ep1 (A < 0) wrong at t0: the oracle credits 2 of 12 rows
    batch.credit_labels = [[None, True, None], [False, None, None], [None] * 3, [None] * 3]
    out = ESTIMATORS["gated"].fn(batch, EstimatorConfig(norm_std=False, gate_theta=0.1)
                                 .params("gated"))
    assert out.stats["gated/kept_rows_oracle"] == pytest.approx(2 / 12)


def test_refusals():
    batch = make_batch(HAND)
    batch.teacher_logp = None
    with pytest.raises(ValueError, match="gated: teacher log-probs are required"):
        ESTIMATORS["gated"].fn(batch, EstimatorConfig().params("gated"))
    with pytest.raises(ValueError, match="gate_soft_theta"):
        soft_weights(torch.ones(2), torch.ones(2, dtype=torch.float64),
                     torch.ones(2, dtype=torch.bool), 0.0)
    with pytest.raises(ConfigError, match="gate_kappa"):
        EstimatorConfig(gate_kappa=-1.0).validate()
    with pytest.raises(ConfigError, match="gate_theta"):
        EstimatorConfig(gate_theta=float("nan")).validate()
    with pytest.raises(ConfigError, match="gate_soft_theta"):
        EstimatorConfig(gate_soft_theta=0.0).validate()
    # the chosen defaults (benchmarks/results/gated.md, "Choosing theta and kappa")
    assert (EstimatorConfig().gate_theta, EstimatorConfig().gate_kappa) == (-0.25, 1.5)


CORRIDOR = ["env.name=corridor", "env.num_train=4", "env.num_eval=2", "total_steps=1",
            "rollout.tasks_per_step=1", "rollout.group_size=4", "rollout.max_new_tokens=8",
            "rollout.history_length=0", "log.progress=false", "eval.at_end=false",
            "checkpoint.every=0", "log.update_norm=true"]


@pytest.mark.parametrize("method", ["gated", "gated_pooled", "gated_soft", "random_mask",
                                    "grpo_step_matched"])
def test_a_corridor_step_of_each(tmp_path, capsys, method):
    """One training step on the corridor: the teacher is scored for the gated rules, the
    metrics line has their kept shares (and the oracle's beside them) and the update norm."""
    import json
    from sharpo_train.cli import main
    run = tmp_path / "run"
    assert main(["train", *CORRIDOR, f"method={method}", f"run_dir={run}"]) == 0, \
        capsys.readouterr().err
    (row,) = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()
              if json.loads(x).get("kind") == "train"]
    assert row["update_norm"] > 0
    if method == "grpo_step_matched":
        assert "gated/kept_rows" not in row and row["sharpo/teacher_rows"] == 0
    else:
        assert 0 <= row["gated/kept_rows"] <= 1 and "gated/kept_rows_oracle" in row
