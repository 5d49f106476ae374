"""Oracle credit (sharpo_train/estimators/oracle.py, docs/estimators.md "Oracle credit: a
ceiling, not a method"): every part against a hand-computed float64 case, the perfect
teacher through SHARPO's formula, the config refusals and a corridor run of each."""
import json
import math

import pytest
import torch

from sharpo_train.step.batch import StepBatch
from sharpo_train.cli import main
from sharpo_train.loops.train_config import load_config
from sharpo_train.envs.base import Task
from sharpo_train.estimators import ESTIMATORS, EstimatorConfig
from sharpo_train.estimators.oracle import ORACLE_METHODS, PARTS, oracle_token_advantages
from sharpo_train.step.exact_labels import perfect_teacher_logp
from sharpo_train.settings.loader import ConfigError
from sharpo_train.step.rollout import Episode, Turn
from sharpo_train.step.segments import Span

F64 = dict(dtype=torch.float64)


def turn(n_tokens, spans=()):
    return Turn("u", [1, 2, 3], list(range(10, 10 + n_tokens)), "", "a", "o", spans=list(spans))


# one group of three rollouts (Dr. GRPO, norm_std false: A = R - mean = 2/3, -1/3, -1/3).
# ep0 succeeded: a free move (3 tokens), a right move (2). ep1 failed: wrong (2), right (4),
# free (3). ep2 failed: free (5), wrong (1).
TOKENS = [[3, 2], [2, 4, 3], [5, 1]]
LABELS = [[None, True], [False, True, None], [None, False]]
A = [2 / 3, -1 / 3, -1 / 3]
# the hand-computed per-row value of each part, rows in order ep0 t0,t1, ep1 t0..t2, ep2 t0,t1;
# equal-total scale s_i = tokens / credited tokens: ep0 5/2, ep1 9/2, ep2 6/1
WANT = {
    "mask": [0, 2 / 3, -1 / 3, 0, 0, 0, -1 / 3],
    "equal_total": [0, 5 / 3, -1.5, 0, 0, 0, -2.0],
    "free_zero": [0, 2 / 3, -1 / 3, -1 / 3, 0, 0, -1 / 3],
    "spare_right": [2 / 3, 2 / 3, -1 / 3, 0, -1 / 3, -1 / 3, -1 / 3],
    "blame_wrong": [2 / 3, 2 / 3, -1.5, -1 / 3, -1 / 3, -1 / 3, -2.0],
}
METHOD_OF = dict(zip(PARTS, ORACLE_METHODS))


def hand_batch(spans=False):
    def t(n):
        # spans=True: a think segment of n tokens and a one-token action
        return turn(n + 1, [Span("think", 0, n), Span("action", n, n + 1)]) if spans else turn(n)
    eps = [Episode(Task("t0", "corridor"), 0, i, [t(n) for n in ns], reward=r, success=r > 0)
           for i, (ns, r) in enumerate(zip(TOKENS, [1.0, 0.0, 0.0]))]
    batch = StepBatch.from_episodes(eps)
    batch.credit_labels = LABELS
    return batch


@pytest.mark.parametrize("part", PARTS)
def test_every_part_by_hand_float64(part):
    batch = hand_batch()
    base = torch.tensor([A[e] for e in batch.episode], **F64)
    label = torch.tensor([{None: 0, True: 1, False: -1}[LABELS[e][t]]
                          for e, t in zip(batch.episode, batch.turn)], **F64)
    got = oracle_token_advantages(base, label, batch.response_mask.double(), batch.traj_index,
                                  part)
    want = torch.tensor(WANT[part], **F64)[:, None] * batch.response_mask.double()
    torch.testing.assert_close(got, want, rtol=0, atol=1e-15)
    # the registered estimator: the same numbers from the batch (float32)
    out = ESTIMATORS[METHOD_OF[part]].fn(batch, EstimatorConfig(norm_std=False))
    torch.testing.assert_close(out.advantages.double(), want, rtol=0, atol=1e-6)
    torch.testing.assert_close(out.base.double(), base, rtol=0, atol=1e-6)


def test_equal_total_keeps_grpo_total_per_rollout_and_parts_compose():
    batch = hand_batch()
    cfg = EstimatorConfig(norm_std=False)
    adv = {p: ESTIMATORS[METHOD_OF[p]].fn(batch, cfg).advantages for p in PARTS}
    grpo = ESTIMATORS["grpo"].fn(batch, cfg).advantages
    for e in range(3):
        rows = batch.traj_index == e
        assert math.isclose(adv["equal_total"][rows].abs().sum(), grpo[rows].abs().sum(),
                            rel_tol=1e-6)
    # the perfect mask is free_zero and spare_right together
    both = torch.where((adv["free_zero"] == 0) | (adv["spare_right"] == 0), 0.0, grpo)
    torch.testing.assert_close(adv["mask"], both)


