"""Bad inputs to the integrations: TRL's SharpoConfig and verl's settings refuse
non-finite or mistyped values naming the field (an infinite tau or rho_max or a NaN
threshold would silently give plain GRPO); verl's adapter refuses a float has_teacher,
float segment ids and non-finite rewards with TypeError/ValueError naming the tensor."""
import math
from types import SimpleNamespace

import pytest

from integrations.trl_support import needs_trl
from integrations.verl_support import needs_verl
from sharpo_train.hint import HINT_TEMPLATE
from sharpo_train.integrations.common import check_sharpo_settings

GOOD = dict(lam=0.2, alpha=0.5, tau=1.0, rho_min=0.25, rho_max=4.0, success_threshold=0.5,
            max_hint_tokens=64, hint_template=HINT_TEMPLATE)
BAD = [
    ("tau", math.inf, ValueError), ("tau", math.nan, ValueError), ("tau", 0.0, ValueError),
    ("rho_max", math.inf, ValueError), ("rho_min", math.nan, ValueError),
    ("success_threshold", math.nan, ValueError), ("success_threshold", math.inf, ValueError),
    ("lam", True, TypeError), ("lam", "0.2", TypeError), ("lam", -0.1, ValueError),
    ("alpha", 1.0, ValueError), ("alpha", None, TypeError),
    ("max_hint_tokens", 2, ValueError), ("max_hint_tokens", 64.0, TypeError),
    ("max_hint_tokens", True, TypeError),
    ("hint_template", "no slot", ValueError), ("hint_template", "{hint} {other}", ValueError),
    ("hint_template", "{hint} {", ValueError), ("hint_template", 5, ValueError),
]


@pytest.mark.parametrize("field, value, exc", BAD)
def test_shared_settings_check_names_the_field(field, value, exc):
    check_sharpo_settings(SimpleNamespace(**GOOD))               # the defaults pass
    with pytest.raises(exc, match=field):
        check_sharpo_settings(SimpleNamespace(**dict(GOOD, **{field: value})))


def test_braces_doubled_in_a_template_are_fine():
    check_sharpo_settings(SimpleNamespace(**dict(GOOD, hint_template="{{json}}: {hint}")))


@needs_trl
@pytest.mark.parametrize("field, value, exc", [b for b in BAD if b[0] != "max_hint_tokens"
                                               or b[1] == 2])
def test_trl_sharpo_config_refuses_naming_the_field(tmp_path, field, value, exc):
    from sharpo_train.integrations.trl import SharpoConfig
    with pytest.raises(exc, match=field):
        SharpoConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **{field: value})


@needs_trl
@pytest.mark.parametrize("key, near", [("lamda", "lam"), ("Alpha", "alpha"),
                                       ("max_hint_token", "max_hint_tokens"),
                                       ("zzz_not_a_setting", None)])
def test_trl_sharpo_config_names_an_unknown_argument(tmp_path, key, near):
    import inspect
    from sharpo_train.integrations.trl import SharpoConfig
    with pytest.raises(TypeError) as err:
        SharpoConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **{key: 0.2})
    msg = str(err.value)
    assert f"unknown argument {key!r}" in msg
    assert (f"(did you mean {near!r}?)" in msg) if near else "did you mean" not in msg
    assert "lam" in inspect.signature(SharpoConfig).parameters     # the fields stay visible
    assert SharpoConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none",
                        lam=0.1).lam == 0.1


# ------------------------------------------------------------------ verl adapter
def _batch(**over):
    import numpy as np
    import torch
    from verl.protocol import DataProto

    B, T = 4, 5
    t = {"token_level_rewards": torch.zeros(B, T), "response_mask": torch.ones(B, T),
         "old_log_probs": torch.full((B, T), -1.0), "teacher_log_probs": torch.full((B, T), -0.5),
         "sharpo_segment_ids": torch.tensor([[0, 0, 1, 1, -1]] * B),
         "sharpo_has_teacher": torch.tensor([True, False, True, False])}
    t["token_level_rewards"][:, -1] = torch.tensor([1.0, 0.0, 1.0, 0.0])
    t.update(over)
    return DataProto.from_dict(tensors=t, non_tensors={
        "uid": np.array(["g", "g", "h", "h"], dtype=object),
        "traj_uid": np.array(["e0", "e1", "e2", "e3"], dtype=object)})


