"""Credit quality (sharpo_train/analysis/credit_auc.py and rescoring.py, docs/credit_quality.md): the AUC against
a plain pairwise reference, segment coefficients, planner labels against a fresh engine
that plans at every step, saved batches (safetensors + JSON) and offline scoring."""
import dataclasses
import json
import os
import random

import numpy as np
import pytest
import torch

from sharpo_train.step.batch import StepBatch
from sharpo_train.errors import ConfigError
from sharpo_train.loops.train_config import load_config
from sharpo_train.estimators import EstimatorConfig
from sharpo_train.estimators.sharpo_stats import scored_segments
from sharpo_train.analysis.credit_auc import TIE_TOLERANCE, Segments, credit_auc, action_credit, step_credit_quality
from sharpo_train.analysis.rescoring import PROFILE_CLASSES, load_batch, results_table, save_batch, score_batches, weight_profile
from sharpo_train.envs.base import Task
from sharpo_train.estimators import ESTIMATORS
from sharpo_train.step.rollout import Episode, Turn
from sharpo_train.step.segments import Span


# ---------------------------------------------------------------- AUC
def reference_auc(c, y, s, r):
    """Plain loops: pairs (deserving, other) within one rollout; deserving = on-plan in a
    success, off-plan in a failure; 1 if the deserving one's coefficient is larger, 1/2
    on a tie."""
    wins = pairs = 0.0
    for i in range(len(c)):
        for j in range(len(c)):
            if r[i] != r[j]:
                continue
            di = y[i] if s[i] else not y[i]
            dj = y[j] if s[j] else not y[j]
            if di and not dj:
                pairs += 1
                tol = TIE_TOLERANCE * max(1.0, abs(c[i]), abs(c[j]))
                wins += 0.5 if abs(c[i] - c[j]) <= tol else float(c[i] > c[j])
    return wins / pairs if pairs else float("nan")