def test_missing_labels_are_one_line_naming_the_method():
    batch = hand_batch()
    batch.credit_labels = None
    with pytest.raises(ValueError, match="^oracle: the environment's exact credit labels"):
        ESTIMATORS["oracle"].fn(batch, EstimatorConfig())
    batch.credit_labels = LABELS[:2]
    with pytest.raises(ValueError, match="has 2 episodes, the batch 3"):
        ESTIMATORS["oracle"].fn(batch, EstimatorConfig())


def test_perfect_teacher_gives_sharpo_the_label_as_its_gap():
    """teacher.oracle: gap = +1 / -1 on the action segment of a right / wrong move, 0 on
    every other segment; w = 1 + sign(A) * clip(tanh(gap / 2 tau), +-alpha) (method.md §4)."""
    batch = hand_batch(spans=True)
    batch.old_logp = -torch.rand(batch.response_mask.shape) * batch.response_mask
    batch.teacher_logp = perfect_teacher_logp(batch)
    batch.has_teacher = torch.ones(len(batch), dtype=torch.bool)
    lam, alpha, tau = 1.0, 0.9, 0.5
    out = ESTIMATORS["sharpo"].fn(batch, EstimatorConfig(norm_std=False, lam=lam, alpha=alpha,
                                                         tau=tau))
    u = min(math.tanh(1 / (2 * tau)), alpha)
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        y = {None: 0, True: 1, False: -1}[LABELS[e][t]]
        assert out.segments.gap[b, 0].item() == pytest.approx(0, abs=1e-6)          # think
        assert out.segments.gap[b, 1].item() == pytest.approx(y, abs=1e-6)          # action
        sign = 1 if A[e] > 0 else -1
        assert out.segments.weight[b, 0].item() == pytest.approx(1, abs=1e-6)
        assert out.segments.weight[b, 1].item() == pytest.approx(1 + sign * y * u, abs=1e-6)


def test_config_refuses_labels_where_the_env_has_none_and_oracle_teacher_without_teacher():
    load_config(None, ["env.name=corridor", "method=oracle"])
    load_config(None, ["env.name=corridor", "method=sharpo", "teacher.oracle=true"])
    with pytest.raises(ConfigError, match="^method: .*'synthetic'.*'oracle_equal_total'"):
        load_config(None, ["env.name=synthetic", "method=oracle_equal_total"])
    with pytest.raises(ConfigError, match="^teacher.oracle: "):
        load_config(None, ["env.name=synthetic", "method=sharpo", "teacher.oracle=true"])
    with pytest.raises(ConfigError, match="^teacher.oracle: .*'grpo'"):
        load_config(None, ["env.name=corridor", "method=grpo", "teacher.oracle=true"])


