"""ALFWorld's env.* settings (``AlfworldSettings``), the one declaration: ``make_suite``
builds the suite from it, `sharpo settings env.` reads its defaults, help and ranges.
``env.generate`` is a mapping of ``GenerateSettings`` handed to generator.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ...settings.loader import in_range, need, setting

DEFAULT_MAX_STEPS = 50
EXPERT_TYPES = ("planner", "handcoded")
MAX_GENERATED = 100_000      # games one generation makes (env.generate.n_*, generate --n)


@dataclass
class GenerateSettings:
    """env.generate.* of ALFWorld: generator.py ``generate_splits``' keyword arguments."""
    n_train: int = setting(32, "training games to generate")
    n_eval: int = setting(12, "held-out games to generate (from seed + 1)")
    seed: int = setting(0, "seed of the generated games")
    size: str = setting("small", "room size: tiny, small, medium or large (generator.SIZES)")
    grammar: Any = setting("release", "the text grammar: release (ALFWorld's own) or a "
                           "folder of grammar files")
    families: Optional[list] = setting(None, "task families generated (null: all six)")
    workers: int = setting(1, "processes generating games")

    def validate(self) -> None:
        in_range(self, "n_train", 0, MAX_GENERATED)
        in_range(self, "n_eval", 0, MAX_GENERATED)
        in_range(self, "seed", 0)
        in_range(self, "workers", 0, 1024)


@dataclass
class AlfworldSettings:
    """env.* of ALFWorld (docs/what_is_real.md, ALFWorld)."""
    games_dir: Optional[str] = setting(None, "folder holding json_2.1.1/ (or that folder "
                                       "itself, or relative to $ALFWORLD_DATA); null: "
                                       "$ALFWORLD_DATA")
    train_split: str = setting("train", "training split")
    eval_split: Optional[str] = setting("valid_seen", "held-out split (empty or null: none)")
    num_train_games: Optional[int] = setting(None, "first N training games in path order "
                                             "(0 or null: all)")
    num_eval_games: Optional[int] = setting(None, "first N held-out games in path order "
                                            "(0 or null: all)")
    task_families: Optional[list] = setting(None, "task families kept, e.g. [Pick, Heat] "
                                            "(or task_type names; null: all six)")
    max_steps: int = setting(DEFAULT_MAX_STEPS, "environment step limit per episode, "
                             "counted by the environment")
    workers: int = setting(2, "worker processes when the trainer asks for the default")
    expert_type: Optional[str] = setting(None, "null, planner or handcoded: adds the "
                                         "expert's action to each step (slow)")
    seed: Optional[int] = setting(None, "seed of the handcoded expert's random choices")
    generate: Optional[dict] = setting(None, "{n_train, n_eval, seed, size, ...}: generate "
                                       "games into games_dir first when it holds none "
                                       "(generator.py)")
    start_method: str = setting("spawn", "multiprocessing start method of the worker pool")
    timeout_s: float = setting(120.0, "seconds a worker may take for one step before it is "
                               "replaced")

    def validate(self) -> None:
        in_range(self, "num_train_games", 0, nullable=True)
        in_range(self, "num_eval_games", 0, nullable=True)
        in_range(self, "max_steps", 1, 10000)
        in_range(self, "workers", 0, 1024)
        need(self.expert_type in (None, "") + EXPERT_TYPES, "expert_type",
             f"one of {EXPERT_TYPES} or null", self.expert_type)
        in_range(self, "seed", 0, nullable=True)
        in_range(self, "timeout_s", 0.001, 1e6)
