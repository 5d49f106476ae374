"""sharpo_train.envs.env_config: the checks every suite factory applies to `env:`."""
import pytest

from sharpo_train.envs.env_config import check_env_config, opt_int


def test_check_env_config_accepts_known_keys_and_names_the_unknown():
    cfg = {"name": "x", "seed": 3}
    assert check_env_config(cfg, {"name", "seed", "workers"}, "x") is cfg
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['bogus'\] for x; known: \['name'\]"):
        check_env_config({"name": "x", "bogus": 1}, {"name"}, "x")
    with pytest.raises(TypeError, match="env_config: expected a dict, got list"):
        check_env_config([("name", "x")], {"name"}, "x")


def test_opt_int_reads_optional_bounded_ints():
    assert opt_int({}, "seed") is None and opt_int({"seed": None}, "seed") is None
    assert opt_int({"seed": 0}, "seed") == 0 and opt_int({"n": 7}, "n", 7) == 7
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match=r"env\.seed: expected an int >= 0"):
            opt_int({"seed": bad}, "seed")
    with pytest.raises(ValueError, match=r"env\.max_steps: expected an int >= 1, got 0"):
        opt_int({"max_steps": 0}, "max_steps", 1)
