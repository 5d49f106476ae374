"""A new estimator with a teacher, defined and registered in this file alone, run through
the TRL drop-in (SharpoGRPOTrainer, sharpo_train/integrations/trl.py) with no edit to the
package: ``SharpoConfig(estimator="toy_zero", estimator_params={...})``. The drop-in asks the
estimator's own ``needs_teacher(params)`` whether the teacher pass runs and its ``fn`` for
the [B, T] advantages TRL's loss reads (trl_estimator.py), as loops/trainer.py does; SHARPO's
path is the default and its tests (test_trl_trainer.py ...) are unchanged."""
from dataclasses import dataclass

import pytest
import torch

from integrations.trl_support import config, grpo_trl, needs_trl, same_rows, script_sampling, tiny_policy
from sharpo_train.estimators import ESTIMATORS, CreditOutput, GroupParams, register_estimator
from sharpo_train.settings.loader import in_range, setting

pytestmark = needs_trl

SUCCESS = "<think>the door is closed</think><action>open door</action>"
FAIL = "<think>hmm</think><action>look around</action>"
SEEN: list = []


@dataclass
class ToyZeroParams(GroupParams):
    toy_scale: float = setting(1.0, "toy: A_i's factor on rows without a teacher (0: no teacher pass)")

    def validate(self) -> None:
        super().validate()
        in_range(self, "toy_scale", 0, 10)


def toy_zero(batch, params: ToyZeroParams) -> CreditOutput:
    """toy_scale * A_i on every generated token of a row without a teacher, 0 on a row whose
    teacher was scored; records the batch it got."""
    SEEN.append(batch)
    base = batch.episode_advantages(params)[batch.traj_index]                  # [B]
    keep = (~batch.has_teacher).float() * params.toy_scale                      # [B]
    return CreditOutput((base * keep)[:, None] * batch.response_mask, base,
                        stats={"toy/zeroed_rows": float(batch.has_teacher.sum())})


@pytest.fixture
def toy_registered():
    register_estimator("toy_zero", needs_teacher=lambda p: p.toy_scale != 0,
                       params=ToyZeroParams)(toy_zero)
    SEEN.clear()
    yield
    ESTIMATORS.pop("toy_zero", None)


def train(tmp_path, **over):
    """Two steps of the tiny policy on scripted completions (half succeed); -> (trainer,
    [B, T] advantages each loss pass read, the teacher passes' input ids)."""
    from datasets import Dataset

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: get out."}]}
                              for i in range(8)])

    def reward_open(completions, **kw):
        return [1.0 if "open door" in c[-1]["content"] else 0.0 for c in completions]

    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward_open,
                                args=config(tmp_path, max_steps=2, **over), train_dataset=data,
                                processing_class=tok)
    read, inner = [], trainer._compute_loss

    def loss(model, inputs):
        out = inner(model, inputs)
        read.append(inputs["advantages"].detach().clone())
        return out

    trainer._compute_loss = loss
    trainer.train()
    assert trainer.state.global_step == 2
    return trainer, read


def test_a_toy_estimator_with_a_teacher_runs_through_the_trl_drop_in(tmp_path, toy_registered):
    trainer, read = train(tmp_path, estimator="toy_zero", estimator_params={"toy_scale": 2.0})
    assert len(SEEN) == 2 == len(read) and trainer._sharpo_params.toy_scale == 2.0
    moved = 0
    for batch, adv in zip(SEEN, read):                      # one loss pass per step here
        has = batch.has_teacher
        # the teacher pass reached the estimator: its log-probs differ from the student's
        assert not torch.equal(batch.teacher_logp[has], batch.old_logp[has])
        assert torch.equal(batch.teacher_logp[~has], batch.old_logp[~has])
        assert torch.isfinite(batch.old_logp).all()         # the student pass ran (TRL skipped it)
        # A_i is TRL's own GRPO advantage
        torch.testing.assert_close(batch.episode_advantages(trainer._sharpo_params).double(),
                                   grpo_trl(batch.rewards, 4), rtol=1e-5, atol=1e-5)
        # TRL's loss read the toy's advantages: 0 on the rows with a teacher, 2 A_i elsewhere
        want = (2.0 * batch.episode_adv * (~has).float())[:, None] * batch.response_mask
        assert same_rows(adv, want)
        moved += int((has & (batch.episode_adv != 0)).sum())   # rows the toy changed
    assert torch.equal(trainer.sharpo_last["advantages"], want)
    assert 0 < int(SEEN[0].has_teacher.sum()) < len(SEEN[0]) and moved > 0
    logged = [h for h in trainer.state.log_history if "toy/zeroed_rows" in h]
    assert len(logged) == 2 and logged[-1]["sharpo/teacher_coverage"] > 0