@needs_verl
def test_verl_refuses_float_has_teacher_and_segment_ids():
    import torch
    from sharpo_train.integrations.verl import compute_sharpo_advantage
    compute_sharpo_advantage(_batch())                                   # well-formed: runs
    with pytest.raises(TypeError, match="sharpo_has_teacher"):
        compute_sharpo_advantage(_batch(sharpo_has_teacher=torch.tensor([0.7, 0.0, 1.0, 0.0])))
    with pytest.raises(TypeError, match="sharpo_segment_ids"):
        compute_sharpo_advantage(_batch(sharpo_segment_ids=torch.tensor([[0.0, 0.4, 1.0, 1.0, -1.0]] * 4)))


@needs_verl
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_verl_names_non_finite_rewards(bad):
    import torch
    from sharpo_train.integrations.verl import compute_sharpo_advantage
    r = torch.zeros(4, 5)
    r[0, -1] = bad
    with pytest.raises(ValueError, match="non-finite reward") as err:
        compute_sharpo_advantage(_batch(token_level_rewards=r))
    assert "different rewards" not in str(err.value) and "e0" in str(err.value)


@needs_verl
def test_verl_settings_are_checked_naming_the_field():
    from sharpo_train.integrations.verl import SharpoTrainerMixin

    class Cfg(dict):
        __getattr__ = dict.__getitem__

    trainer = object.__new__(SharpoTrainerMixin)       # its __init__ checks a config (test_verl_construction.py)
    trainer.config = Cfg(algorithm=Cfg(sharpo={"tau": math.inf}), data=Cfg(max_prompt_length=64))
    with pytest.raises(ValueError, match="tau"):
        trainer._sharpo_settings()


# ------------------------------------------------------------------ verl-agent adapter
@needs_verl
def test_verl_agent_names_an_episode_with_two_outcomes():
    import torch
    from integrations.test_verl_agent import fit_step
    from sharpo_train.models.policy import build_policy

    torch.manual_seed(0)
    model, tok = build_policy(None)

    def poison(batch):
        traj = batch.non_tensor_batch["traj_uid"]
        same = [i for i in range(len(traj)) if traj[i] == traj[0]]
        batch.non_tensor_batch["episode_rewards"][same[1]] = 123.0
    with pytest.raises(ValueError, match="episode_rewards: rows of traj_uid .* different episode rewards"):
        fit_step((model.eval(), tok), poison=poison)


# verl's algorithm.sharpo.* check on the stand-in modules below where verl is not installed
# (sharpo_settings reads none of verl; the module imports it at the top)
VERL_STUB = """
import sys, types
try:
    import verl  # noqa: F401
except ImportError:
    for name in ("verl", "verl.protocol", "verl.trainer", "verl.trainer.ppo",
                 "verl.trainer.ppo.core_algos"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["verl.protocol"].DataProto = object
    sys.modules["verl.trainer.ppo"].core_algos = sys.modules["verl.trainer.ppo.core_algos"]
    sys.modules["verl.trainer.ppo.v1"] = None          # no v1 trainer: DataProto API only
from sharpo_train.integrations.verl import sharpo_settings
for bad in ({"lamda": 0.5}, {"LAM": 0.5}, {"Max_Hint_Tokens": 9}, {"zzz": 1}):
    try:
        sharpo_settings({"sharpo": bad}, 100)
    except ValueError as exc:
        print(exc)
"""


def test_unknown_verl_sharpo_key_gets_the_settings_suggestion():
    """verl's unknown algorithm.sharpo.* key is named with errors.did_you_mean, the
    suggestion of every other settings error (case slips included)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", VERL_STUB], cwd=root, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 4, out.stdout
    assert lines[0].startswith("algorithm.sharpo: unknown key 'lamda' (did you mean 'lam'?); "
                               "known keys: lam, alpha")
    assert "unknown key 'LAM' (did you mean 'lam'?)" in lines[1]
    assert "unknown key 'Max_Hint_Tokens' (did you mean 'max_hint_tokens'?)" in lines[2]
    assert "unknown key 'zzz'; known keys: lam" in lines[3]
