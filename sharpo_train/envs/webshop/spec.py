"""WebShop's EnvSpec (envs/spec.py; listed in envs/registry.py as "webshop")."""
from __future__ import annotations

from ..spec import EnvSpec
from . import FAMILIES, WebShopSettings, make_suite, prompts
from .data import resolve_data_dir


def describe_eval(env: dict) -> str:
    """eval.json "games": the split played and the data folder."""
    return f"webshop {env.get('eval_split', 'test')} split ({resolve_data_dir(env.get('data_dir'))})"


def eval_env(env: dict) -> dict:
    """No training goals are loaded: the eval split (default test) is what is played."""
    env["train_split"] = ""
    return env


ENV_SPEC = EnvSpec(
    name="webshop", make_suite=make_suite, prompts=prompts, settings_class=WebShopSettings,
    families=FAMILIES, label="WebShop", family_word="product category", scored=True,
    describe_eval=describe_eval, eval_env=eval_env,
    recipe="sharpo_train.envs.webshop.recipe:RECIPE",
    command="sharpo_train.envs.webshop.command:register")
