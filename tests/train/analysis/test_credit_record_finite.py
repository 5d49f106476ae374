"""A credit record holding NaN or Infinity (sharpo writes non-finite numbers as null, so
someone else wrote them) is an error naming the record, never a rendered report (probe
round of inputs round four: `sharpo explain` drew it)."""
import json
from pathlib import Path

import pytest

from sharpo_train.analysis.report.records import CreditRecordError, load_credit_record


def record(rollout_extra=None) -> dict:
    rollout = {"index": 0, "reward": 1.0, "success": True, "advantage_grpo": 0.5,
               "env_fault": None, "has_teacher": False, "hint_from": None, "hint": None,
               "turns": []}
    rollout.update(rollout_extra or {})
    return {"step": 1, "method": "grpo", "estimator_config": {},
            "groups": [{"task_id": "t", "family": "f", "rollouts": [rollout]}]}


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_number_in_a_credit_record_is_refused(tmp_path, token):
    (tmp_path / "credit").mkdir()
    text = json.dumps(record()).replace('"advantage_grpo": 0.5', f'"advantage_grpo": {token}')
    assert token in text
    (tmp_path / "credit" / "step_00001.json").write_text(text)
    with pytest.raises(CreditRecordError, match=f"step_00001.json: holds the non-finite "
                                                f"number {token}"):
        load_credit_record(tmp_path, 1)
    (tmp_path / "credit" / "step_00001.json").write_text(json.dumps(record()))
    assert load_credit_record(tmp_path, 1)["method"] == "grpo"
