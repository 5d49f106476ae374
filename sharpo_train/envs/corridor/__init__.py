"""The corridor (env.name "corridor"): a long-horizon text environment built so that
credit assignment is the bottleneck (docs/corridor.md). Ten turns, three of them decisive
(a lamp whose colour fixes the safe door), the others accept any door; a wrong door at a
lamp does not end the episode; reward 1 only when every lamp's door was right.

Entry point for the trainer::

    suite = make_suite({"name": "corridor"})      # 500 train tasks, 200 held-out tasks
    pool = suite.make_pool(1)                      # in-process, instant
    first = pool.reset(suite.train_tasks[:4])
    results = pool.step({0: "left", 1: None})

env_config keys (all optional): the fields of ``engine.CorridorSettings``, with their
defaults, help and ranges (`sharpo settings env.`; docs/corridor.md "Format penalty").

Submodules: engine (CorridorEnv, tasks, ``decisive_labels``), prompts, agents (expert,
random, play), demos.
"""
from __future__ import annotations

import dataclasses

from ..base import EnvSuite, SerialEnvPool
from ..env_config import settings_from
from . import prompts
from .engine import FAMILY, CorridorEnv, CorridorSettings, decisive_labels, make_tasks
from .prompts import parse_action, render_hint, render_turn_prompt

# reward settings: they change what an episode pays, not which tasks exist
REWARD_KEYS = ("format_penalty",)
KNOWN_KEYS = {"name"} | {f.name for f in dataclasses.fields(CorridorSettings)}
FAMILIES = [FAMILY]


def settings_of(env_config: dict) -> CorridorSettings:
    """The CorridorSettings of an env config (unknown keys and bad values: ValueError)."""
    return settings_from(env_config, CorridorSettings, "corridor")


# a reply is "<think>a red lamp</think><action>left</action>": about 20 tokens
REPLY_TOKENS = 24


def train_defaults(env_config: dict) -> dict:
    """The trainer's defaults for a corridor run (EnvSpec.train_defaults): one rollout turn
    per corridor turn, so an episode is never cut before its exit, and a reply budget that
    fits the reply format."""
    turns = env_config.get("num_turns", CorridorSettings.num_turns)
    return {"rollout.max_turns": int(turns), "rollout.max_new_tokens": REPLY_TOKENS}


def make_suite(env_config: dict) -> EnvSuite:
    s = settings_of(env_config)
    train, evals = make_tasks(s)
    penalty = float(s.format_penalty)
    return EnvSuite(train, evals,
                    lambda n=None: SerialEnvPool(lambda: CorridorEnv(format_penalty=penalty)),
                    list(FAMILIES))


def label_episodes(episodes) -> list[list]:
    """[N][turns] exact credit labels of rollout Episodes (step/rollout.py): True/False at a
    lamp turn (right/wrong door), None elsewhere and for an episode ended by a fault
    (analysis/credit_auc.py, docs/credit_quality.md)."""
    return [[None] * len(ep.turns) if ep.error is not None else
            decisive_labels(ep.task, [t.action for t in ep.turns]) for ep in episodes]


__all__ = ["make_suite", "settings_of", "train_defaults", "label_episodes", "render_turn_prompt",
           "parse_action", "render_hint", "prompts", "CorridorEnv", "CorridorSettings",
           "KNOWN_KEYS", "FAMILIES"]
