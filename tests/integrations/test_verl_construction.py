"""verl 0.9.1 v1: sharpo's settings are checked when verl's TaskRunnerV1 constructs the
trainer (``trainer_cls(config=config)``), before ``trainer.init()`` starts a worker or loads a
model. The config is composed by verl's own Hydra config (ppo_trainer.yaml, strict keys)
with the documented overrides (configs/verl/sharpo_v1_overrides.txt) plus the user's; the
trainer class is the registered ``sharpo_sync`` and its real ``__init__`` runs (it starts
nothing on its own)."""
import os
from pathlib import Path

import pytest

from integrations.verl_support import needs_verl

pytestmark = needs_verl

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = [line.strip() for line in (REPO / "configs" / "verl" / "sharpo_v1_overrides.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]


def compose(extra=()):
    import verl
    from hydra import compose as hydra_compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=[*OVERRIDES, *extra])


def construct(extra=()):
    from verl.trainer.ppo.v1 import get_trainer_cls

    import sharpo_train.integrations.verl  # noqa: F401  (registers sharpo_sync, as the setup hook does)
    config = compose(extra)
    return get_trainer_cls(config.trainer.v1.trainer_mode)(config=config)


def test_documented_overrides_construct_without_a_warning(recwarn):
    trainer = construct()
    assert type(trainer).__name__ == "SharpoPPOTrainerSync"
    assert not [w for w in recwarn if "GAE" in str(w.message)]


@pytest.mark.parametrize("extra, match", [
    (["+algorithm.sharpo.lamda=0.3"], r"unknown key 'lamda' \(did you mean 'lam'\?\)"),
    (["+algorithm.sharp.lam=0.3"], r"algorithm\.sharp: unknown section \(did you mean 'sharpo'\?\)"),
    (["+algorithm.sharpo_lam=0.3"], r"algorithm\.sharpo_lam: unknown section"),
    (["algorithm.sharpo.lam=1.5"], r"algorithm\.sharpo\.lam"),
    (["algorithm.sharpo.max_hint_tokens=-1"], r"algorithm\.sharpo\.max_hint_tokens"),
    (["algorithm.use_kl_in_reward=True"], r"algorithm\.use_kl_in_reward"),
    # a sharpo estimator verl has not (the drop-in runs sharpo only): named, with where it runs
    (["algorithm.adv_estimator=rlsd"], r"algorithm\.adv_estimator: 'rlsd' is a sharpo estimator"),
])
def test_bad_settings_are_refused_at_construction(extra, match, monkeypatch):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    started = []
    monkeypatch.setattr(PPOTrainer, "__init__", lambda self, config: started.append(config))
    with pytest.raises(ValueError, match=match):
        construct(extra)
    assert started == []                # refused before verl's own __init__ ran


def test_gae_lam_next_to_sharpo_warns():
    with pytest.warns(UserWarning, match=r"algorithm\.lam=0\.3 is verl's GAE lambda.*algorithm\.sharpo\.lam \(now 0\.2\)"):
        construct(["algorithm.lam=0.3"])


def test_other_estimators_are_not_checked():
    trainer = construct(["algorithm.adv_estimator=grpo", "+algorithm.sharpo.lamda=0.3"])
    assert type(trainer).__name__ == "SharpoPPOTrainerSync"
