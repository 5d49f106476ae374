"""WebShop's part of `sharpo demo` / `sharpo compare` (its RecipeSpec; the recipes:
sharpo_train/recipes/): the run's training goals and held-out test goals, the expert's
demonstrations, the trainer's env.* keys and WebShop's own recipe defaults.

The phase functions are looked up at call time by ``RECIPE`` (tests replace them).
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ...io import atomic_write_json, atomic_write_text
from ..base import balanced_tasks, episodes_by_family
from ..spec import RecipeSpec
from . import make_suite
from .data import resolve_data_dir
from .demos import DemoStats, demo_episode
from .engine import WebShopEnv, get_world


def env_keys(goals_path: Path, s) -> list[str]:
    """The trainer's env.* keys: RL on the first ``s.train_games`` goals of WebShop's train
    split (those of the demonstrations), evaluation on its test split (eval.num_tasks of them,
    category-balanced: ``RECIPE.defaults``)."""
    return ["env.name=webshop", "env.train_split=train", "env.eval_split=test",
            f"env.num_train={s.train_games}", f"env.max_steps={s.game_max_steps}"]


def heldout(cfg) -> list:
    """The test goals a final evaluation plays: ``balanced_tasks(test split,
    eval.num_tasks, "eval")``, the trainer's own draw (evaluate_checkpoint)."""
    env = dict(cfg.env, train_split="")
    return balanced_tasks(make_suite(env).eval_tasks, cfg.eval.num_tasks or 0, "eval")


def goals(goals_path: Path, s, cfg) -> dict:
    """WebShop's goals of the run, written to ``goals_path`` (JSON: the data folder, the
    training goal ids and the held-out test goal ids) -> counts per split and category."""
    suite = make_suite(dict(cfg.env))             # a missing data file: one error naming it
    held = heldout(cfg)
    record = {"data_dir": str(resolve_data_dir(cfg.env.get("data_dir"))),
              "train": [t.id for t in suite.train_tasks], "heldout": [t.id for t in held]}
    atomic_write_json(goals_path, record)
    return {"train": len(suite.train_tasks), "eval": len(held),
            "test_split": len(suite.eval_tasks),
            "train_families": episodes_by_family(suite.train_tasks),
            "data_dir": record["data_dir"]}


def demos(goals_path: Path, demos_path: Path, s, cfg) -> dict:
    """The expert's demonstrations of the run's training goals (those it wins, score 1), from
    the world of ``cfg.env`` (its data_dir and price_seed: the goals RL trains on)."""
    world = get_world(cfg.env.get("data_dir"), cfg.env.get("price_seed") or 0)
    env = WebShopEnv(world, max_steps=s.game_max_steps)
    stats, lines = DemoStats(), []
    for task in world.tasks(cfg.env.get("train_split") or "train", s.train_games):
        records = demo_episode(env, task, history_length=cfg.rollout.history_length)
        stats.episodes += 1
        stats.won += bool(records)
        stats.turns += len(records)
        lines += [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
    if stats.turns == 0:
        raise RuntimeError(f"demonstrations: the expert won none of the {stats.episodes} "
                           f"WebShop training goals in {s.game_max_steps} steps")
    atomic_write_text(demos_path, "".join(lines))
    return asdict(stats)


# WebShop pages are long (a results page is ~1.5-3k tokens of the tiny model's small
# 1,092-token vocabulary, and a step's cost grows faster than its length): the warm start keeps the last
# sft.max_length tokens of a turn (the admissible actions and the reply) and takes fewer,
# smaller steps (measured: ~1.5 s a step of 8 x 1024 tokens on a busy 2-core machine, vs
# ~15 s at 16 x 2048); a rollout turn prompt drops history pairs beyond
# rollout.max_prompt_tokens. The final evaluation plays demo.eval_games category-balanced
# test goals (eval.num_tasks).
# WebShop keeps 18 held-out goals (its pages make an evaluation episode ~10x an ALFWorld one)
# and the trainer's evaluation at the end only.
DEFAULTS = {"demo": ["eval_games=18"],
            "sft": ["max_steps=300", "batch_size=8", "max_length=1024"],
            "train": ["eval.num_tasks={eval_games}", "eval.before_train=false",
                      "eval.train_tasks=0"],
            "quick_sft": ["max_steps=12", "max_length=768", "batch_size=4"]}

RECIPE = RecipeSpec(
    tasks_phase="goals", tasks_path="goals.json",
    prepare=lambda path, s, cfg: goals(path, s, cfg),
    demos=lambda path, out, s, cfg: demos(path, out, s, cfg),
    env_keys=lambda path, s: env_keys(path, s),
    heldout=lambda path, s, cfg: heldout(cfg),
    eval_dir=lambda path: None,
    heldout_title=lambda s, n: (f"WebShop test goals ({n} goals: a category-balanced sample of "
                                f"the test split, goals 0-499; never trained on; up to "
                                f"{s.game_max_steps} steps)"),
    warm_data=lambda s: f"the first {s.train_games} goals of WebShop's train split",
    defaults=DEFAULTS)
