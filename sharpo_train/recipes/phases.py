"""The phases of an experiment, one function each (inputs in, a JSON-able summary out), and
the bookkeeping that makes a rerun skip what is done:

    (the environment's) tasks, demos            -> its RecipeSpec (envs/<name>/recipe.py):
                                                   the run's tasks, expert demonstrations
    sft(demos_path, sft_dir, sft_config)        -> warm-start policy (HF folder)
    rl(config)                                  -> an RL run directory (resumes if begun)
    evaluate(weights, config, tasks, ...)       -> eval.json object (evaluate_checkpoint)
    final_eval(run_dir, tasks)                  -> the RL run's own final evaluation
    (report: sharpo_train.analysis.report.demo / .compare write the markdown and plots)

The recipes are the same for every environment; what differs is looked up in
``env_recipe(settings.env)`` (the :class:`~sharpo_train.envs.spec.RecipeSpec` of the
environment's EnvSpec: the first phase and its output, the demonstrations, the trainer's
env.* keys, the held-out tasks, the optional real-game sample, its default overrides).

Each phase writes its outputs atomically (a temporary name, then a rename), and
``PhaseLog.run(name, fn)`` records it in RUN/pipeline.json when it returns: a phase found
there is skipped, so an interrupted recipe reruns only what did not finish.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional

from ..loops import trainer
from ..runs.checkpoint import latest_checkpoint
from ..loops.train_config import load_config
from ..envs.registry import get_spec
from ..settings.loader import override_key
from ..loops.evaluate import evaluate_checkpoint, family_episodes
from ..io import atomic_write_json, loads_json
from ..models.tokenizer import TOKENIZER_DIR
from ..loops.sft import run_sft
from .recipe_config import DemoConfig


def env_recipe(name: str):
    """The RecipeSpec of environment ``name`` (its EnvSpec.recipe)."""
    return get_spec(name).load("recipe")


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


# ------------------------------------------------------------------ the phases

def sft(demos_path: Path, sft_dir: Path, cfg) -> dict:
    """The warm start: SFT on the demonstrations into ``sft_dir`` (an HF folder)."""
    summary = run_sft(demos_path, sft_dir, cfg)
    return {k: summary[k] for k in ("examples", "steps", "final_loss", "seconds")}


def rl(cfg) -> dict:
    """Train ``cfg`` (its run_dir); resumes from the last checkpoint when the run began."""
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
    result["per_family_episodes"] = family_episodes(tasks, result)
    return result


# ------------------------------------------------------------------ inputs of the phases

def train_config(games_dir: Path, sft_dir: Optional[Path], s: DemoConfig,
                 overrides: list[str], run_dir: Path, extra: list[str] = ()):
    """The trainer config of an RL run from the warm start on the recipe's tasks
    (``games_dir``: the first phase's output, env_recipe(s.env).tasks_path)."""
    base = [f"run_dir={run_dir}", f"seed={s.seed}"] + env_recipe(s.env).env_keys(games_dir, s)
    if sft_dir is not None:
        base.append(f"init_from={sft_dir}")
    if not any(override_key(o) in ("model.path", "model.tokenizer_path") for o in overrides):
        # the tiny model's tokenizer is the shipped one; never a copy saved beside weights
        # (transformers reloads a saved copy as a different tokenizer class)
        base.append(f"model.tokenizer_path={TOKENIZER_DIR}")
    return load_config(None, base + list(overrides) + list(extra))


def latest_policy(run_dir: Path) -> Path:
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