def test_cli_refuses_oracle_on_an_env_without_labels_in_one_line(tmp_path, capsys):
    rc = main(["train", "env.name=synthetic", "method=oracle", f"run_dir={tmp_path / 'r'}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "method" in err, err


CORRIDOR = ["env.name=corridor", "env.num_train=4", "env.num_eval=2", "total_steps=1",
            "rollout.tasks_per_step=1", "rollout.group_size=2", "rollout.max_new_tokens=8",
            "rollout.history_length=0", "log.progress=false",
            "eval.at_end=false", "checkpoint.every=0", "log.save_batches=1"]


@pytest.mark.parametrize("extra", [["method=oracle"], ["method=sharpo", "teacher.oracle=true"]])
def test_a_corridor_run_puts_the_exact_labels_on_the_batch(tmp_path, capsys, monkeypatch, extra):
    from sharpo_train.analysis.rescoring import load_batch, saved_batches
    from sharpo_train.envs.corridor import label_episodes
    from sharpo_train.loops.trainer import Trainer
    seen = {}
    credit = Trainer.credit

    def spy(self, batch):        # the labels are the batch's own typed field
        seen.update(labels=batch.credit_labels, want=label_episodes(batch.episodes))
        return credit(self, batch)
    monkeypatch.setattr(Trainer, "credit", spy)
    run = tmp_path / "run"
    assert main(["train", *CORRIDOR, *extra, f"run_dir={run}"]) == 0, capsys.readouterr().err
    assert seen["labels"] == seen["want"] and not hasattr(StepBatch, "meta")
    (path,) = saved_batches(run)
    batch, _info = load_batch(path)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in lines if x.get("kind") == "train"]
    assert len(train) == 1
    if extra == ["method=oracle"]:
        assert "oracle/abs_ratio_to_grpo" in train[0]
        # the credit report scores the oracle next to the methods (exact labels here)
        from sharpo_train.analysis.rescoring import score_run
        res = score_run(run, ["grpo", "oracle"], n_boot=10)
        assert "skipped" not in res["oracle"] and "skipped" not in res["grpo"], res
    else:   # the saved teacher log-probs are the perfect teacher's
        batch.credit_labels = label_episodes(batch.episodes)
        torch.testing.assert_close(batch.teacher_logp, perfect_teacher_logp(batch))


def test_credit_record_and_explain_page_show_the_oracle_next_to_the_method():
    """With exact labels on the batch, every segment of the credit record carries its
    turn's label and perfect credit's advantage; the page's segment table shows both."""
    from sharpo_train.runs.credit_record import credit_record
    from sharpo_train.analysis.report.explain_html import _segment_table
    batch = hand_batch(spans=True)
    batch.episode_adv = torch.tensor(A)
    batch.teacher_of, batch.hints = [None] * 3, [None] * 3
    out = ESTIMATORS["grpo"].fn(batch, EstimatorConfig(norm_std=False))

    class Tok:
        def decode(self, ids):
            return "x" * len(ids)
    rec = credit_record(1, "grpo", EstimatorConfig(), batch, out, Tok())
    got = [(s["label"], s["advantage_oracle"]) for r in rec["groups"][0]["rollouts"]
           for t in r["turns"] for s in t["segments"][1:]]
    assert got == [(lab, pytest.approx(w, abs=1e-6))
                   for lab, w in zip([x for ep in LABELS for x in ep], WANT["mask"])]
    page = _segment_table([(1, k, s) for k, s in
                           enumerate(rec["groups"][0]["rollouts"][1]["turns"][0]["segments"])])
    assert "A (oracle)" in page and "wrong move" in page
    batch.credit_labels = None      # no exact labels: the page is as before
    rec = credit_record(1, "grpo", EstimatorConfig(), batch, out, Tok())
    seg = rec["groups"][0]["rollouts"][0]["turns"][0]["segments"]
    assert "advantage_oracle" not in seg[0]
    assert "A (oracle)" not in _segment_table([(1, 0, seg[0])])


def _loop_oracle(base, label, mask, traj, part):
    """Row-by-row reading of the oracle table (estimators/oracle.py), float64."""
    B = len(base)
    tokens = [float(mask[b].sum()) for b in range(B)]
    cred = [(base[b] > 0 and label[b] > 0) or (base[b] < 0 and label[b] < 0) for b in range(B)]
    n = {}
    c = {}
    for b in range(B):
        n[int(traj[b])] = n.get(int(traj[b]), 0.0) + tokens[b]
        c[int(traj[b])] = c.get(int(traj[b]), 0.0) + (tokens[b] if cred[b] else 0.0)
    out = torch.zeros(mask.shape, dtype=torch.float64)
    for b in range(B):
        i = int(traj[b])
        s = n[i] / c[i] if c[i] > 0 else 0.0
        a = float(base[b])
        f = {"mask": float(cred[b]), "equal_total": float(cred[b]) * s,
             "free_zero": float(label[b] != 0), "spare_right": float(not (a < 0 and label[b] > 0)),
             "blame_wrong": s if (a < 0 and label[b] < 0) else 1.0}[part]
        out[b] = a * f * mask[b].double()
    return out


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_oracle_parts_match_a_loop_reading_on_random_rows(part, seed):
    g = torch.Generator().manual_seed(seed)
    B, L, n_traj = 37, 13, 7                                    # odd sizes
    traj = torch.randint(0, n_traj, (B,), generator=g)
    ep_adv = torch.randn(n_traj, generator=g, dtype=torch.float64)
    ep_adv[0] = 0.0                                             # a rollout with A_i = 0
    base = ep_adv[traj]
    label = torch.randint(-1, 2, (B,), generator=g).to(torch.float64)
    mask = (torch.rand(B, L, generator=g) < 0.7).to(torch.float64)
    got = oracle_token_advantages(base, label, mask, traj, part)
    torch.testing.assert_close(got, _loop_oracle(base, label, mask, traj, part), rtol=1e-12, atol=1e-12)
    assert torch.isfinite(got).all()


def test_oracle_unknown_part_is_named():
    t = torch.zeros(2)
    with pytest.raises(ValueError, match="^part: expected one of"):
        oracle_token_advantages(t, t, torch.ones(2, 3), torch.zeros(2, dtype=torch.long), "everything")
