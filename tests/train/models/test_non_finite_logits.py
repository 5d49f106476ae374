"""Finite weights that give non-finite logits (a norm weight of 3e38 overflows in the
forward pass) are an error naming the checkpoint, never a score of 0.0 nor a
multinomial traceback: `sharpo eval --run-dir`, `--model`, sampled evaluation and
`train --resume` (step/finite_logits.py; issue 47, HIGH 3)."""
import shutil
from pathlib import Path

import pytest
import torch

from train.models.test_non_finite_weights import one_line_error, resize

ROOT = Path(__file__).resolve().parents[3]
FAST = ["log.progress=false", "rollout.max_new_tokens=8", "rollout.max_turns=2",
        "eval.at_end=false", "checkpoint.every=1"]


def overflowing(policy: Path) -> None:
    """model.norm.weight = 3e38 in ``policy``/model.safetensors: finite, checked as such,
    and the final norm's output overflows to inf."""
    from safetensors.torch import load_file, save_file
    f = policy / "model.safetensors"
    tensors = load_file(str(f))
    tensors["model.norm.weight"] = torch.full_like(tensors["model.norm.weight"], 3e38)
    assert all(bool(torch.isfinite(t).all()) for t in tensors.values())
    save_file(tensors, str(f), metadata={"format": "pt"})


@pytest.fixture
def run(done_run, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    ckpt = run / "checkpoints" / "step_000001"
    overflowing(ckpt / "policy")
    resize(ckpt)
    return run


@pytest.mark.parametrize("sampled", [[], ["eval.temperature=1.0"]])
def test_eval_run_dir_with_overflowing_weights_is_refused_naming_the_checkpoint(
        run, capsys, sampled):
    one_line_error(capsys, ["eval", "--run-dir", str(run), "eval.num_tasks=2", *sampled],
                   "step_000001/policy", "NaN or inf", "unusable")
    assert not list(run.glob("eval-*.json"))


def test_eval_model_with_overflowing_weights_is_refused_naming_the_folder(
        run, tmp_path, capsys):
    policy = run / "checkpoints" / "step_000001" / "policy"
    out = tmp_path / "r.json"
    one_line_error(capsys, ["eval", "--model", str(policy), "--config",
                            str(run / "config.yaml"), "--out", str(out), "eval.num_tasks=2"],
                   str(policy), "NaN or inf")
    assert not out.exists()


def test_resume_from_overflowing_weights_stops_naming_the_checkpoint(run, capsys):
    one_line_error(capsys, ["train", "--resume", "--run-dir", str(run), "total_steps=2",
                            *FAST], "step 2", "step_000001", "NaN or inf", "training stopped")
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_000001"


def test_the_guard_marks_nan_posinf_and_all_neginf_rows_only():
    from sharpo_train.errors import UsageError
    from sharpo_train.step.finite_logits import FiniteLogitsGuard, NonFiniteLogitsError
    inf = float("inf")
    guard = FiniteLogitsGuard()
    ok = torch.tensor([[0.0, -inf, 1.0], [2.0, 3.0, -inf]])     # top-p leaves -inf: fine
    assert torch.equal(guard(None, ok), ok)
    guard.check()
    for bad in ([float("nan"), 0.0, 1.0], [inf, 0.0, 1.0], [-inf, -inf, -inf]):
        g = FiniteLogitsGuard()
        scores = torch.tensor([[0.5, 1.0, 2.0], bad])
        out = g(None, scores)
        assert torch.equal(out[0], scores[0]) and torch.equal(out[1], torch.zeros(3))
        with pytest.raises(NonFiniteLogitsError, match="NaN or inf"):
            g.check()
        assert issubclass(NonFiniteLogitsError, UsageError)