def random_segments(rng, n_rollouts, ties=False):
    c, y, s, r, g = [], [], [], [], []
    for k in range(n_rollouts):
        succ = bool(rng.random() < 0.5)
        for _ in range(int(rng.integers(1, 8))):
            c.append(float(rng.integers(0, 3)) if ties else float(rng.normal()))
            y.append(bool(rng.random() < 0.6))
            s.append(succ)
            r.append(k)
            g.append(k // 3)
    return [np.array(v) for v in (c, y, s, r, g)]


@pytest.mark.parametrize("seed,n,ties", [(0, 1, False), (1, 7, False), (2, 13, True), (3, 31, True)])
def test_auc_matches_plain_reference(seed, n, ties):
    rng = np.random.default_rng(seed)
    c, y, s, r, g = random_segments(rng, n, ties)
    out = credit_auc(c, y, s, r, g, n_boot=200, seed=seed)
    want = reference_auc(c, y, s, r)
    if np.isnan(want):
        assert np.isnan(out["auc"])
    else:
        assert out["auc"] == pytest.approx(want, abs=1e-12)
        assert out["lo"] <= out["hi"]
    for part, keep in (("auc_success", s), ("auc_failure", ~s)):
        w = reference_auc(c[keep], y[keep], s[keep], r[keep])
        assert (np.isnan(out[part]) and np.isnan(w)) or out[part] == pytest.approx(w, abs=1e-12)
    assert out["segments"] == len(c)


def test_grpo_is_one_half_and_direction():
    rng = np.random.default_rng(5)
    c, y, s, r, g = random_segments(rng, 20)
    ones = credit_auc(np.ones_like(c), y, s, r, g, n_boot=100)
    assert ones["auc"] == 0.5 and ones["lo"] == 0.5 and ones["hi"] == 0.5 and ones["pairs"] > 0
    deserving = np.where(s, y, ~y)
    perfect = credit_auc(np.where(deserving, 2.0, 0.5), y, s, r, g, n_boot=100)
    assert perfect["auc"] == 1.0 and perfect["lo"] == 1.0
    worst = credit_auc(np.where(deserving, 0.5, 2.0), y, s, r, g, n_boot=100)
    assert worst["auc"] == 0.0


def test_bootstrap_is_over_groups_and_seeded():
    rng = np.random.default_rng(7)
    c, y, s, r, g = random_segments(rng, 40)
    a = credit_auc(c, y, s, r, g, n_boot=300, seed=1)
    b = credit_auc(c, y, s, r, g, n_boot=300, seed=1)
    d = credit_auc(c, y, s, r, g, n_boot=300, seed=2)
    assert a == b and (a["lo"], a["hi"]) != (d["lo"], d["hi"])
    assert a["lo"] < a["auc"] < a["hi"] and a["groups"] == len(np.unique(g))
    # one group per rollout vs all in one group: one group cannot vary
    one = credit_auc(c, y, s, r, np.zeros_like(g), n_boot=50)
    assert one["lo"] == one["hi"] == pytest.approx(one["auc"])
    assert np.isnan(credit_auc(c, y, s, r, None)["lo"])


def test_auc_bad_input():
    c, y, s, r = np.ones(3), np.ones(3, bool), np.ones(3, bool), np.zeros(3, int)
    with pytest.raises(ValueError, match="labels"):
        credit_auc(c, y[:2], s, r)
    with pytest.raises(ValueError, match="rollout"):
        credit_auc(c, y, s, r[:1])
    with pytest.raises(ValueError, match="coeffs"):
        credit_auc(np.array([1.0, np.nan, 1.0]), y, s, r)
    with pytest.raises(ValueError, match="success"):
        credit_auc(c, y, np.array([True, False, True]), r)
    with pytest.raises(ValueError, match="level"):
        credit_auc(c, y, s, r, level=1.5)


# ---------------------------------------------------------------- coefficients, batches
def make_batch(seed=0, teacher=True):
    """2 groups x 3 episodes, 2-4 turns each, random responses with think/action spans."""
    rng = random.Random(seed)
    eps = []
    for g, succ in enumerate([(True, False, False), (True, True, False)]):
        for i, ok in enumerate(succ):
            ep = Episode(Task(f"t{g}", "Pick", f"/nowhere/{g}"), g, i, reward=float(ok), success=ok)
            for t in range(rng.randint(2, 4)):
                n = rng.randint(5, 11)
                a0 = rng.randint(2, n - 2)
                spans = [Span("think", 0, a0), Span("action", a0, n - 1)] if rng.random() < 0.8 else []
                ep.turns.append(Turn(f"Your task is to: t{g}.\nturn {t}", list(range(3, 9 + t)),
                                     [rng.randint(4, 90) for _ in range(n)], "r", f"go to {t}",
                                     f"obs {t}", spans))
            eps.append(ep)
    batch = StepBatch.from_episodes(eps)
    batch.episode_adv = batch.episode_advantages(EstimatorConfig())
    gen = torch.Generator().manual_seed(seed)
    B, L = len(batch), batch.width
    batch.old_logp = -torch.rand(B, L, generator=gen) * batch.response_mask
    if teacher:
        batch.teacher_logp = -torch.rand(B, L, generator=gen) * batch.response_mask
        batch.has_teacher = torch.rand(B, generator=gen) < 0.7
        batch.teacher_of = [None] * len(eps)
        batch.hints = [None] * len(eps)
    labels = [[rng.random() < 0.6 for _ in ep.turns] for ep in eps]
    labels[1][0] = None                                       # an unknown label is skipped
    return batch, labels


def test_action_credit_reference():
    batch, labels = make_batch(1)
    gen = torch.Generator().manual_seed(3)
    adv = torch.randn(len(batch), batch.width, generator=gen) * batch.response_mask
    seg = action_credit(batch, adv, labels)
    want = []
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        a = float(batch.episode_adv[e])
        if labels[e][t] is None or a == 0:
            continue
        turn = batch.episodes[e].turns[t]
        acts = [sp for sp in turn.spans if sp.kind == "action"]
        toks = range(acts[0].start, acts[0].end) if acts else range(len(turn.response_ids))
        want.append(sum(float(adv[b, k]) for k in toks) / len(toks) / a)
    assert len(want) > 5
    np.testing.assert_allclose(seg.coeff, want, rtol=1e-6)
    grpo = ESTIMATORS["grpo"].fn(batch, EstimatorConfig())
    g = action_credit(batch, grpo.advantages, labels)
    assert (g.coeff == 1.0).all()
    res = step_credit_quality(batch, grpo.advantages, labels)
    assert res["credit_quality/auc"] == 0.5 and res["credit_quality/labelled_frac"] < 1


def test_saved_batch_roundtrip_and_offline_scoring(tmp_path):
    batch, labels = make_batch(2)
    save_batch(tmp_path, 7, batch, method="sharpo", labels=labels)
    assert sorted(p.name for p in (tmp_path / "batches").iterdir()) == \
        ["step_00007.json", "step_00007.safetensors"]
    back, info = load_batch(tmp_path / "batches" / "step_00007.json")
    assert info["step"] == 7 and info["labels"] == labels
    for name in ("rewards", "group_of", "traj_index", "response_mask", "segment_ids",
                 "episode_adv", "old_logp", "teacher_logp", "has_teacher", "env_fault"):
        assert torch.equal(getattr(back, name), getattr(batch, name)), name
    assert back.prompt_ids == batch.prompt_ids and back.response_ids == batch.response_ids
    assert [t.spans for e in back.episodes for t in e.turns] == \
        [t.spans for e in batch.episodes for t in e.turns]
    cfg = EstimatorConfig()
    for m in ("grpo", "sharpo"):
        torch.testing.assert_close(ESTIMATORS[m].fn(back, cfg).advantages,
                                   ESTIMATORS[m].fn(batch, cfg).advantages, rtol=0, atol=0)
    res = score_batches([tmp_path / "batches" / "step_00007.json"], cfg, ["grpo", "sharpo"],
                        n_boot=50)
    assert res["grpo"]["auc"] == 0.5
    seg = action_credit(batch, ESTIMATORS["sharpo"].fn(batch, cfg).advantages, labels)
    direct = credit_auc(seg.coeff, seg.on_plan, seg.success, seg.rollout, seg.group)
    assert res["sharpo"]["auc"] == pytest.approx(direct["auc"])
    assert "| sharpo |" in results_table(res)
    # an environment without exact labels (the default, ALFWorld): the oracle is skipped
    res = score_batches([tmp_path / "batches" / "step_00007.json"], cfg, ["oracle"], n_boot=5)
    assert "exact credit labels" in res["oracle"]["skipped"]
    # a run without teachers: teacher methods are reported as skipped, not crashed
    plain, labels2 = make_batch(3, teacher=False)
    save_batch(tmp_path / "g", 1, plain, method="grpo", labels=labels2)
    res = score_batches([tmp_path / "g" / "batches" / "step_00001.json"], cfg, ["grpo", "sharpo"])
    assert "skipped" in res["sharpo"] and res["grpo"]["auc"] == 0.5
    with pytest.raises(ValueError, match="methods"):
        score_batches([], cfg, ["nope"])
    with pytest.raises(FileNotFoundError):
        load_batch(tmp_path / "batches" / "step_00099.json")


def test_saved_batch_is_not_pickle(tmp_path):
    batch, labels = make_batch(4)
    save_batch(tmp_path, 1, batch, method="sharpo", labels=labels)
    json.loads((tmp_path / "batches" / "step_00001.json").read_text())   # plain JSON
    from safetensors.torch import load_file
    assert "old_logp" in load_file(str(tmp_path / "batches" / "step_00001.safetensors"))


def test_config_keys_validated():
    cfg = load_config(None, ["log.credit_quality=true", "log.save_batches=2"])
    assert cfg.log.credit_quality and cfg.log.save_batches == 2
    assert load_config(None).log.credit_quality is False
    with pytest.raises(ConfigError, match="log.save_batches"):
        load_config(None, ["log.save_batches=-1"])
    with pytest.raises(ConfigError, match="log.credit_quality"):
        load_config(None, ["env.name=synthetic", "log.credit_quality=true"])
    with pytest.raises(ConfigError, match="teacher.hint_placement"):
        load_config(None, ["teacher.hint_placement=before_task"])


# ---------------------------------------------------------------- planner labels (real engine)
@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory):
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld.agents.environment.alfred_tw_env")
    from sharpo_train.envs.alfworld.generator import generate_games
    root = tmp_path_factory.mktemp("cq_games")
    os.environ.setdefault("ALFWORLD_DATA", str(root))
    generate_games(root, 3, seed=5, split="train", size="tiny")
    return root


