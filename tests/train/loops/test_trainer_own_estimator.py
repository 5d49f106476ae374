"""A new estimator with a teacher and a new step hook, defined in this file alone, run
through the trainer (sharpo_train/loops/trainer.py) with no edit to the package: the
trainer asks the estimator's own ``needs_teacher(params)`` whether to assign and score
teachers and its ``base_advantages`` which rows to skip (estimators/registry.py), and
nothing else decides; it calls every registered step hook (step/hooks.py) after the step."""
from dataclasses import dataclass

import pytest
import torch

from sharpo_train.estimators import ESTIMATORS, CreditOutput, GroupParams, register_estimator
from sharpo_train.io import read_jsonl
from sharpo_train.loops.trainer import train
from sharpo_train.settings.loader import setting
from sharpo_train.step.hooks import STEP_HOOKS, register_step_hook

from train.loops.test_trainer_support import format_warm_start, small_config

MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}
SEEN = {"row_base": 0, "has_teacher": [], "hook": [], "closed": 0}


@dataclass
class ToyParams(GroupParams):
    toy_gain: float = setting(0.5, "toy: weight of the teacher gap added to A_i (0: no teacher)")


def toy_needs_teacher(params: ToyParams) -> bool:
    return params.toy_gain != 0


def toy_row_base(batch, params: ToyParams) -> torch.Tensor:
    SEEN["row_base"] += 1
    return batch.episode_advantages(params)[batch.traj_index]


def toy(batch, params: ToyParams) -> CreditOutput:
    """A_i plus gain * (teacher - student) on the rows with a teacher."""
    base = batch.episode_advantages(params)[batch.traj_index]
    mask = batch.response_mask
    SEEN["has_teacher"].append(int(batch.has_teacher.sum()))
    gap = (batch.teacher_logp - batch.old_logp) * batch.has_teacher[:, None]
    return CreditOutput((base[:, None] + params.toy_gain * gap) * mask, base,
                        stats={"toy/rows_with_teacher": int(batch.has_teacher.sum())})


@pytest.fixture(scope="module")
def warm_policy(tmp_path_factory):
    return format_warm_start(tmp_path_factory.mktemp("warm"), MODEL)


class ToyHook:
    def __call__(self, step, batch, credit, rec, seed):
        SEEN["hook"].append((step, rec["toy/rows_with_teacher"], credit.advantages.shape[0]))
        rec["toy/hook_saw_rows"] = len(batch)

    def close(self):
        SEEN["closed"] += 1


@pytest.fixture
def toy_registered():
    register_estimator("toy_teacher", needs_teacher=toy_needs_teacher, params=ToyParams,
                       knob="toy_gain", row_base=toy_row_base)(toy)
    register_step_hook("toy_hook")(lambda cfg, spec, run_dir: ToyHook())
    SEEN.update(row_base=0, has_teacher=[], hook=[], closed=0)
    yield
    ESTIMATORS.pop("toy_teacher", None)
    STEP_HOOKS.pop("toy_hook", None)


def one_step(run_dir, **over) -> dict:
    run = train(small_config(run_dir, method="toy_teacher", total_steps=1, **over))
    return [r for r in read_jsonl(run / "metrics.jsonl") if r["kind"] == "train"][0]


def test_a_toy_estimator_with_a_teacher_runs_through_the_trainer(tmp_path, warm_policy,
                                                                  toy_registered):
    on = one_step(tmp_path / "on", init_from=warm_policy)
    assert on["sharpo/teacher_rows"] > 0 and on["toy/rows_with_teacher"] > 0
    assert SEEN["has_teacher"] == [on["toy/rows_with_teacher"]]
    assert SEEN["row_base"] == 1                 # the estimator's rows picked what to skip
    # the hook ran once, after credit, on the step's metrics line, and was closed
    assert SEEN["hook"] == [(1, on["toy/rows_with_teacher"], on["rows"])]
    assert on["toy/hook_saw_rows"] == on["rows"] and SEEN["closed"] == 1

    SEEN.update(row_base=0, has_teacher=[], hook=[], closed=0)
    off = one_step(tmp_path / "off", init_from=warm_policy, estimator__toy_gain=0.0)
    assert off["sharpo/teacher_rows"] == 0 and off["toy/rows_with_teacher"] == 0
    assert SEEN["row_base"] == 0                 # its rule said no teacher: nothing scored


def test_step_hooks_refuse_bad_registrations():
    with pytest.raises(ValueError, match="name"):
        register_step_hook("credit_quality")          # registered by analysis/step_hooks.py
    with pytest.raises(ValueError, match="name"):
        register_step_hook(" ")
    with pytest.raises(TypeError, match="factory"):
        register_step_hook("toy_not_callable")(3)
    assert "toy_not_callable" not in STEP_HOOKS
