"""The training loop: update direction, gradient accumulation, resume, run directory
contents, the SHARPO path with real teachers, and the `sharpo train` / `sharpo eval` CLI
on the synthetic loop-test task (tests/train/loops/test_trainer_alfworld.py runs ALFWorld)."""
import json
import math

import pytest
import torch

from sharpo_train.runs.checkpoint import load_state
from sharpo_train.cli import main as cli_main
from sharpo_train.io import read_jsonl
from sharpo_train.models.policy import build_policy
from sharpo_train.step.rollout import chat_prompt_ids
from sharpo_train.step.scoring import ScoreStats
from sharpo_train.loops.trainer import Trainer, train
from sharpo_train.step.update import policy_logprobs

from train.loops.test_trainer_support import (format_warm_start, sampled_logprobs, sgd_step, small_config,
                                              two_rows)

MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}
TIMING_KEYS = ("time", "tokens_per_s", "time/rollout", "time/scoring", "time/update")


@pytest.fixture(scope="module")
def warm_policy(tmp_path_factory):
    return format_warm_start(tmp_path_factory.mktemp("warm"), MODEL)


def one_update(cfg, pad_adv: float, agg: str = "token-mean", micro: int = 8):
    torch.manual_seed(0)
    model, tok = build_policy(MODEL)
    rows, _ = two_rows(tok)
    cfg.loss.agg = agg
    cfg.optim.micro_batch_size = micro
    old = sampled_logprobs(model, rows)
    adv = torch.where(rows.response_mask.bool(), torch.tensor([[1.0], [-1.0]]).expand(2, rows.width),
                      torch.full((2, rows.width), pad_adv))
    rows.old_logp, rows.advantages = old, adv
    stats, new = sgd_step(model, rows, cfg)
    return model, old, new, rows, stats


def test_update_moves_logprobs_with_the_advantage_sign_and_ignores_padding(tmp_path):
    cfg = small_config(tmp_path)
    model, old, new, rows, stats = one_update(cfg, pad_adv=0.0)
    m = rows.response_mask
    assert stats["pg_clipfrac"] == 0.0 and abs(stats["grad_norm"]) > 0
    assert ((new - old) * m)[0].sum() > 0          # A > 0: the response got more likely
    assert ((new - old) * m)[1].sum() < 0          # A < 0: less likely
    # advantages written on padding positions must change nothing
    model2, *_ = one_update(cfg, pad_adv=50.0)
    for p1, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p1, p2)


def test_update_norm_is_the_distance_the_weights_moved(tmp_path):
    """log.update_norm: the L2 norm of the step's whole change of the weights (the gated
    study's step-matched control, benchmarks/results/gated.md); off: not in the stats."""
    torch.manual_seed(0)
    start, _tok = build_policy(MODEL)
    before = [p.detach().clone() for p in start.parameters()]
    cfg = small_config(tmp_path)
    cfg.log.update_norm = True
    model, _old, _new, _rows, stats = one_update(cfg, pad_adv=0.0)
    moved = math.sqrt(sum(float((p.detach() - b).pow(2).sum())
                          for p, b in zip(model.parameters(), before)))
    assert moved > 0
    assert stats["update_norm"] == pytest.approx(moved, rel=1e-5)
    cfg.log.update_norm = False
    assert "update_norm" not in one_update(cfg, pad_adv=0.0)[4]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "traj-mean-token-mean"])
def test_micro_batching_gives_the_full_batch_gradient(tmp_path, agg):
    cfg = small_config(tmp_path)
    full, *_ = one_update(cfg, 0.0, agg, micro=2)
    split, *_ = one_update(cfg, 0.0, agg, micro=1)
    for p1, p2 in zip(full.parameters(), split.parameters()):
        torch.testing.assert_close(p1, p2, rtol=1e-5, atol=1e-6)


