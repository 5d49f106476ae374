"""The guides say what the code does: every default README.md and sharpo_train/README.md
state is read back from the settings (the embedded default config where the guide speaks of
a run without --config), so a changed default fails here until the guide follows."""
from pathlib import Path

import pytest

from sharpo_train.hint import MIN_HINT_TOKENS
from sharpo_train.loops.train_config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = load_config(None, [])      # sharpo_train/configs/default.yaml
FIELDS = Config()                     # the dataclass defaults


def value(cfg, key: str):
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


# (guide, the words it uses, the settings it is about, the key, the value it states)
DOCUMENTED = [
    ("sharpo_train/README.md", "a tiny\nQwen2 (hidden 64, 2 layers)", EMBEDDED, "model.hidden_size", 64),
    ("sharpo_train/README.md", "(hidden 64, 2 layers)", EMBEDDED, "model.num_layers", 2),
    ("sharpo_train/README.md", "use, 4 steps,", EMBEDDED, "total_steps", 4),
    ("sharpo_train/README.md", "default `ppo_clip`: clip 0.2", FIELDS, "loss.policy_loss", "ppo_clip"),
    ("sharpo_train/README.md", "default `ppo_clip`: clip 0.2", FIELDS, "loss.clip_ratio", 0.2),
    ("sharpo_train/README.md", "low-variance KL (coef 0.01)", FIELDS, "loss.kl_coef", 0.01),
    ("sharpo_train/README.md", "`after_task` (default)", FIELDS, "teacher.hint_placement", "after_task"),
    ("sharpo_train/README.md", "`trajectory` (default)", FIELDS, "teacher.hint_scope", "trajectory"),
    ("sharpo_train/README.md", "With `teacher.skip_zero_advantage` (default)", FIELDS,
     "teacher.skip_zero_advantage", True),
    ("sharpo_train/README.md", "`optim.shared_prefix_update: true`", FIELDS,
     "optim.shared_prefix_update", False),           # "... it is off by default"
    ("README.md", "`teacher.hint_placement` (default `after_task`", FIELDS,
     "teacher.hint_placement", "after_task"),
    ("README.md", "`loss.agg=token-mean` (default)", FIELDS, "loss.agg", "token-mean"),
]


def _text(path: str) -> str:
    return " ".join((ROOT / path).read_text(encoding="utf-8").split())


@pytest.mark.parametrize("guide, words, cfg, key, stated", DOCUMENTED,
                         ids=[f"{d[0]}:{d[3]}" for d in DOCUMENTED])
def test_a_documented_default_is_the_configs(guide, words, cfg, key, stated):
    assert " ".join(words.split()) in _text(guide), f"{guide} no longer says {words!r}"
    assert value(cfg, key) == stated, f"{guide} says {key} = {stated!r}"


def test_the_documented_hint_minimum_is_the_codes():
    assert "`MIN_HINT_TOKENS` = 8 hint tokens" in _text("sharpo_train/README.md")
    assert MIN_HINT_TOKENS == 8