def test_its_rule_skips_the_teacher_pass(tmp_path, toy_registered, monkeypatch):
    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    passes = []
    real = SharpoGRPOTrainer._sharpo_teacher_prompt
    monkeypatch.setattr(SharpoGRPOTrainer, "_sharpo_teacher_prompt",
                        lambda self, *a: passes.append(1) or real(self, *a))
    trainer, read = train(tmp_path, estimator="toy_zero", estimator_params='{"toy_scale": 0}')
    assert passes == [] and trainer.sharpo_last["teacher_rows"] == []
    assert all(not b.has_teacher.any() for b in SEEN)
    assert all((a == 0).all() for a in read)                # toy_scale 0: every advantage 0


def test_a_bad_estimator_is_refused_naming_the_field(tmp_path, toy_registered):
    with pytest.raises(ValueError, match=r"estimator: .*'toy_zer0'.*did you mean 'toy_zero'"):
        config(tmp_path, estimator="toy_zer0")
    with pytest.raises(ValueError, match=r"estimator_params: .*'toy_scal'.*did you mean 'toy_scale'"):
        config(tmp_path, estimator="toy_zero", estimator_params={"toy_scal": 1.0})
    with pytest.raises(ValueError, match=r"estimator_params\.toy_scale: "):
        config(tmp_path, estimator="toy_zero", estimator_params={"toy_scale": 11.0})
    with pytest.raises(ValueError, match=r"estimator_params: 'eps' is TRL's"):
        config(tmp_path, estimator="toy_zero", estimator_params={"eps": 1e-3})
    with pytest.raises(ValueError, match=r"estimator_params: SHARPO's settings"):
        config(tmp_path, estimator_params={"lam": 0.3})
    with pytest.raises(ValueError, match=r"estimator: 'oracle' reads the environment's exact"):
        config(tmp_path, estimator="oracle")


def test_hf_argument_parser_reads_the_estimator_fields(tmp_path, toy_registered):
    from transformers import HfArgumentParser

    from sharpo_train.integrations.trl import SharpoConfig

    (args,) = HfArgumentParser(SharpoConfig).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--use_cpu", "--estimator", "toy_zero",
         "--estimator_params", '{"toy_scale": 0.5}'], look_for_args_file=False)
    assert args.estimator == "toy_zero" and args.estimator_params == {"toy_scale": 0.5}
    default = SharpoConfig(output_dir=str(tmp_path), use_cpu=True)
    assert default.estimator == "sharpo" and default.estimator_params is None
    helps = HfArgumentParser(SharpoConfig).format_help()
    assert "registered estimator" in helps and "estimator_params" in helps


@pytest.mark.parametrize("name, params", [("rlsd", {"rlsd_lam": 0.5}), ("empg", {})])
def test_the_projects_own_estimators_run_through_it(tmp_path, name, params):
    """RLSD (a teacher) and EMPG (token entropies: ``needs_entropy``) unchanged: TRL's loss
    reads what their function gives on the step's batch."""
    trainer, read = train(tmp_path, estimator=name, estimator_params=params)
    last, est = trainer.sharpo_last, ESTIMATORS[name]
    batch = last["batch"]
    assert (batch.old_entropy is not None) == est.needs_entropy
    assert bool(batch.has_teacher.any()) == est.needs_teacher(trainer._sharpo_params)
    again = est.fn(batch, trainer._sharpo_params).advantages
    torch.testing.assert_close(last["advantages"], again)
    assert same_rows(read[-1], again) and again.abs().sum() > 0