def strip(records):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def test_resume_repeats_the_straight_run_and_the_sharpo_path(tmp_path, warm_policy):
    straight = train(small_config(tmp_path / "a", init_from=warm_policy, total_steps=2))
    half = small_config(tmp_path / "b", init_from=warm_policy, total_steps=1)
    train(half)
    resumed = train(small_config(tmp_path / "b", init_from=warm_policy, total_steps=2, resume=True))
    a, b = read_jsonl(straight / "metrics.jsonl"), read_jsonl(resumed / "metrics.jsonl")
    assert [r["step"] for r in a] == [1, 2] and strip(a) == strip(b)
    pa, _ = build_policy(MODEL, weights_from=straight / "checkpoints/step_000002/policy")
    pb, _ = build_policy(MODEL, weights_from=resumed / "checkpoints/step_000002/policy")
    for (n, x), (_, y) in zip(pa.state_dict().items(), pb.state_dict().items()):
        assert torch.equal(x, y), n
    sa = load_state(straight / "checkpoints/step_000002")
    sb = load_state(resumed / "checkpoints/step_000002")
    assert sa["trainer"] == sb["trainer"] and sa["scheduler"] == sb["scheduler"]
    assert sa["optimizer"]["param_groups"] == sb["optimizer"]["param_groups"]
    for pid, entry in sa["optimizer"]["state"].items():
        for name, x in entry.items():
            assert torch.equal(x, sb["optimizer"]["state"][pid][name]), (pid, name)

    # the SHARPO path really ran: successful peers, teachers scored, segment weights
    recs = [r for r in a if r["kind"] == "train"]
    assert any(r["sharpo/teacher_rows"] > 0 for r in recs), recs
    r = next(r for r in recs if r["sharpo/teacher_rows"] > 0)
    assert 0.5 <= r["sharpo/weight_min"] <= r["sharpo/weight_max"] <= 1.5
    assert 0 < r["sharpo/teacher_coverage"] <= 1
    assert r["scoring/tokens_through_model"] < r["scoring/tokens_unshared"]
    for key in ("step", "time", "method", "reward_mean", "success", "adv/mean", "adv/std",
                "adv/abs_mean", "sharpo/teacher_coverage", "sharpo/gap_mean", "sharpo/gap_std",
                "sharpo/weight_mean", "sharpo/weight_min", "sharpo/weight_max",
                "sharpo/clipped_frac", "sharpo/length_factor_min", "sharpo/length_factor_max",
                "loss", "pg_clipfrac", "kl", "entropy", "grad_norm", "lr", "tokens_per_s",
                "time/rollout", "time/scoring", "time/update", "episodes", "turns_mean"):
        assert key in r, key
    assert any(k.startswith("success/") for k in r)

    credit = json.loads((straight / "credit" / f"step_{r['step']:05d}.json").read_text())
    assert credit["method"] == "sharpo" and credit["estimator_config"]["lam"] == 0.2
    rollouts = [ro for g in credit["groups"] for ro in g["rollouts"]]
    with_teacher = [ro for ro in rollouts if ro["has_teacher"]]
    assert with_teacher and all(ro["hint"].startswith("A successful attempt") for ro in with_teacher)
    winners = {(g["task_id"], ro["index"]) for g in credit["groups"] for ro in g["rollouts"] if ro["success"]}
    for g in credit["groups"]:
        for ro in g["rollouts"]:
            if ro["has_teacher"]:
                assert (g["task_id"], ro["hint_from"]) in winners and ro["hint_from"] != ro["index"]
    segs = [s for ro in with_teacher if ro["advantage_grpo"] != 0 for t in ro["turns"] for s in t["segments"]]
    assert segs and all(s["kind"] in ("think", "action") and s["num_tokens"] > 0 for s in segs)
    assert any(s["gap"] is not None for s in segs)
    for s in segs:
        assert math.copysign(1, s["advantage"]) == math.copysign(1, s["advantage_grpo"])


def test_run_directory_refuses_to_overwrite(tmp_path):
    cfg = small_config(tmp_path, total_steps=1)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(ValueError, match="run_dir"):
        Trainer(cfg)


def test_cli_train_then_eval(tmp_path):
    run = tmp_path / "run"
    rc = cli_main(["train", "--config", "configs/synthetic_smoke.yaml", f"run_dir={run}",
                   "total_steps=1", "method=grpo", "log.progress=false",
                   "rollout.max_new_tokens=8", "rollout.max_turns=2"])
    assert rc == 0
    for name in ("config.yaml", "metrics.jsonl", "eval.json", "checkpoints/latest",
                 "checkpoints/step_000001/policy/model.safetensors", "checkpoints/step_000001/state.json",
                 "credit/step_00001.json"):
        assert (run / name).exists(), name
    lines = read_jsonl(run / "metrics.jsonl")
    assert [l["kind"] for l in lines] == ["train", "eval"]
    assert lines[0]["method"] == "grpo" and lines[0]["sharpo/teacher_rows"] == 0
    (run / "eval.json").unlink()
    assert cli_main(["eval", "--run", str(run), "rollout.max_new_tokens=8"]) == 0
    # `sharpo eval` writes a new RUN/eval-<time>.json, never the run's own eval.json
    (written,) = run.glob("eval-*.json")
    assert not (run / "eval.json").exists()
    result = json.loads(written.read_text())
    assert set(result) == {"success", "per_family", "per_family_episodes", "episodes", "games",
                           "per_task"} and result["episodes"] == 2
    # one outcome per task played, 0/1, agreeing with the rate
    assert len(result["per_task"]) == 2 and set(result["per_task"].values()) <= {0, 1}
    assert sum(result["per_task"].values()) / 2 == result["success"]


