"""The phases of an experiment, one function each (inputs in, a JSON-able summary out), and
the bookkeeping that makes a rerun skip what is done:

    games(games_dir, settings)                  -> generated train + held-out splits (ALFWorld)
    goals(goals_path, settings, config)         -> WebShop's train goals and held-out test goals
    demos(games_dir, demos_path, settings, h)   -> expert demonstrations (JSONL)
    sft(demos_path, sft_dir, sft_config)        -> warm-start policy (HF folder)
    rl(config)                                  -> an RL run directory (resumes if begun)
    evaluate(weights, config, tasks, ...)       -> eval.json object (evaluate_checkpoint)
    final_eval(run_dir, tasks)                  -> the RL run's own final evaluation
    (report: sharpo_train.report.demo / .compare write the markdown and plots)

The recipes are the same for every environment; what differs is looked up in
``ENV_RECIPES[settings.env]`` (an :class:`EnvRecipe`: the first phase and its output, the
demonstrations, the trainer's env.* keys, the held-out tasks, the optional real-game sample).

Each phase writes its outputs atomically (a temporary name, then a rename), and
``PhaseLog.run(name, fn)`` records it in RUN/pipeline.json when it returns: a phase found
there is skipped, so an interrupted recipe reruns only what did not finish.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

from ..evaluate import balanced_tasks, episodes_by_family, evaluate_checkpoint
from ..io import loads_json
from ..settings import DemoConfig
from .settings import SHARED_ALFWORLD


# ------------------------------------------------------------------ bookkeeping

class PhaseLog:
    """RUN/pipeline.json: which phases finished, how long each took, what they returned."""

    def __init__(self, out: Path):
        self.path = Path(out) / "pipeline.json"
        self.state = (loads_json(self.path.read_text(), self.path) if self.path.is_file()
                      else {"phases": {}})

    def done(self, name: str) -> bool:
        return bool(self.state["phases"].get(name, {}).get("done"))

    def result(self, name: str):
        return self.state["phases"].get(name, {}).get("result")

    def record(self, name: str, seconds: float, result=None) -> None:
        self.state["phases"][name] = {"done": True, "seconds": round(seconds, 1), "result": result}
        self._write()

    def set(self, key: str, value) -> None:
        self.state[key] = value
        self._write()

    def _write(self) -> None:
        from ..io import atomic_write_json
        atomic_write_json(self.path, self.state)

    def seconds(self) -> dict[str, float]:
        return {k: v.get("seconds", 0.0) for k, v in self.state["phases"].items()}

    def run(self, name: str, fn: Callable[[], object], echo=print):
        """fn() unless ``name`` is recorded as done; returns its (recorded) result."""
        if self.done(name):
            echo(f"[{name}] already done ({self.state['phases'][name]['seconds']} s), skipped")
            return self.result(name)
        echo(f"[{name}] ...")
        start = time.time()
        result = fn()
        self.record(name, time.time() - start, result)
        echo(f"[{name}] done in {time.time() - start:.0f} s")
        return result


def run_phase(log: PhaseLog, name: str, fn: Callable[[], object], echo=print):
    return log.run(name, fn, echo)


# ------------------------------------------------------------------ the phases

def games(games_dir: Path, s: DemoConfig) -> dict:
    """Generated train and held-out (valid_seen) splits; held-out games use generator seed
    ``s.seed + 1``. -> {"train": n, "eval": n, "train_families": {family: n}}."""
    from ..envs.alfworld.generator import generate_splits
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


def demos(games_dir: Path, demos_path: Path, s: DemoConfig, history_length: int) -> dict:
    """Expert demonstrations of the train split -> DemoStats as a dict."""
    from ..envs.alfworld.demos import write_demos
    tmp = demos_path.with_suffix(".jsonl.tmp")
    stats = write_demos(str(games_dir), "train", str(tmp), max_steps=50,
                        history_length=history_length, workers=s.workers, seed=s.seed)
    if stats.turns == 0:
        raise RuntimeError(f"demonstrations: the expert won none of the {stats.games} games in "
                           f"{games_dir}/json_2.1.1/train")
    tmp.replace(demos_path)
    return asdict(stats)


def sft(demos_path: Path, sft_dir: Path, cfg) -> dict:
    """The warm start: SFT on the demonstrations into ``sft_dir`` (an HF folder)."""
    from ..sft import run_sft
    summary = run_sft(demos_path, sft_dir, cfg)
    return {k: summary[k] for k in ("examples", "steps", "final_loss", "seconds")}


def rl(cfg) -> dict:
    """Train ``cfg`` (its run_dir); resumes from the last checkpoint when the run began."""
    from .. import trainer
    resume = (Path(cfg.run_dir) / "metrics.jsonl").is_file()
    cfg.resume = resume
    trainer.train(cfg)
    return {"method": cfg.method, "steps": cfg.total_steps}


def evaluate(weights: Path, cfg, tasks: list, games_dir: Optional[Path],
             max_turns: Optional[int] = None) -> dict:
    """Greedy evaluation of a checkpoint folder on ``tasks`` from ``games_dir`` (None: the
    environment of ``cfg.env``, e.g. WebShop's data folder)."""
    result = evaluate_checkpoint(Path(weights), cfg, tasks, games_dir=games_dir,
                                 max_turns=max_turns)
    if games_dir is not None:
        result["games"] = str(games_dir)
    return result


def final_eval(run_dir: Path, tasks: list) -> dict:
    """The run's own final evaluation (RUN/eval.json: all held-out games), with episode
    counts per family added."""
    path = Path(run_dir) / "eval.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the RL run wrote no final evaluation (eval.at_end)")
    result = loads_json(path.read_text(), path)
    result["per_family_episodes"] = episodes_by_family(tasks)
    return result


