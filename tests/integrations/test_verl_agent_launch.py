"""configs/verl_agent/run_alfworld_sharpo.sh's override handling, without a verl-agent
checkout (the script's python3 calls recorded): an extra argument that names a key the
script sets replaces the script's value whatever its prefix, a new algorithm.sharpo.* key
is added with `+`, anything else is appended as given; sharpo's settings among the
overrides are checked before the data step (a typo stops the script in a second). Hydra's own
composition of the same launch against verl-agent's config: verl_agent_checkout.py
(`make test-verl-agent`)."""
from pathlib import Path

import pytest

from integrations.launch_support import launch_script_calls


@pytest.fixture
def patched_root(tmp_path) -> Path:
    """What the script checks of a checkout: ray_trainer.py with the patch's SHARPO line."""
    target = tmp_path / "verl" / "trainer" / "ppo" / "ray_trainer.py"
    target.parent.mkdir(parents=True)
    target.write_text('    SHARPO = "sharpo"  # sharpo_train.integrations.verl_agent\n')
    return tmp_path


def keyed(args, key):
    return [a for a in args if a.lstrip("+").split("=", 1)[0] == key]


def test_documented_override_replaces_the_scripts_value(patched_root):
    prep, run = launch_script_calls(patched_root, ["+algorithm.sharpo.lam=0.3"], run_c=False)
    assert prep[:2] == ["-m", "examples.data_preprocess.prepare"]
    assert run[:2] == ["-m", "verl.trainer.main_ppo"]
    assert keyed(run, "algorithm.sharpo.lam") == ["+algorithm.sharpo.lam=0.3"]


@pytest.mark.parametrize("arg, key, want", [
    ("algorithm.sharpo.lam=0", "algorithm.sharpo.lam", "+algorithm.sharpo.lam=0"),
    ("++algorithm.sharpo.alpha=0.4", "algorithm.sharpo.alpha", "+algorithm.sharpo.alpha=0.4"),
    ("algorithm.sharpo.base=gigpo", "algorithm.sharpo.base", "+algorithm.sharpo.base=gigpo"),
    ("+algorithm.sharpo.base=gigpo", "algorithm.sharpo.base", "+algorithm.sharpo.base=gigpo"),
    ("trainer.total_epochs=3", "trainer.total_epochs", "trainer.total_epochs=3"),
    ("+trainer.total_epochs=3", "trainer.total_epochs", "trainer.total_epochs=3"),
    ("data.train_files=/x/a=b.parquet", "data.train_files", "data.train_files=/x/a=b.parquet"),
    ("+env.extra=1", "env.extra", "+env.extra=1"),
])
def test_every_spelling_of_an_override_reaches_the_launch_once(patched_root, arg, key, want):
    _, run = launch_script_calls(patched_root, [arg], run_c=False)
    assert keyed(run, key) == [want]


def test_overrides_keep_the_rest_of_the_launch(patched_root, tmp_path):
    _, plain = launch_script_calls(patched_root, run_c=False, home=tmp_path)
    _, over = launch_script_calls(patched_root, ["+algorithm.sharpo.lam=0.3", "trainer.total_epochs=3"],
                                  run_c=False, home=tmp_path)
    assert len(over) == len(plain)
    changed = [(a, b) for a, b in zip(plain, over) if a != b]
    assert changed == [("+algorithm.sharpo.lam=0.2", "+algorithm.sharpo.lam=0.3"),
                       ("trainer.total_epochs=150", "trainer.total_epochs=3")]


@pytest.mark.parametrize("arg, match", [
    ("+algorithm.sharpo.lamda=0.3", r"unknown key 'lamda' \(did you mean 'lam'\?\)"),
    ("algorithm.sharpo.lam=1.5", r"algorithm\.sharpo\.lam"),
    ("+algorithm.sharp.lam=0.3", r"algorithm\.sharp: unknown section \(did you mean 'sharpo'\?\)"),
    ("+algorithm.sharpo_lam=0.3", r"algorithm\.sharpo_lam: unknown section"),
    ("algorithm.sharpo.base=gipgo", r"algorithm\.sharpo\.base"),
])
def test_bad_settings_stop_the_script_before_the_data_step(patched_root, arg, match):
    # python3 -c runs for real (the check); a refusal exits before any recorded call
    with pytest.raises(AssertionError, match=match):
        launch_script_calls(patched_root, [arg], run_c=True)


def test_the_scripts_own_overrides_pass_the_check_with_its_settings(patched_root, recwarn):
    from sharpo_train.integrations.engine_settings import check_overrides

    _, run = launch_script_calls(patched_root, ["+algorithm.sharpo.lam=0.3", "algorithm.sharpo.base=gigpo"],
                                 run_c=False)
    cfg = check_overrides(run[2:])
    assert cfg["lam"] == 0.3 and cfg["base"] == "gigpo" and cfg["success_threshold"] == 5.0
    assert cfg["max_teacher_prompt_length"] == 2048 + 512
    assert not [w for w in recwarn if "GAE" in str(w.message)]


def test_gae_lam_next_to_sharpo_warns(patched_root):
    from sharpo_train.integrations.engine_settings import check_overrides

    _, run = launch_script_calls(patched_root, ["algorithm.lam=0.3"], run_c=False)
    with pytest.warns(UserWarning, match=r"algorithm\.lam=0\.3 is verl's GAE lambda"):
        check_overrides(run[2:])
