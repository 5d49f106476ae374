"""A game whose grammar renders empty text is played, with one warning
per game instead of silence."""
import json
import logging
import os
from pathlib import Path

import pytest

pytest.importorskip("textworld", reason="needs the alfworld extra: pip install '.[alfworld]'")

from sharpo_train.envs.alfworld import engine  # noqa: E402
from sharpo_train.envs.alfworld.engine import AlfWorldEnv  # noqa: E402
from sharpo_train.envs.alfworld.games import GAME_FILE, discover_games, task_of  # noqa: E402
from sharpo_train.envs.alfworld.generator import generate_games  # noqa: E402


def test_a_game_rendering_empty_text_warns_once(tmp_path, caplog, monkeypatch):
    os.environ.setdefault("ALFWORLD_DATA", str(tmp_path))
    monkeypatch.setattr(engine, "_warned_empty", set())
    generate_games(tmp_path, 1, seed=7, split="train", families=["Pick"], size="tiny")
    task = task_of(discover_games(tmp_path, "train")[0])
    path = Path(task.source) / GAME_FILE
    game = json.loads(path.read_text())
    # the intro renders only a symbol that expands to nothing: no room, no task sentence
    grammar = game["grammar"].replace('"rhs": "-= Welcome to TextWorld, ALFRED! =-\\n\\n#look.feedback#\\n\\n#task#"',
                                      '"rhs": "#empty#"')
    assert grammar != game["grammar"]
    grammar = grammar.replace('"notImplemented": [', '"empty": [\n {"rhs": ""}\n ],\n "notImplemented": [')
    # and the answer to "inventory" with empty hands renders nothing either
    grammar = grammar.replace('"rhs": "You are not carrying anything."', '"rhs": ""')
    game["grammar"] = grammar
    path.write_text(json.dumps(game))

    env = AlfWorldEnv(max_steps=3)
    try:
        with caplog.at_level(logging.WARNING, logger=engine.__name__):
            for _ in range(2):
                obs = env.reset(task)
                assert obs.text == "" and obs.task_text == ""   # played as it is
                assert "inventory" in obs.admissible_actions
                env.step("inventory")
            warned = [r.getMessage() for r in caplog.records if "renders an empty" in r.getMessage()]
            assert len(warned) == 1 and GAME_FILE in warned[0] and "room description" in warned[0]
            env.reset(task)
            engine._warned_empty.clear()                        # the step path on its own
            caplog.clear()
            env.step("inventory")
            env.step("inventory")
            warned = [r.getMessage() for r in caplog.records if "renders an empty" in r.getMessage()]
            assert len(warned) == 1 and "answer to 'inventory'" in warned[0]
    finally:
        env.close()
