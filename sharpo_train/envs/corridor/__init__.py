"""The corridor (env.name "corridor"): a long-horizon text environment built so that
credit assignment is the bottleneck (docs/corridor.md). Ten turns, three of them decisive
(a lamp whose colour fixes the safe door), the others accept any door; a wrong door at a
lamp does not end the episode; reward 1 only when every lamp's door was right.

Entry point for the trainer::

    suite = make_suite({"name": "corridor"})      # 500 train tasks, 200 held-out tasks
    pool = suite.make_pool(1)                      # in-process, instant
    first = pool.reset(suite.train_tasks[:4])
    results = pool.step({0: "left", 1: None})

env_config keys (all optional; ``KNOWN_KEYS``): num_turns (10), num_decisive (3),
num_actions (2), clues_per_action (2), num_train (500), num_eval (200), seed (0: the lamp
code and the train draw; held-out tasks from seed + 1, never a train layout),
format_penalty (0.0: a reward setting, not a task one; an invalid reply costs
format_penalty / num_turns of the final reward, docs/corridor.md "Format penalty").

Submodules: engine (CorridorEnv, tasks, ``decisive_labels``), prompts, agents (expert,
random, play), demos.
"""
from __future__ import annotations

from ..base import EnvSuite, SerialEnvPool
from ...errors import ConfigError
from ..env_config import check_env_config
from . import prompts
from .engine import FAMILY, CorridorEnv, CorridorSettings, decisive_labels, make_tasks
from .prompts import parse_action, render_hint, render_turn_prompt

# reward settings: they change what an episode pays, not which tasks exist
REWARD_KEYS = ("format_penalty",)
# env.<key> -> (type, lo, hi) (train_config.check_env reads it through the EnvSpec, spec.py);
# CorridorSettings.check applies the same ranges and the cross-key ones
SETTINGS = {"name": (str,), "num_turns": (int, 1, 100), "num_decisive": (int, 1, 100),
            "num_actions": (int, 2, 6), "clues_per_action": (int, 1, 12),
            "num_train": (int, 1, 100000), "num_eval": (int, 0, 100000),
            "seed": (int, 0, None), "format_penalty": (float, 0.0, 1.0)}
SETTINGS_HELP = {
    "num_turns": "turns per episode (default 10)",
    "num_decisive": "decisive (lamp) turns per episode (default 3)",
    "num_actions": "doors to choose from (default 2)",
    "clues_per_action": "lamp colours per door in the code (default 2)",
    "num_train": "training tasks (default 500)", "num_eval": "held-out tasks (default 200)",
    "seed": "seed of the code and the tasks (default 0)",
    "format_penalty": "every invalid reply costs format_penalty / num_turns of the final "
                      "reward (default 0: the reward is success only)",
}
KNOWN_KEYS = set(SETTINGS)
FAMILIES = [FAMILY]


def settings_of(env_config: dict) -> CorridorSettings:
    """The CorridorSettings of an env config (unknown keys and bad values: ValueError)."""
    check_env_config(env_config, KNOWN_KEYS, "corridor")
    return CorridorSettings(**{k: v for k, v in env_config.items()
                               if k != "name" and k not in REWARD_KEYS}).check()


def format_penalty_of(env_config: dict) -> float:
    """env.format_penalty in [0, 1] (default 0: the reward is success only)."""
    check_env_config(env_config, KNOWN_KEYS, "corridor")
    v = env_config.get("format_penalty", 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise ConfigError(f"env.format_penalty: expected a number in [0, 1], got {v!r}")
    return float(v)


# a reply is "<think>a red lamp</think><action>left</action>": about 20 tokens
REPLY_TOKENS = 24


def train_defaults(env_config: dict) -> dict:
    """The trainer's defaults for a corridor run (EnvSpec.train_defaults): one rollout turn
    per corridor turn, so an episode is never cut before its exit, and a reply budget that
    fits the reply format."""
    turns = env_config.get("num_turns", CorridorSettings.num_turns)
    return {"rollout.max_turns": int(turns), "rollout.max_new_tokens": REPLY_TOKENS}


def make_suite(env_config: dict) -> EnvSuite:
    train, evals = make_tasks(settings_of(env_config))
    penalty = format_penalty_of(env_config)
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
           "KNOWN_KEYS", "SETTINGS", "FAMILIES"]