@pytest.fixture(scope="module")
def tiny_games(tiny_root):
    from sharpo_train.envs.alfworld.games import discover_games
    return list(discover_games(tiny_root, "train"))


def reference_plan_lengths(game_file, actions):
    """A fresh engine that asks for the planner's plan at every state (PddlEnv's
    policy_commands info): plan length before the first action and after each."""
    from sharpo_train.envs.alfworld.engine import engine_modules, normalize_command
    mods = engine_modules()
    env = mods["AlfredInfos"](mods["AlfredDemangler"](mods["PddlEnv"](
        mods["textworld"].EnvInfos(won=True, admissible_commands=True, policy_commands=True))))
    env.load(game_file)
    state = env.reset()
    lengths = [len(state["policy_commands"])]
    for a in actions:
        state, _, _ = env.step(normalize_command(a))
        lengths.append(0 if state["won"] else len(state["policy_commands"] or []) or None)
    env.close()
    return lengths


def test_planner_labels_against_a_fresh_engine(tiny_games):
    from sharpo_train.envs.alfworld.plan_labels import PlanLabeller
    from sharpo_train.envs.alfworld.games import GAME_FILE
    from sharpo_train.envs.alfworld.engine import AlfWorldEnv
    from sharpo_train.envs.alfworld.games import task_of
    lab = PlanLabeller()
    rng = random.Random(0)
    seen = {True: 0, False: 0}
    try:
        for game in tiny_games:
            task = task_of(game)
            path = os.path.join(task.source, GAME_FILE)
            env = AlfWorldEnv(max_steps=12, expert="planner")
            env.reset(task)
            plan = env.expert_plan()
            # the plan itself: every action keeps the plan
            assert lab.label(path, plan) == [True] * len(plan)
            # a random walk with invalid/idle actions mixed in, plus the observations
            acts, obs = [], []
            for _ in range(8):
                cands = env._state["admissible_commands"]
                a = rng.choice([rng.choice(cands), None, "look", env.expert_action() or "look"])
                r = env.step(a)
                acts.append(a)
                obs.append(r.observation.text)
                if r.done:
                    break
            env.close()
            ref = reference_plan_lengths(path, acts)
            want = [None if ref[k] is None or ref[k + 1] is None else ref[k + 1] == ref[k] - 1
                    for k in range(len(acts))]
            got = lab.label(path, acts, obs)
            assert got == want
            for v in got:
                if v is not None:
                    seen[v] += 1
            # idle actions never keep the plan
            assert all(g is False for g, a in zip(got, acts) if a in (None, "look"))
            # a wrong observation stops the labels there
            if len(acts) > 1:
                bad = list(obs)
                bad[1] = "something else"
                mism = lab.stats["mismatches"]
                assert lab.label(path, acts, bad) == got[:1] + [None] * (len(acts) - 1)
                assert lab.stats["mismatches"] == mism + 1
        assert seen[True] and seen[False]
        assert lab.stats["cache_hits"] > 0
    finally:
        lab.close()


