"""WebShop (Yao et al., 2022) for sharpo_train: the 1,000-product catalogue, WebShop's
synthetic goals and reward, its text pages and actions, BM25 search, an expert, prompts
and demonstrations. No Java, no Flask, no download: the data is read from
``../shared/data/webshop`` (or ``env.data_dir`` / $WEBSHOP_DATA).

Entry point for the trainer (env.name "webshop"; its EnvSpec: spec.py)::

    suite = make_suite({"name": "webshop"})          # train: goals 1500.., eval: test 0..500
    pool = suite.make_pool(1)                        # in-process (a step takes ~1 ms)
    first = pool.reset(suite.train_tasks[:4])
    results = pool.step({0: "search[red running shoes]", 1: None})

env_config keys (all optional): the fields of ``settings.WebShopSettings`` (defaults,
help and ranges: `sharpo settings env.`); "human" is the 13 human-written goals;
info["task_score"] always holds WebShop's score, whatever ``reward`` trains on.

Submodules: settings (env.*), data (loader), goals, search (BM25), reward (``webshop_reward``), engine
(WebShopEnv), prompts, agents (expert, random, play), demos, recipe (`sharpo demo` phases),
spec (the EnvSpec).
"""
from __future__ import annotations

from typing import Mapping, Optional

from ..base import EnvSuite, SerialEnvPool
from ..env_config import settings_from
from . import prompts
from .data import WebShopDataError, resolve_data_dir
from .prompts import parse_action, render_hint, render_turn_prompt
from .settings import DEFAULT_MAX_STEPS, SPLIT_NAMES, WebShopSettings

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
    s = settings_from(env_config, WebShopSettings, "webshop")
    from .engine import WebShopEnv, get_world
    max_steps, reward = s.max_steps or DEFAULT_MAX_STEPS, s.reward
    world = get_world(s.data_dir, s.price_seed or 0)
    train = world.tasks(s.train_split, s.num_train) if s.train_split else []
    evals = world.tasks(s.eval_split, s.num_eval) if s.eval_split else []

    def _make_pool(num_workers: Optional[int] = None):
        # a step costs ~1 ms (buy: a few ms): one process is enough; num_workers is ignored
        return SerialEnvPool(lambda: WebShopEnv(world, max_steps=max_steps, reward=reward))

    present = {t.family for t in train + evals}
    fams = [f for f in FAMILIES if f in present] + sorted(present - set(FAMILIES))
    return EnvSuite(train_tasks=train, eval_tasks=evals, make_pool=_make_pool, families=fams)


__all__ = ["make_suite", "webshop_reward", "render_turn_prompt", "parse_action", "render_hint",
           "prompts", "WebShopDataError", "resolve_data_dir", "FAMILIES", "WebShopSettings",
           "SPLIT_NAMES"]
