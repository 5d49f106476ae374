"""What the reports say about a recipe environment (``DemoConfig.env``): its name, the
order of its families, how its held-out tasks and warm-start data were chosen -- read from
its EnvSpec and RecipeSpec (sharpo_train/envs/spec.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...envs.registry import DEFAULT_ENV, get_spec


@dataclass(frozen=True)
class EnvReport:
    label: str                    # "ALFWorld", "WebShop"
    families: list[str]           # table row order
    family_word: str              # what a family is ("task family", "product category")
    heldout: Callable             # (s, n episodes) -> heading of the held-out table
    warm_data: Callable           # s -> where the expert demonstrations came from
    scored: bool                  # eval results carry "score" (mean task score)
    real_label: str = ""          # heading of the real-game sample's table
    real_missing: str = ""        # note when the recipe found no real games ("": none)
    decoding: str = "greedy"      # how the held-out evaluation decodes (the recipe's setting)
    task_word: str = "game"       # what one held-out episode plays
    demo_word: str = "expert"     # who played the warm start's demonstrations
    real_turns: Callable = lambda s: None       # s -> turn limit on the real-game sample
    tasks_note: Callable = lambda s: ""         # s -> note after warm_data (" (size tiny)")


def env_report(s) -> EnvReport:
    """The EnvReport of a DemoConfig (settings without ``env``: the default environment)."""
    spec = get_spec(getattr(s, "env", DEFAULT_ENV))
    recipe = spec.load("recipe")
    return EnvReport(spec.title, list(spec.families), spec.family_word, recipe.heldout_title,
                     recipe.warm_data, spec.scored, recipe.real_label, recipe.real_missing,
                     recipe.eval_decoding, recipe.task_word, recipe.demo_word,
                     recipe.real_turns, recipe.tasks_note)
