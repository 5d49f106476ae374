"""The estimator registry's parameters (sharpo_train/estimators/registry.py): each method's
own params dataclass, its defaults and validation, the flat ``estimator.*`` keys built from
the registry, unknown keys refused by name, and SHARPO's defaults from one definition."""
import dataclasses
from dataclasses import dataclass

import pytest
import torch

from sharpo_kernels import SHARPO_DEFAULTS, SharpoCoefficients, segment_advantage
from sharpo_train.errors import ConfigError
from sharpo_train.loops.train_config import load_config
from sharpo_train.settings.loader import in_range, load_settings
from sharpo_train.estimators import (ESTIMATORS, CreditOutput, EstimatorConfig, GroupParams,
                                     register_estimator)
from sharpo_train.estimators.sharpo import SharpoParams
from sharpo_train.estimators.gigpo import GigpoParams
from sharpo_train.estimators.self_distill import RlsdParams

# the estimator.* keys users and saved config.yaml files have (before the registry owned them)
USER_KEYS = {"norm_std", "eps", "lam", "alpha", "tau", "rho_min", "rho_max", "backend",
             "gigpo_gamma", "gigpo_step_weight", "gigpo_mode", "rlsd_lam",
             "rlsd_warmdown_steps", "rlsd_clip_eps", "opsd_coef", "sdar_coef", "sdar_beta",
             "empg_k", "empg_k_future", "empg_zeta",
             "weight_segments",   # added later (default "all": the method)
             "base",              # added later (default "grpo": the method)
             "weight_side",       # added later (default "both": the method)
             "gate_theta", "gate_kappa", "gate_soft_theta", "mask_seed"}   # added later: new methods (gated.py)


@pytest.fixture
def registered():
    """Register test estimators; they are removed afterwards."""
    names = []

    def add(name, **kw):
        names.append(name)
        return register_estimator(name, **kw)
    yield add
    for n in names:
        ESTIMATORS.pop(n, None)


def test_user_facing_keys_and_defaults_are_kept():
    cfg = load_config(None, [])
    assert {f.name for f in dataclasses.fields(cfg.estimator)} == USER_KEYS
    e = cfg.estimator
    assert (e.norm_std, e.eps, e.gigpo_gamma, e.gigpo_mode, e.rlsd_lam, e.rlsd_warmdown_steps,
            e.opsd_coef, e.sdar_beta, e.empg_zeta) == (True, 1e-6, 0.95, "mean_norm", 0.5, 50,
                                                       0.1, 5.0, 0.1)
    assert e.weight_segments == "all" and e.base == "grpo" and e.weight_side == "both"


def test_each_method_gets_its_own_params_with_the_config_values():
    cfg = load_config(None, ["method=gigpo", "estimator.gigpo_gamma=0.5", "estimator.eps=1e-4",
                             "estimator.lam=0.05"])
    p = cfg.estimator.params("gigpo")
    assert type(p) is GigpoParams and p.gigpo_gamma == 0.5 and p.eps == 1e-4
    assert not hasattr(p, "lam")                       # other methods' keys are not its own
    assert type(cfg.estimator.params("serl")) is RlsdParams     # one class, two methods
    assert type(cfg.estimator.params("grpo")) is GroupParams
    s = cfg.estimator.params("sharpo")
    assert type(s) is SharpoParams and s.lam == 0.05 and s.eps == 1e-4
    with pytest.raises(ValueError, match="method"):
        cfg.estimator.params("ppo")


def test_sharpo_defaults_come_from_the_kernel_definition():
    want = dataclasses.asdict(SHARPO_DEFAULTS)
    assert want == dict(lam=0.2, alpha=0.5, tau=1.0, rho_min=0.25, rho_max=4.0)
    p = SharpoParams()
    assert {k: getattr(p, k) for k in want} == want
    e = EstimatorConfig()
    assert {k: getattr(e, k) for k in want} == want
    import inspect
    sig = inspect.signature(segment_advantage).parameters
    assert {k: sig[k].default for k in want} == want
    from sharpo_train.recipes.recipe_config import parse_method
    assert parse_method("sharpo") == ("sharpo", SHARPO_DEFAULTS.lam)


def test_sharpo_params_use_the_kernel_check():
    for kw, key in (({"lam": 1.5}, "lam"), ({"alpha": 0.0}, "alpha"), ({"tau": -1.0}, "tau"),
                    ({"rho_min": 5.0}, "rho_min")):
        with pytest.raises(ValueError, match=key) as kernel:
            SharpoCoefficients(**{**dataclasses.asdict(SHARPO_DEFAULTS), **kw}).checked()
        with pytest.raises(ConfigError) as cfg:
            load_config(None, [f"estimator.{k}={v}" for k, v in kw.items()])
        assert str(cfg.value) == f"estimator.{kernel.value}"     # the same rule and words
    with pytest.raises(ConfigError, match=r"^estimator\.backend: .*cpp"):
        load_config(None, ["estimator.backend=fortran"])


