"""One SHARPO definition: the coefficients stated once, in the kernel, and read
by every settings class; one set of step statistics; one registry rule; defaults
importable without triton."""
import dataclasses
import math
import subprocess
import sys

import pytest
import torch

from sharpo_kernels import COEFFICIENT_NAMES, SHARPO_DEFAULTS, SharpoCoefficients, segment_advantage
from sharpo_train.estimators.sharpo_stats import StepStatInputs, sharpo_step_stats, step_stats
from sharpo_train.step.teacher_rule import teacher_coverage
from sharpo_train.estimators import ESTIMATORS, register_estimator
from sharpo_train.estimators.sharpo import SharpoParams
from sharpo_train.step.batch import StepBatch
from sharpo_train.recipes.recipe_config import parse_method
from sharpo_train.recipes.recipe_config import method_run


def test_loading_a_trainer_config_does_not_import_triton():
    code = ("import sys; from sharpo_train.loops.train_config import load_config; "
            "c = load_config(None, []); p = c.estimator.params('sharpo'); "
            "from sharpo_kernels import SHARPO_DEFAULTS; assert p.lam == SHARPO_DEFAULTS.lam; "
            "print('triton' in sys.modules, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"], out.stdout + out.stderr
    code = "import sharpo_kernels; print(callable(sharpo_kernels.token_logprobs))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"          # the log-prob ops still load on first use


def test_trainer_params_take_the_kernels_coefficients():
    fields = {f.name: f for f in dataclasses.fields(SharpoParams)}
    for f in dataclasses.fields(SharpoCoefficients):
        assert fields[f.name].default == f.default and fields[f.name].metadata == f.metadata
    assert SharpoCoefficients.of(SharpoParams()) == SHARPO_DEFAULTS
    assert SharpoCoefficients.of({**SHARPO_DEFAULTS.kwargs(), "lam": 0.05}).lam == 0.05
    assert COEFFICIENT_NAMES == ("lam", "alpha", "tau", "rho_min", "rho_max")


def test_a_name_registered_twice_is_refused():
    with pytest.raises(ValueError, match="'sharpo' is already registered"):
        register_estimator("sharpo")(lambda batch, params: None)
    assert ESTIMATORS["sharpo"].label == "SHARPO"           # the first one stays


def test_labels_come_from_the_estimator():
    try:
        register_estimator("test_knobbed", params=SharpoParams, knob="lam", label="Test",
                           knob_label="λ")(lambda batch, params: None)
        assert parse_method("test_knobbed") == ("test_knobbed", SHARPO_DEFAULTS.lam)
        assert method_run("test_knobbed", 0.5)[:2] == ("Test (λ=0.5)", "test_knobbed-lam0.5")
    finally:
        ESTIMATORS.pop("test_knobbed", None)
    with pytest.raises(ValueError, match="knob_label"):
        register_estimator("test_no_knob", knob_label="λ")
    assert method_run("grpo", None)[:2] == ("GRPO", "grpo")
    assert method_run("sharpo", 0.2)[:2] == ("SHARPO (λ=0.2)", "sharpo-lam0.2")
    assert method_run("gigpo", 0.5)[:2] == ("GiGPO (gigpo_step_weight=0.5)", "gigpo-0.5")
    assert method_run("sharpo_rho", None)[:2] == ("SHARPO ρ-only", "sharpo_rho")
    assert method_run("rlsd", None)[:2] == ("RLSD", "rlsd")
    assert parse_method("gigpo") == ("gigpo", None)


def _segments(seed=0, B=6, L=12):
    g = torch.Generator().manual_seed(seed)
    student = -torch.rand(B, L, generator=g)
    teacher = student + 0.3 * torch.randn(B, L, generator=g)
    seg_ids = (torch.arange(L) // 4).repeat(B, 1)
    base = torch.tensor([1.0, 1.0, -0.5, -0.5, 0.0, 2.0])
    has = torch.tensor([True, False, True, True, False, False])
    traj = torch.tensor([0, 0, 1, 1, 2, 3])
    seg = segment_advantage(teacher, student, seg_ids, base, has_teacher=has, traj_index=traj)
    return seg, base, has, traj


def test_coverage_counts_trajectories_and_is_nan_when_empty():
    _, _, has, traj = _segments()
    assert teacher_coverage(has, traj) == 0.5              # trajectories 0 and 1 of 4
    assert teacher_coverage(has) == 0.5                    # one row per trajectory: 3 of 6
    assert math.isnan(teacher_coverage(torch.zeros(0, dtype=torch.bool)))
    seg, base, has, traj = _segments()
    stats = sharpo_step_stats(seg, base, has, alpha=0.5, tau=1.0, traj_index=traj)
    assert stats["sharpo/teacher_coverage"] == 0.5 and stats["sharpo/segments_scored"] > 0
    empty = step_stats(StepStatInputs(*(torch.zeros(0),) * 3, torch.zeros(0, dtype=torch.bool)),
                       alpha=0.5, tau=1.0)
    assert all(math.isnan(v) for k, v in empty.items() if k != "sharpo/segments_scored")
    assert empty["sharpo/segments_scored"] == 0


def test_split_steps_give_the_whole_steps_statistics():
    seg, base, has, traj = _segments()
    whole = sharpo_step_stats(seg, base, has, alpha=0.5, tau=1.0, traj_index=traj)
    halves = []
    for rows in (slice(0, 4), slice(4, 6)):
        part = type(seg)(*(t[rows] if t.dim() else t for t in seg))
        halves.append(StepStatInputs.of(part, base[rows], has[rows], traj[rows]))
    split = step_stats(StepStatInputs.cat(halves), alpha=0.5, tau=1.0)
    assert split.keys() == whole.keys()
    for k in whole:
        assert split[k] == pytest.approx(whole[k], rel=1e-6, nan_ok=True), k


def test_score_returns_its_counters_and_fills_typed_fields(tmp_path, monkeypatch):
    """Trainer.score reads in one sitting: named steps, counters returned (ScoreCounts) for
    the metrics line; what the estimators read are the batch's typed fields (A_i with the
    (norm_std, eps) it was computed with, the step), no untyped side dict."""
    from sharpo_train.loops.trainer import ScoreCounts, Trainer
    from train.loops.test_trainer_support import small_config

    seen = {}
    score = Trainer.score

    def spy(self, batch, rng, step):
        seen["counts"] = score(self, batch, rng, step)
        seen["norm"], seen["step"] = batch.episode_adv_norm, batch.step
        return seen["counts"]
    monkeypatch.setattr(Trainer, "score", spy)
    trainer = Trainer(small_config(tmp_path / "run", total_steps=1))
    try:
        rec = trainer.step(1)
    finally:
        trainer.pool.close()
        trainer.engine.close()
        trainer.lock.release()
    counts = seen["counts"]
    assert isinstance(counts, ScoreCounts)
    assert not hasattr(StepBatch, "meta") and "meta" not in StepBatch.__dataclass_fields__
    assert seen["step"] == 1 and seen["norm"] == (True, 1e-6), seen["norm"]
    assert rec["sharpo/teacher_rows"] == counts.teacher_rows
    assert rec["scoring/tokens_unshared"] == counts.tokens_unshared > 0
    assert rec["scoring/tokens_through_model"] == counts.tokens_through_model > 0