# ------------------------------------------------------------------ inputs of the phases

def train_config(games_dir: Path, sft_dir: Optional[Path], s: DemoConfig,
                 overrides: list[str], run_dir: Path, extra: list[str] = ()):
    """The trainer config of an RL run from the warm start on the recipe's tasks
    (``games_dir``: the first phase's output, ENV_RECIPES[s.env].tasks_path)."""
    from ..config import load_config
    base = [f"run_dir={run_dir}", f"seed={s.seed}"] + ENV_RECIPES[s.env].env_keys(games_dir, s)
    if sft_dir is not None:
        base.append(f"init_from={sft_dir}")
    if not any(o.startswith(("model.path=", "model.tokenizer_path=")) for o in overrides):
        # the tiny model's tokenizer is the shipped one; never a copy saved beside weights
        # (transformers reloads a saved copy as a different tokenizer class)
        from ..model import TOKENIZER_DIR
        base.append(f"model.tokenizer_path={TOKENIZER_DIR}")
    return load_config(None, base + list(overrides) + list(extra))


def alfworld_env_keys(games_dir: Path, s: DemoConfig) -> list[str]:
    """The trainer's env.* keys for the generated games."""
    return ["env.name=alfworld", "env.generate=null", f"env.games_dir={games_dir}",
            "env.train_split=train", "env.eval_split=valid_seen",
            f"env.max_steps={s.game_max_steps}", f"env.workers={s.workers}"]


def heldout_tasks(games_dir: Path) -> list:
    from ..envs.alfworld.games import discover_games, task_of
    return [task_of(g) for g in discover_games(str(games_dir), "valid_seen")]


def real_eval_tasks(s: DemoConfig) -> tuple[Optional[Path], list]:
    """A family-balanced sample of the real valid_seen games (seeded), or (None, [])."""
    if s.real_eval_games <= 0:
        return None, []
    root = Path(s.real_games_dir) if s.real_games_dir else SHARED_ALFWORLD
    from ..envs.alfworld.games import discover_games, split_folder, task_of
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


# ------------------------------------------------------------------ WebShop

def webshop_env_keys(goals_path: Path, s: DemoConfig) -> list[str]:
    """The trainer's env.* keys: RL on the first ``s.train_games`` goals of WebShop's train
    split (those of the demonstrations), evaluation on its test split (eval.num_tasks of them,
    category-balanced: recipes/settings.py ENV_DEFAULTS)."""
    return ["env.name=webshop", "env.train_split=train", "env.eval_split=test",
            f"env.num_train={s.train_games}", f"env.max_steps={s.game_max_steps}"]


