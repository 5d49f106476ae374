"""SHARPO at lam = 0 costs what GRPO costs in the trainer (``method=sharpo``,
sharpo_train/loops/trainer.py): no teacher assigned, built or scored, so the scoring pass
runs exactly the student sequences GRPO runs (counted at ``tree_logprobs``), the advantages
are GRPO's, and the dashboard says coverage 0, weight 1 (``estimators/sharpo_stats.py: lam_zero_stats``)."""
import pytest
import torch

import sharpo_train.loops.trainer as trainer_module
from sharpo_train.io import read_jsonl
from sharpo_train.loops.trainer import train

from train.loops.test_trainer_support import format_warm_start, small_config

REAL = trainer_module.tree_logprobs
MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}


@pytest.fixture(scope="module")
def warm_policy(tmp_path_factory):
    return format_warm_start(tmp_path_factory.mktemp("warm"), MODEL)


def counted_run(run_dir, monkeypatch, **over):
    """One training step; -> (its metrics line, [number of sequences of each tree_logprobs
    call], the step's credit record)."""
    calls = []

    def counting(model, seqs, counts, **kw):
        calls.append(len(seqs))
        return REAL(model, seqs, counts, **kw)

    monkeypatch.setattr(trainer_module, "tree_logprobs", counting)
    run = train(small_config(run_dir, total_steps=1, log__credit_every=1, **over))
    rec = [r for r in read_jsonl(run / "metrics.jsonl") if r["kind"] == "train"][0]
    return rec, calls, run


def test_lam_zero_scores_what_grpo_scores(tmp_path, warm_policy, monkeypatch):
    grpo, grpo_calls, _ = counted_run(tmp_path / "grpo", monkeypatch, method="grpo", init_from=warm_policy)
    zero, zero_calls, _ = counted_run(tmp_path / "zero", monkeypatch, method="sharpo", init_from=warm_policy,
                                      estimator__lam=0.0)
    some, some_calls, _ = counted_run(tmp_path / "some", monkeypatch, method="sharpo", init_from=warm_policy,
                                      estimator__lam=0.2)
    assert some["sharpo/teacher_rows"] > 0 and sum(some_calls) > sum(grpo_calls)    # the test can fail
    assert zero_calls == grpo_calls                                                  # no teacher sequence
    assert zero["sharpo/teacher_rows"] == 0
    assert zero["scoring/tokens_unshared"] == grpo["scoring/tokens_unshared"]
    assert zero["scoring/tokens_through_model"] == grpo["scoring/tokens_through_model"]
    assert zero["sharpo/teacher_coverage"] == 0.0 and zero["sharpo/weight_mean"] == 1.0
    assert zero["sharpo/segments_scored"] == 0
    for key in ("adv/mean", "adv/std", "adv/abs_mean", "reward_mean"):
        assert zero[key] == pytest.approx(grpo[key], abs=1e-6), key
