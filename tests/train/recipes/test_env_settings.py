"""The recipes' settings are env-neutral (recipes/recipe_config.py: DemoConfig, CompareConfig); an
environment's own ``demo.<key>`` settings live in its package (RecipeSpec.settings, e.g.
envs/alfworld/recipe.py) and are joined to them for a run of that environment
(schema.settings_class), under the same ``demo.<key>`` names."""
import re
from dataclasses import fields
from pathlib import Path

import pytest

from sharpo_train.analysis.report.environments import env_report
from sharpo_train.cli import main
from sharpo_train.envs.registry import get_spec, recipe_envs
from sharpo_train.errors import ConfigError
from sharpo_train.recipes.recipe_config import CompareConfig, DemoConfig, settings_class
from sharpo_train.recipes.overrides import PipelinePlan

ROOT = Path(__file__).resolve().parents[3]
# what every recipe environment reads; a key only some environment reads goes in its
# RecipeSpec.settings, not here
NEUTRAL = ["env", "seed", "train_games", "eval_games", "game_max_steps", "workers", "eval_sft",
           "explain"]
ALFWORLD_OWN = ["game_size", "real_eval_games", "real_games_dir", "real_max_turns"]


def names(cls) -> list[str]:
    return [f.name for f in fields(cls)] if cls is not None else []


def test_demo_config_holds_only_env_neutral_keys():
    assert names(DemoConfig) == NEUTRAL
    assert names(CompareConfig) == NEUTRAL + ["seeds", "methods"]
    assert names(get_spec("alfworld").load("recipe").settings) == ALFWORLD_OWN
    for env in recipe_envs():
        own = names(get_spec(env).load("recipe").settings)
        assert names(settings_class(env)) == NEUTRAL + own
        assert names(settings_class(env, CompareConfig)) == NEUTRAL + ["seeds", "methods"] + own


def test_no_module_outside_envs_names_an_environment_setting():
    own = re.compile(r"\b(?:" + "|".join(ALFWORLD_OWN) + r")\b")
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0)}"
                 for p in sorted((ROOT / "sharpo_train").rglob("*.py"))
                 if p.relative_to(ROOT).parts[1] != "envs"
                 for m in own.finditer(p.read_text())]
    assert offenders == []


def test_environment_keys_keep_their_demo_names(tmp_path, capsys):
    plan = PipelinePlan.from_args(tmp_path, ["demo.game_size=small", "demo.real_max_turns=3",
                                             "++demo.real_eval_games=1"])
    s = plan.settings
    assert (s.game_size, s.real_max_turns, s.real_eval_games, s.train_games) == ("small", 3, 1, 120)
    report = env_report(s)
    assert report.real_turns(s) == 3 and report.tasks_note(s) == " (size small)"
    quick = PipelinePlan.from_args(tmp_path, [], quick=True).settings      # alfworld's quick_demo
    assert (quick.real_eval_games, quick.real_max_turns, quick.game_max_steps) == (2, 4, 6)
    compare = PipelinePlan.from_args(tmp_path, ["demo.game_size=medium"], settings_cls=CompareConfig)
    assert compare.settings.game_size == "medium" and compare.settings.seeds == [0, 1, 2]
    corridor = PipelinePlan.from_args(tmp_path, ["env=corridor"], quick=True).settings
    assert type(corridor) is DemoConfig and env_report(corridor).tasks_note(corridor) == ""
    for bad, match in [(["env=corridor", "demo.game_size=small"],
                        r"^demo\.game_size: a setting of demo\.env=alfworld, not of demo\.env=corridor$"),
                       (["demo.game_size=huge"], r"^demo\.game_size: expected one of \['tiny'"),
                       (["demo.real_max_turns=0"], r"^demo\.real_max_turns: expected an int >= 1 and <= 1000"),
                       (["demo.game_siz=small"], r"did you mean 'game_size'")]:
        with pytest.raises(ConfigError, match=match):
            PipelinePlan.from_args(tmp_path, bad)
    assert main(["demo", "--print-config", "--out", str(tmp_path / "d"), "env=webshop",
                 "demo.real_eval_games=0"]) == 2
    err = capsys.readouterr().err
    assert "demo.real_eval_games: a setting of demo.env=alfworld" in err and "Traceback" not in err
    assert not (tmp_path / "d").exists()