def test_kl_to_the_frozen_reference_and_several_optimizer_steps(tmp_path):
    cfg = small_config(tmp_path, total_steps=2, method="grpo", loss__use_kl=True,
                       optim__mini_batches=2, optim__ppo_epochs=2, log__credit_every=0)
    run = train(cfg)
    recs = [r for r in read_jsonl(run / "metrics.jsonl") if r["kind"] == "train"]
    # step 1 starts at the reference (its first mini-batch has KL 0; 3 more optimizer
    # steps follow); step 2 starts 4 optimizer steps away from it
    assert 0 <= recs[0]["kl"] < 1e-4 and recs[1]["kl"] > recs[0]["kl"]
    assert not (run / "credit").exists()


def test_resume_without_a_checkpoint_starts_over(tmp_path):
    # a run stopped before its first checkpoint: its marker (run_dir.py) and a metrics line
    (tmp_path / ".sharpo-run").write_text('{"format": "sharpo-run/1"}\n')
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "kind": "train"}\n')
    run = train(small_config(tmp_path, total_steps=1, resume=True, method="grpo",
                             rollout__max_turns=1, rollout__max_new_tokens=8))
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == [1]


def test_a_step_where_every_environment_fails_is_logged_not_fatal(tmp_path):
    from sharpo_train.envs.base import Env, SerialEnvPool

    class Broken(Env):
        def reset(self, task):
            raise RuntimeError("engine down")

        def step(self, action):
            raise AssertionError("never stepped")

    tr = Trainer(small_config(tmp_path, total_steps=1))
    tr.pool = SerialEnvPool(Broken)
    rec = tr.step(1)
    assert rec["rows"] == 0 and rec["env_faults"] == rec["episodes"] == 8
    assert rec["success"] == 0.0 and rec["loss"] == 0.0


def test_shared_prefix_update_gives_the_same_gradient(tmp_path):
    """Rows with one prompt (a group's first turn) plus rows with their own prompts: the
    loss gradient through shared-prefix forwards equals the plain full-row one (fp32)."""
    torch.manual_seed(0)
    model, tok = build_policy(MODEL)
    p1 = chat_prompt_ids(tok, "Your task is to: make the counter show 3. The counter shows 1.")
    p2 = chat_prompt_ids(tok, "Your task is to: make the counter show 7.")
    resp = [tok(t)["input_ids"] for t in ("<think>a</think><action>increase</action>",
                                          "<think>b b</think><action>decrease</action>",
                                          "no tags", "<think>c</think>")]
    prompts = [p1, p1, p1, p2]
    width = max(len(r) for r in resp)
    weights = torch.randn(4, width)

    stats = ScoreStats()

    def grads(shared):
        model.zero_grad()
        lp, en = policy_logprobs(model, prompts, resp, width, temperature=0.8,
                                 shared_prefix=dict(min_shared_tokens=4, chunk_tokens=5,
                                                    stats=stats) if shared else None)
        ((lp * weights).sum() + en.sum()).backward()
        return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}
    lp_plain, g_plain = grads(False)
    lp_shared, g_shared = grads(True)
    assert stats.tokens_through_model <= sum(map(len, prompts + resp)) - 2 * len(p1)   # p1 ran once
    torch.testing.assert_close(lp_shared, lp_plain, rtol=1e-5, atol=1e-5)
    for n in g_plain:
        torch.testing.assert_close(g_shared[n], g_plain[n], rtol=1e-4, atol=1e-6, msg=n)
    # and through update_policy: the same parameters after a step
    cfg = small_config(tmp_path)
    a, *_ = one_update(cfg, 0.0)
    cfg.optim.shared_prefix_update = True
    b, *_ = one_update(cfg, 0.0)
    for p1_, p2_ in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p1_, p2_, rtol=1e-5, atol=1e-6)


