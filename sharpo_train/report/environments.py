"""What the reports say about each recipe environment (``DemoConfig.env``): its name, the
order of its families and how its held-out tasks and warm-start data were chosen
(sharpo_train/recipes/phases.py ENV_RECIPES makes them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..envs.alfworld.games import FAMILIES as ALFWORLD_FAMILIES
from ..envs.webshop import FAMILIES as WEBSHOP_FAMILIES


@dataclass(frozen=True)
class EnvReport:
    label: str                    # "ALFWorld", "WebShop"
    families: list[str]           # table row order
    family_word: str              # what a family is ("task family", "product category")
    heldout: Callable             # (s, n episodes) -> heading of the held-out table
    warm_data: Callable           # s -> where the expert demonstrations came from
    scored: bool                  # eval results carry "score" (mean task score)
    decoding: str = "greedy"      # how the held-out evaluation decodes (the recipe's setting)
    task_word: str = "game"       # what one held-out episode plays
    demo_word: str = "expert"     # who played the warm start's demonstrations


ENV_REPORTS = {
    "alfworld": EnvReport(
        "ALFWorld", list(ALFWORLD_FAMILIES), "task family",
        lambda s, n: (f"Held-out generated games ({s.eval_games} games, generator seed "
                      f"{s.seed + 1}, size {s.game_size}; not seen in training)"),
        lambda s: f"{s.train_games} generated training games", False),
    "webshop": EnvReport(
        "WebShop", list(WEBSHOP_FAMILIES), "product category",
        lambda s, n: (f"WebShop test goals ({n} goals: a category-balanced sample of the test "
                      f"split, goals 0-499; never trained on; up to {s.game_max_steps} steps)"),
        lambda s: f"the first {s.train_games} goals of WebShop's train split", True),
    "corridor": EnvReport(
        "Corridor", ["corridor"], "task family",
        lambda s, n: (f"Held-out corridor tasks ({n} tasks, drawn from seed {s.seed + 1}, "
                      f"none with a training task's layout)"),
        lambda s: (f"the {s.train_games} training tasks, one of each per task, and a "
                   f"hinted copy of every lamp turn (docs/corridor.md)"), False,
        decoding="sampled at temperature 1 (eval.temperature)", task_word="task",
        demo_word="expert and random-agent"),
}


def env_report(s) -> EnvReport:
    """The EnvReport of a DemoConfig (settings without ``env``: ALFWorld)."""
    return ENV_REPORTS[getattr(s, "env", "alfworld")]
