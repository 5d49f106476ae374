"""An integer of more than 4,300 digits (Python's int() limit on converting digits) is one
line naming where it was written, in every reader of settings and JSON (issue 47: a
ValueError traceback on main)."""
import json

import pytest

from sharpo_train.errors import ConfigError, UsageError
from sharpo_train.io import loads_json
from sharpo_train.loops.train_config import load_config
from sharpo_train.settings.bounded_yaml import load_yaml_text

from train.commands.test_cli_errors import one_line_error
from train.commands.test_cli_input_errors import SMOKE

BIG = "9" * 5000


@pytest.mark.parametrize("text", [BIG, "-" + BIG, "+" + BIG])
def test_an_override_of_5000_digits_names_its_key(text):
    with pytest.raises(ConfigError, match=r"total_steps: an integer of 5,000 digits"):
        load_config(None, [f"total_steps={text}"])
    with pytest.raises(ConfigError, match=r"env\.extra.*an integer of 5,000 digits"):
        load_config(None, [f"env.extra=[1, {text}]"])


def test_a_config_file_of_5000_digits_names_the_file_and_line(tmp_path):
    with pytest.raises(ConfigError, match=r"c\.yaml: refused: an integer of 5,000 digits .*line 2"):
        load_yaml_text(f"a: 1\nb: {BIG}\n", "c.yaml")
    assert load_yaml_text("b: " + "9" * 4300, "c.yaml") == {"b": int("9" * 4300)}
    assert load_yaml_text("b: '" + BIG + "'", "c.yaml") == {"b": BIG}    # a string is text


def test_json_of_5000_digits_is_a_usage_error():
    with pytest.raises(UsageError, match=r"state\.json: refused: .*4300"):
        loads_json('{"step": ' + BIG + "}", "state.json")
    assert loads_json(json.dumps({"step": 12}), "state.json") == {"step": 12}


def test_train_with_5000_digits_is_one_line_and_makes_nothing(tmp_path, capsys):
    cfg = tmp_path / "big.yaml"
    cfg.write_text(f"total_steps: {BIG}\n")
    one_line_error(capsys, ["train", "--config", str(cfg), f"run_dir={tmp_path / 'a'}"],
                   "big.yaml", "5,000 digits")
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'b'}",
                            f"total_steps={BIG}"], "total_steps", "5,000 digits")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
