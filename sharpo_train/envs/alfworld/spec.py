"""ALFWorld's EnvSpec (envs/spec.py; listed in envs/registry.py as "alfworld")."""
from __future__ import annotations


from ..spec import EnvSpec
from . import AlfworldSettings, GenerateSettings, make_suite, prompts
from .games import FAMILIES, resolve_release_dir, split_folder


def describe_eval(env: dict) -> str:
    """eval.json "games": the games folder (else the environment's name)."""
    return str(env["games_dir"]) if env.get("games_dir") else "alfworld"


def eval_env(env: dict) -> dict:
    """The evaluation split stands in for the training split too, so a games folder without
    a training split (e.g. ../shared/data/alfworld: only valid_seen and valid_train) can be
    evaluated on; nothing is generated."""
    if env.get("eval_split", "valid_seen"):
        env["train_split"] = env.get("eval_split", "valid_seen")
        env.pop("num_train_games", None)
        env.pop("generate", None)
    return env


def check_data(env: dict) -> None:
    """The games are where env.games_dir says, unless they are to be generated."""
    if not env.get("generate"):
        resolve_release_dir(env.get("games_dir"))


def games_overrides(path: str) -> list[str]:
    """`sharpo eval --games DIR`: a json_2.1.1 folder or one split folder of it."""
    games, split = split_folder(path)
    return [f"env.games_dir={games}"] + ([f"env.eval_split={split}"] if split else [])


ENV_SPEC = EnvSpec(
    name="alfworld", make_suite=make_suite, prompts=prompts, settings_class=AlfworldSettings,
    nested_settings={"generate": GenerateSettings}, families=FAMILIES,
    label="ALFWorld", family_word="task family",
    describe_eval=describe_eval, eval_env=eval_env, check_data=check_data,
    games_overrides=games_overrides,
    plan_labels="sharpo_train.envs.alfworld.plan_labels:PlanLabeller",
    recipe="sharpo_train.envs.alfworld.recipe:RECIPE",
    probe="sharpo_train.envs.alfworld.demos:PROBE",
    command="sharpo_train.envs.alfworld.command:register")