def test_final_eval_is_not_repeated_when_eval_every_hits_the_last_step(tmp_path):
    run = train(small_config(tmp_path / "run", total_steps=2, eval__every=2, eval__at_end=True))
    lines = read_jsonl(run / "metrics.jsonl")
    assert [(l["kind"], l["step"]) for l in lines] == [("train", 1), ("train", 2), ("eval", 2)]
    assert json.loads((run / "eval.json").read_text())["episodes"] == 2


def test_eval_before_training_and_on_a_fixed_training_sample(tmp_path):
    """eval.before_train: an eval line at step 0 (the policy before any update), once even
    when the run is resumed; eval.train_tasks: every eval also plays the same training tasks
    (eval/train_success), and the learning-curve plot draws them."""
    cfg = small_config(tmp_path / "run", total_steps=2, eval__every=2, eval__at_end=True,
                       eval__before_train=True, eval__train_tasks=3)
    run = train(cfg)
    lines = read_jsonl(run / "metrics.jsonl")
    assert [(l["kind"], l["step"]) for l in lines] == [("eval", 0), ("train", 1), ("train", 2),
                                                        ("eval", 2)]
    for line in (lines[0], lines[3]):
        assert line["eval/train_episodes"] == 3 and 0 <= line["eval/train_success"] <= 1
    cfg.total_steps, cfg.resume = 3, True        # resumed: no second step-0 evaluation
    train(cfg)
    lines = read_jsonl(run / "metrics.jsonl")
    assert [l["step"] for l in lines if l["kind"] == "eval"] == [0, 2, 3]
    from sharpo_train.analysis.report.curves import plot_learning_curves, run_curves
    assert run_curves(run)["train_eval"][0] == [0, 2, 3]
    png = plot_learning_curves({"SHARPO": [run]}, tmp_path / "curve.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_env_faults_leave_the_step_and_are_counted(tmp_path):
    """Episodes whose environment failed mid-episode give no rows and are
    counted as env_faults; the healthy episodes train as usual."""
    from sharpo_train.envs.base import SerialEnvPool
    from sharpo_train.envs.synthetic import CounterEnv

    made = []

    class FailsAtSecondStep(CounterEnv):
        def __init__(self):
            super().__init__(max_steps=3)
            self.slot, self.calls = len(made), 0
            made.append(self)

        def step(self, action):
            self.calls += 1
            if self.slot in (1, 2, 6) and self.calls == 2:
                raise RuntimeError("worker died")
            return super().step(action)

    tr = Trainer(small_config(tmp_path, total_steps=1, method="grpo",
                              rollout__max_new_tokens=8, log__credit_every=1))
    tr.pool = SerialEnvPool(FailsAtSecondStep)
    rec = tr.step(1)
    assert rec["env_faults"] == 3 and rec["episodes"] == 8
    credit = json.loads((tmp_path / "credit" / "step_00001.json").read_text())
    rollouts = [ro for g in credit["groups"] for ro in g["rollouts"]]
    faulted = [ro for ro in rollouts if ro["env_fault"]]
    assert len(faulted) == 3 and all("worker died" in ro["env_fault"] for ro in faulted)
    assert all(ro["advantage_grpo"] == 0 for ro in faulted)
    # the faulted episodes played 2 turns each, none of them is trained on
    assert all(len(ro["turns"]) == 2 for ro in faulted)
    healthy_turns = sum(len(ro["turns"]) for ro in rollouts if not ro["env_fault"])
    assert rec["rows"] == healthy_turns > 0


def test_the_policy_loss_is_chosen_by_name(tmp_path):
    from sharpo_train.step.losses import POLICY_LOSSES, register_policy_loss

    @register_policy_loss("test_no_signal")
    def no_signal(logp, old_logp, advantages, loss_cfg):
        return 0.0 * logp, torch.zeros_like(logp, dtype=torch.bool)
    try:
        cfg = small_config(tmp_path)
        cfg.loss.policy_loss = "test_no_signal"
        _, old, new, rows, stats = one_update(cfg, pad_adv=0.0)
        assert stats["grad_norm"] == 0.0 and stats["pg_loss"] == 0.0
        torch.testing.assert_close(new, old)        # nothing moved
        cfg.loss.policy_loss = "ppo_clip"
        _, old, new, rows, stats = one_update(cfg, pad_adv=0.0)
        assert stats["grad_norm"] > 0 and not torch.allclose(new, old)
    finally:
        POLICY_LOSSES.pop("test_no_signal")
