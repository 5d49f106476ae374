"""ALFWorld's part of `sharpo demo` / `sharpo compare` (its RecipeSpec; the recipes:
sharpo_train/recipes/): generated train and held-out games, the planner's demonstrations,
the trainer's env.* keys, an optional sample of real valid_seen games, and ALFWorld's own
``demo.<key>`` settings (:class:`AlfworldDemoSettings`).

The phase functions are looked up at call time by ``RECIPE`` (tests replace them).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from ...checks import check_int
from ...settings.loader import setting
from ...errors import ConfigError
from ..base import balanced_tasks
from ..spec import RecipeSpec
from .demos import write_demos
from .games import SHARED_CANDIDATES, discover_games, split_folder, task_of
from .generator import SIZES, generate_splits

SHARED_ALFWORLD = next((c for c in SHARED_CANDIDATES if c.is_dir()), SHARED_CANDIDATES[0])


@dataclass
class AlfworldDemoSettings:
    """ALFWorld's own ``demo.<key>`` settings of `sharpo demo` / `sharpo compare`
    (RecipeSpec.settings), beside DemoConfig's env-neutral ones (recipes/recipe_config.py)."""

    game_size: str = setting("tiny", "room size of the generated games (generator.SIZES): "
                             "tiny, small, medium or large")
    real_eval_games: int = setting(6, "real ALFWorld valid_seen games sampled for evaluation "
                                   "(0: none)")
    real_games_dir: str = setting("", "folder holding ALFWorld's json_2.1.1 (empty: the "
                                  "shared data folder when present)")
    real_max_turns: int = setting(10, "turn limit on the real games")

    def validate(self) -> None:
        if self.game_size not in SIZES:
            raise ConfigError(f"game_size: expected one of {list(SIZES)}, got {self.game_size!r}")
        for key, lo, hi in (("real_eval_games", 0, 100000), ("real_max_turns", 1, 1000)):
            check_int(getattr(self, key), key, lo, hi, error=ConfigError)


def games(games_dir: Path, s) -> dict:
    """Generated train and held-out (valid_seen) splits; held-out games use generator seed
    ``s.seed + 1``. -> {"train": n, "eval": n, "train_families": {family: n}}."""
    tmp = games_dir.with_name(games_dir.name + ".tmp")
    for stale in (tmp, games_dir):          # not recorded as done: an unfinished attempt
        if stale.exists():
            shutil.rmtree(stale)
    made = generate_splits(tmp, n_train=s.train_games, n_eval=s.eval_games, seed=s.seed,
                           size=s.game_size, workers=s.workers, train_split="train",
                           eval_split="valid_seen")
    tmp.rename(games_dir)
    families: dict[str, int] = {}
    for g in made["train"]:
        families[g.family] = families.get(g.family, 0) + 1
    return {"train": len(made["train"]), "eval": len(made["eval"]), "train_families": families}


def demos(games_dir: Path, demos_path: Path, s, history_length: int) -> dict:
    """Expert demonstrations of the train split -> DemoStats as a dict."""
    tmp = demos_path.with_suffix(".jsonl.tmp")
    stats = write_demos(str(games_dir), "train", str(tmp), max_steps=50,
                        history_length=history_length, workers=s.workers, seed=s.seed)
    if stats.turns == 0:
        raise RuntimeError(f"demonstrations: the expert won none of the {stats.games} games in "
                           f"{games_dir}/json_2.1.1/train")
    tmp.replace(demos_path)
    return asdict(stats)


def env_keys(games_dir: Path, s) -> list[str]:
    """The trainer's env.* keys for the generated games."""
    return ["env.name=alfworld", "env.generate=null", f"env.games_dir={games_dir}",
            "env.train_split=train", "env.eval_split=valid_seen",
            f"env.max_steps={s.game_max_steps}", f"env.workers={s.workers}"]


def heldout_tasks(games_dir: Path) -> list:
    return [task_of(g) for g in discover_games(str(games_dir), "valid_seen")]


def real_eval_tasks(s) -> tuple[Optional[Path], list]:
    """A family-balanced sample of the real valid_seen games (seeded), or (None, [])."""
    if s.real_eval_games <= 0:
        return None, []
    root = Path(s.real_games_dir) if s.real_games_dir else SHARED_ALFWORLD
    named_root, named_split = split_folder(root)
    if named_split is not None:           # demo.real_games_dir=.../json_2.1.1/valid_seen
        if named_split != "valid_seen":
            raise FileNotFoundError(f"demo.real_games_dir: {root} is not a valid_seen split")
        root = Path(named_root)
    if not (root / "json_2.1.1" / "valid_seen").is_dir() and not (root / "valid_seen").is_dir():
        if s.real_games_dir:
            raise FileNotFoundError(f"demo.real_games_dir: no valid_seen split under {root}")
        return None, []
    tasks = [task_of(g) for g in discover_games(str(root), "valid_seen")]
    return root, balanced_tasks(tasks, min(s.real_eval_games, len(tasks)), f"real-eval/{s.seed}")


def setup(out: Path) -> None:
    os.environ.setdefault("ALFWORLD_DATA", str(Path(out) / "games"))


RECIPE = RecipeSpec(
    tasks_phase="games", tasks_path="games",
    prepare=lambda path, s, cfg: games(path, s),
    demos=lambda path, out, s, cfg: demos(path, out, s, cfg.rollout.history_length),
    env_keys=lambda path, s: env_keys(path, s),
    heldout=lambda path, s, cfg: heldout_tasks(path),
    eval_dir=lambda path: path,
    heldout_title=lambda s, n: (f"Held-out generated games ({s.eval_games} games, generator "
                                f"seed {s.seed + 1}, size {s.game_size}; not seen in training)"),
    warm_data=lambda s: f"{s.train_games} generated training games",
    real_eval=lambda s: real_eval_tasks(s),
    real_label="Real ALFWorld valid_seen games",
    real_missing=("No real ALFWorld games were found (../shared/data/alfworld): the table "
                  "covers generated games only."),
    real_turns=lambda s: s.real_max_turns,
    tasks_note=lambda s: f" (size {s.game_size})",
    setup=setup,
    # `--quick`: a small real-game sample, short games
    defaults={"quick_demo": ["real_eval_games=2", "real_max_turns=4"]},
    settings=AlfworldDemoSettings)
