"""SHARPO over another base advantage (``estimator.base``; docs/estimators.md, "SHARPO over
another base"): lam = 0 is the base exactly (float64 comparison), lam > 0 is the base
reweighted per segment (docs/method.md §4 with the row's base as A_i), a base that is no
base-advantage estimator is refused, and the base reads its own ``estimator.*`` keys."""
import pytest
import torch

from sharpo_kernels.testing import segment_advantage_loop
from sharpo_train.errors import ConfigError
from sharpo_train.loops.train_config import load_config
from sharpo_train.estimators import ESTIMATORS, EstimatorConfig
from sharpo_train.estimators.sharpo import SharpoParams, base_estimators
from sharpo_train.recipes.recipe_config import parse_methods
from sharpo_train.step.batch import StepBatch
from sharpo_train.envs.base import Task
from sharpo_train.step.rollout import Episode, Turn
from sharpo_train.step.segments import Span


def turn(n_tokens, obs_after, spans=()):
    return Turn("u", [1, 2, 3], list(range(10, 10 + n_tokens)), "", "a", obs_after,
                spans=list(spans))


def batch_of(spec):
    """spec: [(group, reward, [turn, ...]), ...] -> StepBatch.from_episodes."""
    return StepBatch.from_episodes([Episode(Task(f"t{g}", "Pick"), g, i, turns, reward=r,
                                            success=r > 0)
                                    for i, (g, r, turns) in enumerate(spec)])


def reached_batch():
    """Two groups of three; rows with think + action segments; a teacher on most rows.
    ep0 and ep1 both reach observation "A" (one GiGPO anchor group of two)."""
    spans = [Span("think", 0, 3), Span("action", 3, 5)]
    b = batch_of([(0, 1.0, [turn(6, "A", spans), turn(5, "won", spans)]),
                  (0, 0.0, [turn(6, "A", spans), turn(5, "lost", spans)]),
                  (0, 1.0, [turn(5, "won", spans)]),
                  (1, 1.0, [turn(5, "B", spans), turn(6, "won", spans)]),
                  (1, 0.0, [turn(6, "lost", spans)]),
                  (1, 0.0, [turn(4, "lost", [Span("action", 1, 3)])])])
    g = torch.Generator().manual_seed(0)
    b.old_logp = -torch.rand(len(b), b.width, generator=g) * 3 * b.response_mask
    b.teacher_logp = b.old_logp + torch.randn(len(b), b.width, generator=g) * b.response_mask
    b.has_teacher = torch.tensor([True, True, True, False, True, True, True, True, True])
    b.step = 1
    return b


def sharpo_params(**kw):
    cfg = EstimatorConfig(gigpo_gamma=0.5, gigpo_step_weight=1.0, **kw)
    return cfg.params("sharpo")


@pytest.mark.parametrize("base", ["grpo", "gigpo"])
def test_lam_zero_is_the_base_exactly(base):
    b = reached_batch()
    want = ESTIMATORS[base].fn(b, EstimatorConfig(gigpo_gamma=0.5, gigpo_step_weight=1.0).params(base))
    got = ESTIMATORS["sharpo"].fn(b, sharpo_params(lam=0.0, base=base))
    assert torch.equal(got.advantages.double(), want.advantages.double())
    assert bool(want.advantages.ne(0).any())


def test_gigpo_base_is_reweighted_per_segment_with_the_rows_own_sign():
    b = reached_batch()
    gigpo = ESTIMATORS["gigpo"].fn(b, EstimatorConfig(gigpo_gamma=0.5).params("gigpo"))
    row = gigpo.advantages[:, 0].double()                        # every row's first token is generated
    got = ESTIMATORS["sharpo"].fn(b, sharpo_params(lam=0.4, base="gigpo"))
    want, *_ = segment_advantage_loop(b.teacher_logp, b.old_logp, b.segment_ids, row,
                                      has_teacher=b.has_teacher, lam=0.4,
                                      response_mask=b.response_mask, traj_index=b.traj_index)
    torch.testing.assert_close(got.advantages.double(), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got.base.double(), row)
    # the step term makes rows of one episode differ, so this is not GRPO's A_i reweighted
    grpo = ESTIMATORS["sharpo"].fn(b, sharpo_params(lam=0.4))
    assert not torch.allclose(got.advantages, grpo.advantages)
    assert got.stats["gigpo/anchor_groups"] > 0 and "sharpo/weight_mean" in got.stats


def test_sharpo_rho_takes_the_base_too():
    b = reached_batch()
    gigpo = ESTIMATORS["gigpo"].fn(b, EstimatorConfig(gigpo_gamma=0.5).params("gigpo"))
    got = ESTIMATORS["sharpo_rho"].fn(b, EstimatorConfig(gigpo_gamma=0.5, lam=0.0, base="gigpo")
                                      .params("sharpo_rho"))
    assert torch.equal(got.advantages, gigpo.advantages)


def test_the_base_reads_its_own_keys_and_defaults_without_them():
    b = reached_batch()
    p = EstimatorConfig(base="gigpo", gigpo_gamma=0.5, gigpo_mode="mean_std_norm").params("sharpo")
    assert p.base_params.gigpo_gamma == 0.5 and p.base_params.gigpo_mode == "mean_std_norm"
    # params built by hand (no estimator.* config): the base's defaults
    plain = SharpoParams(lam=0.0, base="gigpo")
    want = ESTIMATORS["gigpo"].fn(b, EstimatorConfig().params("gigpo"))
    assert torch.equal(ESTIMATORS["sharpo"].fn(b, plain).advantages, want.advantages)


def test_only_base_advantage_estimators_are_accepted(tmp_path):
    assert {"grpo", "gigpo"} <= set(base_estimators())
    assert "empg" not in base_estimators() and "sharpo" not in base_estimators()
    for bad in ("empg", "gipgo", "sharpo"):
        with pytest.raises(ConfigError, match=r"estimator\.base: expected one of \['grpo', 'gigpo'"):
            load_config(None, [f"estimator.base={bad}", "method=sharpo"])
    cfg = load_config(None, ["method=sharpo", "estimator.base=gigpo"])
    assert cfg.estimator.params("sharpo").base == "gigpo"


def test_a_base_with_token_varying_advantages_is_refused(monkeypatch):
    from sharpo_train.estimators import registry

    b = reached_batch()
    est = ESTIMATORS["gigpo"]

    def varying(batch, params):
        out = est.fn(batch, params)
        out.advantages = out.advantages * torch.arange(batch.width).float()
        return out
    monkeypatch.setitem(ESTIMATORS, "gigpo", registry.Estimator(varying, est.params,
                                                                base_advantage=True))
    with pytest.raises(ValueError, match="estimator.base: 'gigpo' gave one row different"):
        ESTIMATORS["sharpo"].fn(b, sharpo_params(lam=0.2, base="gigpo"))


def test_compare_arm_over_gigpo_has_its_own_label_and_folder():
    (label, slug, over), = parse_methods("sharpo:0.2@estimator.base=gigpo")
    assert label == "SHARPO (λ=0.2, base=gigpo)" and slug == "sharpo-lam0.2-basegigpo"
    assert over == ["method=sharpo", "estimator.lam=0.2", "estimator.base=gigpo"]
