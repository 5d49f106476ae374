"""WebShop's env.* settings (``WebShopSettings``), the one declaration: ``make_suite`` builds
the suite from it, `sharpo settings env.` reads its defaults, help and ranges."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...settings.loader import in_range, need, setting
from .goals import SPLITS

DEFAULT_MAX_STEPS = 15                    # verl-agent's step limit
REWARD_MODES = ("success", "score")
# env.train_split / env.eval_split: WebShop's goal splits, "all" goals, or the human goals
SPLIT_NAMES = tuple(SPLITS) + ("all", "human")


@dataclass
class WebShopSettings:
    """env.* of WebShop (docs/what_is_real.md, WebShop)."""
    data_dir: Optional[str] = setting(None, "folder with WebShop's items files (null: "
                                      "$WEBSHOP_DATA, else the shared data folder)")
    train_split: Optional[str] = setting("train", "training goals: train (1500..), eval "
                                         "(500..1500), test (0..500), all or human (empty "
                                         "or null: none)")
    eval_split: Optional[str] = setting("test", "held-out goals, as train_split (empty or "
                                        "null: none)")
    num_train: Optional[int] = setting(None, "first N training goals (0 or null: all)")
    num_eval: Optional[int] = setting(None, "first N held-out goals (0 or null: all)")
    max_steps: Optional[int] = setting(DEFAULT_MAX_STEPS, "environment step limit per "
                                       "episode (verl-agent's; null: the default)")
    reward: str = setting("success", "success (1 when WebShop's score is 1, else 0) or "
                          "score (WebShop's score in [0, 1])")
    price_seed: Optional[int] = setting(0, "seed of the price draws (product price ranges, "
                                        "goal price bounds; null: 0)")
    workers: Optional[int] = setting(None, "worker count when the trainer asks for the "
                                     "default (one process serves: a step takes ~1 ms)")

    def validate(self) -> None:
        in_range(self, "num_train", 0, nullable=True)
        in_range(self, "num_eval", 0, nullable=True)
        in_range(self, "max_steps", 1, 10000, nullable=True)
        need(self.reward in REWARD_MODES, "reward", f"one of {list(REWARD_MODES)}",
             self.reward)
        in_range(self, "price_seed", 0, nullable=True)
        in_range(self, "workers", 0, 1024, nullable=True)
        for key in ("train_split", "eval_split"):          # checked before any data is read
            split = getattr(self, key)
            need(not split or split in SPLIT_NAMES, key,
                 f"one of {list(SPLIT_NAMES)} (or empty: none)", split)