def webshop_heldout(cfg) -> list:
    """The test goals a final evaluation plays: ``balanced_tasks(test split,
    eval.num_tasks, "eval")``, the trainer's own draw (evaluate_checkpoint)."""
    from ..envs import make_suite
    env = dict(cfg.env, train_split="")
    return balanced_tasks(make_suite(env).eval_tasks, cfg.eval.num_tasks or 0, "eval")


def goals(goals_path: Path, s: DemoConfig, cfg) -> dict:
    """WebShop's goals of the run, written to ``goals_path`` (JSON: the data folder, the
    training goal ids and the held-out test goal ids) -> counts per split and category."""
    from ..envs import make_suite
    from ..envs.webshop.data import resolve_data_dir
    from ..io import atomic_write_json
    suite = make_suite(dict(cfg.env))             # a missing data file: one error naming it
    held = webshop_heldout(cfg)
    record = {"data_dir": str(resolve_data_dir(cfg.env.get("data_dir"))),
              "train": [t.id for t in suite.train_tasks], "heldout": [t.id for t in held]}
    atomic_write_json(goals_path, record)
    return {"train": len(suite.train_tasks), "eval": len(held),
            "test_split": len(suite.eval_tasks),
            "train_families": episodes_by_family(suite.train_tasks),
            "data_dir": record["data_dir"]}


def webshop_demos(goals_path: Path, demos_path: Path, s: DemoConfig, cfg) -> dict:
    """The expert's demonstrations of the run's training goals (those it wins, score 1), from
    the world of ``cfg.env`` (its data_dir and price_seed: the goals RL trains on)."""
    from ..envs.webshop.demos import DemoStats, demo_episode
    from ..envs.webshop.engine import WebShopEnv, get_world
    from ..io import atomic_write_text
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


# ------------------------------------------------------------------ per-environment hooks

@dataclass(frozen=True)
class EnvRecipe:
    """What the recipes need from one environment. ``cfg`` is an RL run's trainer config
    (train_config), ``s`` the DemoConfig, ``path`` the first phase's output."""

    tasks_phase: str      # name of the first phase in RUN/pipeline.json
    tasks_path: str       # its output under RUN
    prepare: Callable     # (path, s, cfg) -> summary (JSON-able)
    demos: Callable       # (path, demos_path, s, cfg) -> DemoStats as a dict
    env_keys: Callable    # (path, s) -> trainer overrides env.* (first in train_config)
    heldout: Callable     # (path, s, cfg) -> the held-out Task list
    eval_dir: Callable    # path -> games_dir argument of evaluate() (None: cfg.env's own)
    real_eval: Callable   # s -> (root, tasks) of an extra real-game sample; (None, []) if none
    setup: Callable = lambda out: None     # once, before any phase (e.g. environment vars)


def _alfworld_setup(out: Path) -> None:
    import os
    os.environ.setdefault("ALFWORLD_DATA", str(Path(out) / "games"))


# the module-level phase functions are looked up at call time (tests replace them)
ENV_RECIPES: dict[str, EnvRecipe] = {
    "alfworld": EnvRecipe(
        tasks_phase="games", tasks_path="games",
        prepare=lambda path, s, cfg: games(path, s),
        demos=lambda path, out, s, cfg: demos(path, out, s, cfg.rollout.history_length),
        env_keys=lambda path, s: alfworld_env_keys(path, s),
        heldout=lambda path, s, cfg: heldout_tasks(path),
        eval_dir=lambda path: path,
        real_eval=lambda s: real_eval_tasks(s),
        setup=_alfworld_setup),
    "webshop": EnvRecipe(
        tasks_phase="goals", tasks_path="goals.json",
        prepare=lambda path, s, cfg: goals(path, s, cfg),
        demos=lambda path, out, s, cfg: webshop_demos(path, out, s, cfg),
        env_keys=lambda path, s: webshop_env_keys(path, s),
        heldout=lambda path, s, cfg: webshop_heldout(cfg),
        eval_dir=lambda path: None,
        real_eval=lambda s: (None, [])),
}


def latest_policy(run_dir: Path) -> Path:
    from ..checkpoint import latest_checkpoint
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint")
    return ckpt / "policy"


def quiet_transformers() -> None:
    """Hide what transformers repeats at every load/save of the small policy: the
    "Loading weights" / "Writing model shards" bars and the past_key_values deprecation."""
    import warnings
    warnings.filterwarnings("ignore", message=".*past_key_values.*", category=FutureWarning)
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