# ---------------------------------------------------------------- sharpo explain
def test_explain_shows_logged_auc_and_scores_saved_batches(write_run, tmp_path, capsys):
    from sharpo_train.cli import main
    run = write_run(tmp_path / "run")
    rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        if r["kind"] == "train":
            r.update({"credit_quality/auc": 0.25 + 0.1 * r["step"], "credit_quality/auc_lo": 0.1,
                      "credit_quality/auc_hi": 0.9, "credit_quality/auc_success": 0.7,
                      "credit_quality/auc_failure": 0.3, "credit_quality/pairs": 10 * r["step"],
                      "credit_quality/on_plan_frac": 0.5})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["explain", str(run), "--step", "3", "--episode", "1",
                 "--out", str(tmp_path / "page")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert "id='credit-quality-table'" in page and page.count("<tr") >= 4
    assert "<td>0.550</td>" in page                   # step 3's AUC
    pairs = [10, 20, 30, 40]
    want = sum((0.25 + 0.1 * s) * p for s, p in zip((1, 2, 3, 4), pairs)) / sum(pairs)
    assert f"credit AUC (sharpo): {want:.3f} over 4 logged step(s)" in capsys.readouterr().out
    # offline scoring: no saved batches -> one line, exit 2; then with batches
    assert main(["explain", str(run), "--credit-quality"]) == 2
    assert "no saved batches" in capsys.readouterr().err
    (run / "config.yaml").write_text("method: sharpo\n")
    batch, labels = make_batch(5)
    save_batch(run, 3, batch, method="sharpo", labels=labels)
    assert main(["explain", str(run), "--credit-quality", "--methods", "grpo,sharpo"]) == 0
    out = capsys.readouterr().out
    assert "| grpo | 0.500 | [0.500, 0.500]" in out and "| sharpo |" in out
    assert (run / "report" / "credit_quality.md").read_text().count("| grpo |") == 1
    assert main(["explain", str(run), "--credit-quality", "--methods", "nope"]) == 2


def test_trainer_logs_credit_quality_and_saves_batches(tiny_root, tmp_path):
    """One training step on generated games with log.credit_quality and log.save_batches:
    the metrics line carries the credit_quality keys, the saved batch holds the planner
    labels (one per turn) and the token entropies (so EMPG can be scored offline)."""
    from train.loops.test_trainer_support import small_config
    from sharpo_train.io import read_jsonl
    from sharpo_train.loops.trainer import train
    root = str(tiny_root)
    cfg = small_config(tmp_path / "run", total_steps=1,
                       env={"name": "alfworld", "games_dir": root, "train_split": "train",
                            "eval_split": "", "max_steps": 4, "workers": 0},
                       rollout__max_turns=3, rollout__max_new_tokens=8, rollout__group_size=2,
                       log__credit_quality=True, log__save_batches=1, log__credit_every=0)
    run = train(cfg)
    line = [l for l in read_jsonl(run / "metrics.jsonl") if l["kind"] == "train"][0]
    for key in ("auc", "auc_lo", "auc_hi", "pairs", "segments", "labelled_frac",
                "on_plan_frac", "planner_calls", "mismatches"):
        assert f"credit_quality/{key}" in line, key
    assert line["credit_quality/labelled_frac"] == 1.0 and line["credit_quality/mismatches"] == 0
    assert line["credit_quality/planner_calls"] >= 1
    batch, info = load_batch(run / "batches" / "step_00001.json")
    assert [len(l) for l in info["labels"]] == [len(ep.turns) for ep in batch.episodes]
    assert all(isinstance(v, bool) for l in info["labels"] for v in l)
    assert batch.old_entropy is not None and batch.old_entropy.shape == batch.old_logp.shape
    res = score_batches([run / "batches" / "step_00001.json"], cfg.estimator, ["grpo", "empg"],
                        n_boot=10)
    assert "skipped" not in res["empg"]


def test_weight_profile_classes_and_saturation():
    batch, labels = make_batch(2)
    params = dataclasses.replace(EstimatorConfig().params("sharpo"), lam=1.0, alpha=0.9, tau=1e-3)
    out = ESTIMATORS["sharpo"].fn(batch, params)
    res = weight_profile([(batch, out, labels)], alpha=0.9)
    # reference: walk the spans directly
    want = {c: [] for c in PROFILE_CLASSES}
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        if not batch.has_teacher[b] or out.base[b] == 0:
            continue
        for k, sp in enumerate(batch.episodes[e].turns[t].spans):
            c = ("other " if labels[e][t] is None else "decisive ") + (
                "reasoning" if sp.kind == "think" else "action")
            want[c].append((float(out.segments.gap[b, k]),
                            abs(float(out.segments.weight[b, k]) - 1)))
    assert sum(len(v) for v in want.values()) == int(scored_segments(
        out.segments.gap, out.base, batch.has_teacher).sum()) > 5
    for c in PROFILE_CLASSES:
        assert res[c]["segments"] == len(want[c])
        if want[c]:
            g, d = np.array(want[c]).T
            assert res[c]["gap_mean"] == pytest.approx(g.mean())
            assert res[c]["gap_abs_mean"] == pytest.approx(np.abs(g).mean())
            assert res[c]["w_dev_mean"] == pytest.approx(d.mean())
    # tau -> 0: every nonzero gap saturates; a wide tau saturates (almost) none
    assert res["decisive action"]["saturated_frac"] == 1.0
    soft = weight_profile([(batch, ESTIMATORS["sharpo"].fn(
        batch, dataclasses.replace(params, tau=100.0)), labels)], alpha=0.9)
    assert soft["decisive action"]["saturated_frac"] == 0.0
    assert soft["decisive reasoning"]["w_dev_mean"] < res["decisive reasoning"]["w_dev_mean"]
    with pytest.raises(ValueError, match="out"):
        weight_profile([(batch, ESTIMATORS["grpo"].fn(batch, EstimatorConfig()), labels)], alpha=0.9)
