"""WebShop (Yao et al., 2022) for sharpo_train: the 1,000-product catalogue, WebShop's
synthetic goals and reward, its text pages and actions, BM25 search, an expert, prompts
and demonstrations. No Java, no Flask, no download: the data is read from
``../shared/data/webshop`` (or ``env.data_dir`` / $WEBSHOP_DATA).

Entry point for the trainer (env.name "webshop"; its EnvSpec: spec.py)::

    suite = make_suite({"name": "webshop"})          # train: goals 1500.., eval: test 0..500
    pool = suite.make_pool(1)                        # in-process (a step takes ~1 ms)
    first = pool.reset(suite.train_tasks[:4])
    results = pool.step({0: "search[red running shoes]", 1: None})

env_config keys (all optional):
  data_dir      folder with items_shuffle_1000.json, items_ins_v2_1000.json (default
                $WEBSHOP_DATA, else ../shared/data/webshop)
  train_split   "train" (goals 1500..), eval_split "test" (0..500); also "eval"
                (500..1500), "all", "human" (the 13 human-written goals); "" or None: none
  num_train / num_eval   caps (first N of the split; 0/None = all)
  max_steps     step limit per episode (default 15, verl-agent's)
  reward        "success" (1.0 when WebShop's score is 1, else 0: verl-agent's training
                signal) or "score" (WebShop's score in [0, 1]); info["task_score"] always
                holds the score
  price_seed    seed of the price draws (product price ranges, goal price bounds)

Submodules: data (loader), goals, search (BM25), reward (``webshop_reward``), engine
(WebShopEnv), prompts, agents (expert, random, play), demos, recipe (`sharpo demo` phases),
spec (the EnvSpec).
"""
from __future__ import annotations

from typing import Mapping, Optional

from ..base import EnvSuite, SerialEnvPool
from ..env_config import check_env_config, opt_int
from . import prompts
from ...errors import ConfigError
from .data import WebShopDataError, resolve_data_dir
from .goals import SPLITS

# env.train_split / env.eval_split: WebShop's goal splits, "all" goals, or the human goals
SPLIT_NAMES = tuple(SPLITS) + ("all", "human")
from .prompts import parse_action, render_hint, render_turn_prompt

# env.<key> -> (type, lo, hi): the settings schema (train_config.check_env reads it via ENV_SPEC)
SETTINGS: dict[str, tuple] = {
    "name": (str,), "data_dir": (Optional[str],), "train_split": (Optional[str],),
    "eval_split": (Optional[str],), "num_train": (Optional[int], 0, None),
    "num_eval": (Optional[int], 0, None), "max_steps": (Optional[int], 1, 10000),
    "reward": (str,), "price_seed": (Optional[int], 0, None), "workers": (Optional[int], 0, 1024)}
SETTINGS_HELP = {
    "data_dir": "folder with WebShop's items files (default $WEBSHOP_DATA, else the shared "
                "data folder)",
    "train_split": "training goals: train (1500..), eval (500..1500), test (0..500), all or "
                   "human (default train)",
    "eval_split": "held-out goals, as train_split (default test; empty or null: none)",
    "num_train": "first N training goals (0 or null: all)",
    "num_eval": "first N held-out goals (0 or null: all)",
    "max_steps": "environment step limit per episode (default 15, verl-agent's)",
    "reward": "success (1 when WebShop's score is 1, else 0) or score (WebShop's score in "
              "[0, 1])",
    "price_seed": "seed of the price draws (product price ranges, goal price bounds)",
    "workers": "worker count when the trainer asks for the default",
}
_KNOWN_KEYS = set(SETTINGS)
FAMILIES = ["beauty", "electronics", "fashion", "garden", "grocery"]


def webshop_reward(goal: Mapping, asin: str, options: Optional[Mapping] = None,
                   price: Optional[float] = None, *, data_dir=None) -> float:
    """WebShop's reward for buying product ``asin`` with ``options`` ({option name:
    value}) against ``goal`` (a dict with WebShop's keys: asin, query, name,
    product_category, instruction_text, attributes, price_upper, goal_options).
    ``price`` defaults to the catalogue's price of the product. See reward.py."""
    from .engine import get_world
    from .reward import compute_reward
    return compute_reward(get_world(data_dir).catalogue, goal, asin, options, price)


def make_suite(env_config: dict) -> EnvSuite:
    check_env_config(env_config, _KNOWN_KEYS, "webshop")
    from .engine import DEFAULT_MAX_STEPS, REWARD_MODES, WebShopEnv, get_world
    cfg = env_config
    reward = cfg.get("reward", "success")
    if reward not in REWARD_MODES:
        raise ConfigError(f"env.reward: expected one of {list(REWARD_MODES)}, got {reward!r}")
    max_steps = opt_int(cfg, "max_steps", 1) or DEFAULT_MAX_STEPS
    price_seed = opt_int(cfg, "price_seed") or 0
    train_split, eval_split = cfg.get("train_split", "train"), cfg.get("eval_split", "test")
    for key, split in (("train_split", train_split), ("eval_split", eval_split)):
        if split and split not in SPLIT_NAMES:      # checked before any data is loaded
            raise ConfigError(f"env.{key}: expected one of {list(SPLIT_NAMES)} (or empty: "
                              f"none), got {split!r}")
    world = get_world(cfg.get("data_dir"), price_seed)
    train = world.tasks(train_split, opt_int(cfg, "num_train")) if train_split else []
    evals = world.tasks(eval_split, opt_int(cfg, "num_eval")) if eval_split else []
    opt_int(cfg, "workers")

    def _make_pool(num_workers: Optional[int] = None):
        # a step costs ~1 ms (buy: a few ms): one process is enough; num_workers is ignored
        return SerialEnvPool(lambda: WebShopEnv(world, max_steps=max_steps, reward=reward))

    present = {t.family for t in train + evals}
    fams = [f for f in FAMILIES if f in present] + sorted(present - set(FAMILIES))
    return EnvSuite(train_tasks=train, eval_tasks=evals, make_pool=_make_pool, families=fams)


__all__ = ["make_suite", "webshop_reward", "render_turn_prompt", "parse_action", "render_hint",
           "prompts", "WebShopDataError", "resolve_data_dir", "FAMILIES", "SETTINGS"]