def test_unknown_key_is_refused_by_name(capsys):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["method=grpo", "estimator.lamda=0.1"])
    msg = str(err.value)
    assert msg.startswith("estimator.lamda: unknown key 'lamda'") and "'lam'" in msg
    from sharpo_train.cli import main
    assert main(["train", "estimator.gigpo_gama=0.9"]) == 2
    out = capsys.readouterr().err.strip().splitlines()
    assert len(out) == 1 and "estimator.gigpo_gama" in out[0]


def test_a_saved_config_with_every_key_still_loads(tmp_path):
    """RUN/config.yaml of earlier runs holds all the keys, whatever the method."""
    saved = tmp_path / "config.yaml"
    est = {k: v for k, v in dataclasses.asdict(EstimatorConfig()).items()}
    est.update(lam=0.05, gigpo_mode="mean_std_norm", rlsd_warmdown_steps=20)
    import yaml
    saved.write_text(yaml.safe_dump({"method": "grpo", "env": {"name": "synthetic"},
                                     "estimator": est}))
    cfg = load_config(saved)
    assert dataclasses.asdict(cfg.estimator) == est


def test_registering_with_params_adds_validated_keys(registered):
    @dataclass
    class ScaledParams(GroupParams):
        scaled_factor: float = 2.0

        def validate(self):
            super().validate()
            in_range(self, "scaled_factor", 0, 10, lo_open=True)

    @registered("scaled_t", params=ScaledParams, knob="scaled_factor")
    def scaled(batch, params):
        base = batch.episode_advantages(params)[batch.traj_index]
        return CreditOutput(params.scaled_factor * base[:, None] * batch.response_mask, base)

    cfg = load_config(None, ["method=scaled_t", "env.name=synthetic"])
    p = cfg.estimator.params("scaled_t")
    assert type(p) is ScaledParams and p.scaled_factor == 2.0            # its default
    assert load_config(None, ["estimator.scaled_factor=3"]).estimator.scaled_factor == 3.0
    with pytest.raises(ConfigError, match=r"^estimator\.scaled_factor: expected > 0"):
        load_config(None, ["method=scaled_t", "estimator.scaled_factor=0"])
    from sharpo_train.recipes.recipe_config import parse_method
    assert parse_method("scaled_t:4") == ("scaled_t", 4.0)
    with pytest.raises(ConfigError, match="scaled_factor"):
        parse_method("scaled_t:20")
    ESTIMATORS.pop("scaled_t")
    with pytest.raises(ConfigError, match="estimator.scaled_factor: unknown key"):
        load_config(None, ["estimator.scaled_factor=3"])   # gone with its estimator


def test_registration_refuses_bad_params(registered):
    @dataclass
    class NoDefault:
        x_needed: float

    @dataclass
    class Clash(GroupParams):
        lam: float = 0.7                                   # sharpo's lam, another default

    class NotADataclass:
        pass

    with pytest.raises(TypeError, match="params"):
        registered("bad1", params=NotADataclass)
    with pytest.raises(ValueError, match="x_needed"):
        registered("bad2", params=NoDefault)
    with pytest.raises(ValueError, match=r"Clash\.lam clashes with SharpoParams\.lam"):
        registered("bad3", params=Clash)
    with pytest.raises(ValueError, match="knob"):
        registered("bad4", params=GigpoParams, knob="lam")
    assert not {"bad1", "bad2", "bad3", "bad4"} & set(ESTIMATORS)


def test_estimators_reuse_the_trainers_episode_advantages():
    from sharpo_train.step.batch import StepBatch
    batch = StepBatch(rewards=torch.tensor([1., 0., 0., 1.]), group_of=torch.tensor([0, 0, 0, 0]),
                      traj_index=torch.tensor([0, 1, 2, 3]), response_mask=torch.ones(4, 3),
                      segment_ids=torch.zeros(4, 3, dtype=torch.long), old_logp=torch.zeros(4, 3))
    p = GroupParams()
    a = batch.fill_episode_advantages(p)
    assert batch.episode_adv is a and batch.episode_adv_norm == (p.norm_std, p.eps)
    batch.episode_adv = a * 0 + 7.0                        # what the trainer stored is read
    out = ESTIMATORS["grpo"].fn(batch, p)
    assert torch.all(out.base == 7.0)
    other = GroupParams(norm_std=False)                    # other params: computed afresh
    assert not torch.all(ESTIMATORS["grpo"].fn(batch, other).base == 7.0)


def test_the_teacher_rule_and_row_base_are_the_estimators_own(registered):
    """``needs_teacher`` may be a rule of the params; ``row_base`` gives each row's base
    advantage (else the trajectory's A_i); anything else is refused naming the argument."""
    est = ESTIMATORS["sharpo"]
    assert est.needs_teacher(SharpoParams(lam=0.2)) and not est.needs_teacher(SharpoParams(lam=0.0))
    assert not ESTIMATORS["grpo"].needs_teacher(GroupParams())
    with pytest.raises(TypeError, match="needs_teacher"):
        registered("bad_teacher_t", needs_teacher="yes")(lambda b, p: None)
    with pytest.raises(TypeError, match="row_base"):
        registered("bad_base_t", row_base=3)(lambda b, p: None)
    assert "bad_teacher_t" not in ESTIMATORS and "bad_base_t" not in ESTIMATORS
