"""The corridor's EnvSpec (envs/spec.py; listed in envs/registry.py as "corridor")."""
from __future__ import annotations

from ..spec import EnvSpec
from . import FAMILIES, REWARD_KEYS, CorridorSettings, make_suite, prompts, train_defaults

ENV_SPEC = EnvSpec(
    name="corridor", make_suite=make_suite, prompts=prompts, settings_class=CorridorSettings,
    reward_settings=REWARD_KEYS, families=FAMILIES, label="Corridor", family_word="task family", train_defaults=train_defaults,
    plan_labels="sharpo_train.envs.corridor.labels:DecisiveLabeller",
    exact_labels="sharpo_train.envs.corridor:label_episodes",
    recipe="sharpo_train.envs.corridor.recipe:RECIPE",
    probe="sharpo_train.envs.corridor.door_probe:PROBE")
