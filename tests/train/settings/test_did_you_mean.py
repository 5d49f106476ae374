"""Every unknown-key error of the settings names the key the user most likely meant
(errors.did_you_mean): a close spelling, or another library's name of the key (peft's
``r`` for ``model.lora.rank``), on the command line and in every settings schema."""
import pytest

from sharpo_train.cli import main as cli_main
from sharpo_train.errors import ConfigError


@pytest.mark.parametrize("override, key, meant", [
    ("model.lora.r=4", "model.lora.r", "rank"),                     # peft's names
    ("model.lora.lora_alpha=8", "model.lora.lora_alpha", "alpha"),
    ("model.lora.target_modules=q_proj", "model.lora.target_modules", "targets"),
    ("model.lora.rnk=4", "model.lora.rnk", "rank"),                 # a typo
    ("optim.learning_rate=1e-4", "optim.learning_rate", "lr"),
    ("rollout.num_generations=8", "rollout.num_generations", "group_size"),
    ("rollout.Max_turns=3", "rollout.Max_turns", "max_turns"),
    ("estimator.lamda=0.1", "estimator.lamda", "lam"),
    ("env.num_tran=3", "env.num_tran", "num_train"),              # an environment's schema
    ("eval.num_task=3", "eval.num_task", "num_tasks"),
])
def test_cli_unknown_key_says_did_you_mean(capsys, override, key, meant):
    rc = cli_main(["train", "--print-config", "env.name=synthetic", override])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{key}: unknown key" in err and f"(did you mean {meant!r}?)" in err, err


def test_no_guess_when_nothing_is_close(capsys):
    rc = cli_main(["train", "--print-config", "model.lora.zzzzzz=1"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown key 'zzzzzz'; known: [" in err and "did you mean" not in err


def test_every_schema_says_did_you_mean():
    from sharpo_train.envs.alfworld import make_suite as alfworld_suite
    from sharpo_train.envs.env_config import check_env_config
    from sharpo_train.envs.synthetic import make_signs_suite, make_suite
    from sharpo_train.settings.loader import check_schema, load_settings
    from sharpo_train.loops.sft import SFTConfig

    cases = [
        (lambda: check_env_config({"name": "x", "sead": 1}, {"name", "seed"}, "x"), "'seed'"),
        (lambda: make_suite({"name": "synthetic", "num_eval": 1, "max_step": 2}), "'max_steps'"),
        (lambda: make_signs_suite({"name": "signs", "sead": 2}), "'seed'"),
        (lambda: alfworld_suite({"name": "alfworld", "games_dir": "g", "generate": {"n_trian": 2}}), "'n_train'"),
        (lambda: check_schema({"num_turn": 3}, {"num_turns": (int, 1, 9)}, "env."), "'num_turns'"),
        (lambda: load_settings(SFTConfig, None, ["btach_size=8"]), "'batch_size'"),
    ]
    for make, meant in cases:
        with pytest.raises(ConfigError) as info:
            make()
        assert f"(did you mean {meant}?)" in str(info.value), str(info.value)
