"""Every registered credit method through `sharpo train method=NAME` (the CLI, in process)
on the synthetic task from a format warm start, so that rollouts succeed and fail and
teachers exist (docs/estimators.md)."""
import math

import pytest
import torch

from sharpo_train.cli import main as cli_main
from sharpo_train.io import read_jsonl

from train.loops.test_trainer_support import format_warm_start

MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}
METHOD_KEYS = {
    "gigpo": ["gigpo/anchor_groups", "gigpo/step_adv_abs_mean"],
    "rlsd": ["rlsd/lambda", "rlsd/weight_mean", "rlsd/gap_mean"],
    "serl": ["serl/lambda", "serl/weight_mean"],
    "opsd": ["opsd/gap_mean", "opsd/teacher_tokens"],
    "sdar": ["sdar/gate_mean", "aux_loss"],
    "empg": ["empg/step_entropy_mean", "empg/scale_min", "empg/scale_max"],
}


@pytest.fixture(scope="module")
def warm_policy(tmp_path_factory):
    return format_warm_start(tmp_path_factory.mktemp("warm"), MODEL)


@pytest.mark.parametrize("method", sorted(METHOD_KEYS))
def test_every_method_trains_through_the_cli(tmp_path, warm_policy, method):
    run = tmp_path / "run"
    rc = cli_main(["train", "--config", "configs/synthetic_smoke.yaml", f"run_dir={run}",
                   "total_steps=1", f"method={method}", f"init_from={warm_policy}",
                   "env.max_distance=1", "log.progress=false",
                   "eval.at_end=false", "checkpoint.every=0"])
    assert rc == 0
    (line,) = [r for r in read_jsonl(run / "metrics.jsonl") if r["kind"] == "train"]
    assert line["method"] == method
    for key in METHOD_KEYS[method] + ["loss", "adv/abs_mean"]:
        assert key in line, key
    assert math.isfinite(line["loss"]) and line["grad_norm"] > 0
    if ESTIMATOR_NEEDS_TEACHER[method]:
        assert line["sharpo/teacher_rows"] > 0      # the teacher path really ran
    if method == "rlsd":
        assert line["rlsd/lambda"] == pytest.approx(0.5 * (1 - 1 / 50))   # step 1
    assert (run / "credit" / "step_00001.json").exists()


from sharpo_train.estimators import ESTIMATORS  # noqa: E402

ESTIMATOR_NEEDS_TEACHER = {m: ESTIMATORS[m].needs_teacher(ESTIMATORS[m].params())
                          for m in METHOD_KEYS}


def sdar_update(coef: float, micro: int):
    """One SGD step of the update on two rows with zero advantages and the SDAR term on
    row 0 (teacher log-probs one nat above the student's): only the term moves the policy."""
    from sharpo_train.loops.train_config import config_from_dict
    from sharpo_train.estimators import AuxLoss
    from sharpo_train.models.policy import build_policy
    from train.loops.test_trainer_support import sampled_logprobs, sgd_step, two_rows

    torch.manual_seed(0)
    model, tok = build_policy(MODEL)
    rows, _ = two_rows(tok)
    cfg = config_from_dict({"env": {"name": "synthetic"}, "model": MODEL})
    cfg.optim.micro_batch_size = micro
    old = sampled_logprobs(model, rows)
    rows.old_logp, rows.advantages = old, torch.zeros(2, rows.width)
    weight = rows.response_mask.clone()
    weight[1] = 0
    rows.aux_loss = AuxLoss("sdar_distill", coef, {"teacher_logp": old + 1.0, "weight": weight},
                            {"beta": 5.0})
    stats, new = sgd_step(model, rows, cfg)
    return old, new, rows, stats


def test_the_update_adds_the_estimators_loss_term():
    old, new, rows, stats = sdar_update(0.0, 8)
    assert torch.allclose(new, old, atol=1e-6) and stats["aux_loss"] != 0   # coef 0: no step
    old, new, rows, stats = sdar_update(1.0, 8)
    m0 = rows.response_mask[0].bool()
    # the gated term pulls the sampled tokens of the row with a teacher up
    assert (new[0][m0] - old[0][m0]).mean() > 1e-3
    # aux_loss = token-mean over both rows of g (T - logp) = mean over row-0 tokens * share
    n0, n = rows.response_mask[0].sum(), rows.response_mask.sum()
    assert stats["aux_loss"] == pytest.approx(float(torch.sigmoid(torch.tensor(5.0)) * n0 / n),
                                              rel=1e-4)
    _, new1, _, stats1 = sdar_update(1.0, 1)                  # micro-batches of one row
    assert torch.allclose(new1, new, atol=1e-5)
    assert stats1["aux_loss"] == pytest.approx(stats["aux_loss"], rel=1e-5)


def test_sharpo_compare_runs_the_field_methods(tmp_path, monkeypatch):
    """`sharpo compare --methods` with the new methods: each run gets its method and knob
    (training replaced by a recorder, as tests/train/recipes/test_compare.py; real training above)."""
    from train.recipes.compare_support import fake_phases, write_fake_run

    calls = []

    def fake_train(cfg):
        calls.append((cfg.method, cfg.seed, cfg.estimator.rlsd_lam, cfg.estimator.sdar_coef))
        return write_fake_run(cfg, [{"step": 1, "kind": "train", "success": 0.5}],
                              {"success": 0.5, "per_family": {"Pick": 0.5}, "episodes": 4})

    fake_phases(monkeypatch, fake_train, {"success": 0.1, "per_family": {"Pick": 0.2}, "episodes": 4})
    out = tmp_path / "cmp"
    assert cli_main(["compare", "--out", str(out), "--seeds", "0", "--methods",
                     "gigpo,rlsd:0.3,serl,opsd,sdar:0.05,empg"]) == 0
    assert sorted(c[0] for c in calls) == ["empg", "gigpo", "opsd", "rlsd", "sdar", "serl"]
    assert ("rlsd", 0, 0.3, 0.01) in calls and ("sdar", 0, 0.5, 0.05) in calls
    md = (out / "compare.md").read_text()
    for label in ("GiGPO", "RLSD (rlsd_lam=0.3)", "SERL", "OPSD", "SDAR (sdar_coef=0.05)", "EMPG"):
        assert f"| {label} |" in md, label
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "empg-seed0", "gigpo-seed0", "opsd-seed0", "rlsd-0.3-seed0", "sdar-0.05-seed0",
        "serl-seed0"]
