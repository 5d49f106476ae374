"""`python -m sharpo_train.integrations.verl_main`: verl's main_ppo with the overrides
checked in the launching process, before Ray starts (issue 47: a typo surfaced 33-39 s
into the launch, inside the task runner). Runs in .venv-verl (make test-verl)."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from integrations.verl_support import needs_verl

pytestmark = needs_verl

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = [line.strip() for line in (REPO / "configs" / "verl" / "sharpo_v1_overrides.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]


@pytest.fixture
def no_verl_run(monkeypatch):
    """verl's main_ppo.main replaced by a recorder: nothing starts."""
    from verl.trainer import main_ppo
    ran = []
    monkeypatch.setattr(main_ppo, "main", lambda: ran.append(list(sys.argv)))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    return ran


@pytest.mark.parametrize("extra, needle", [
    (["+algorithm.sharpo.lamda=0.3"], "algorithm.sharpo: unknown key 'lamda' (did you mean 'lam'?)"),
    (["+algorithm.sharp.lam=0.3"], "algorithm.sharp: unknown section (did you mean 'sharpo'?)"),
    (["algorithm.sharpo.lam=1.5"], "algorithm.sharpo.lam"),
    (["trainer.totl_epochs=3"], "Could not override 'trainer.totl_epochs'"),
])
def test_a_typo_is_one_line_before_verl_runs(capsys, no_verl_run, extra, needle):
    from sharpo_train.integrations.verl_main import main
    assert main([*OVERRIDES, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and err.count("\n") == 1, err
    assert no_verl_run == []


def test_good_overrides_hand_over_to_verls_main(no_verl_run):
    from sharpo_train.integrations.verl_main import main
    assert main([*OVERRIDES, "algorithm.sharpo.tau=1e-3"]) == 0
    assert no_verl_run == [["verl.trainer.main_ppo", *OVERRIDES, "algorithm.sharpo.tau=1e-3"]]


def test_the_command_refuses_a_typo_in_seconds_without_ray():
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sharpo_train.integrations.verl_main", *OVERRIDES,
                           "+algorithm.sharpo.lamda=0.3"], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    took = time.monotonic() - start
    assert proc.returncode == 2 and "unknown key 'lamda'" in proc.stderr
    assert "ray" not in proc.stderr.lower() and took < 30, (took, proc.stderr[-500:])


@pytest.mark.parametrize("drop_lam", [False, True])
def test_the_gae_warnings_advice_is_an_override_hydra_accepts(drop_lam):
    """The advice is ``algorithm.sharpo.lam=v`` when the key is there (Hydra refuses
    ``+key`` then) and ``+algorithm.sharpo.lam=v`` when not (issue 47)."""
    import re
    import warnings
    from sharpo_train.integrations.engine_settings import check_config
    from sharpo_train.integrations.verl_main import compose
    base = [o for o in OVERRIDES if not (drop_lam and o.startswith("+algorithm.sharpo.lam="))]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_config(compose([*base, "algorithm.lam=0.3"]), "verl")
    (message,) = [str(w.message) for w in seen if "GAE" in str(w.message)]
    advice = re.search(r"set (\S+) to change it", message).group(1)
    assert advice.startswith("+") == drop_lam
    config = compose([*base, "algorithm.lam=0.3", advice])      # Hydra takes it
    assert config.algorithm.sharpo.lam == 0.3


@pytest.mark.parametrize("extra", [["actor_rollout_ref.model.use_fused_kernels=false"],
                                   ["actor_rollout_ref.actor.use_fused_kernels=false"]])
def test_an_explicit_use_fused_kernels_false_stays_off(no_verl_run, extra):
    """The user's own verl switch decides where algorithm.sharpo.fused_logprobs is unset: the
    launcher adds fused_logprobs=false, so the trainer's construction keeps the path off."""
    from sharpo_train.integrations.engine_settings import fused_kernels_setup, verl_settings
    from sharpo_train.integrations.verl_main import compose, main
    assert main([*OVERRIDES, *extra]) == 0
    (argv,) = no_verl_run
    assert argv == ["verl.trainer.main_ppo", *OVERRIDES, *extra, "+algorithm.sharpo.fused_logprobs=false"]
    config = compose(argv[1:])
    assert fused_kernels_setup(config, verl_settings(config)) is False
    assert config.actor_rollout_ref.model.use_fused_kernels is False


def test_use_fused_kernels_false_with_fused_logprobs_true_is_refused(capsys, no_verl_run):
    from sharpo_train.integrations.verl_main import main
    assert main([*OVERRIDES, "actor_rollout_ref.model.use_fused_kernels=false",
                 "+algorithm.sharpo.fused_logprobs=true"]) == 2
    err = capsys.readouterr().err
    assert "actor_rollout_ref.model.use_fused_kernels=false and algorithm.sharpo.fused_logprobs=true" in err
    assert no_verl_run == []
