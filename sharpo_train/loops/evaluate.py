"""Evaluation: one episode per task (greedy by default; ``eval.episodes_per_task`` sampled
ones), success overall and per family.

Two entry points, one path through them, on the tasks ``balanced_tasks`` picks:

* ``balanced_tasks(tasks, n, key)`` (envs/base.py): the tasks an evaluation plays, ``n`` of
  them spread evenly over the task families (n=12 over 6 families: 2 each), the same for
  the same key.
* ``evaluate(model, tokenizer, suite, tasks, config) -> dict``: play them with a loaded
  policy.
* ``evaluate_checkpoint(policy, config, tasks=None, ...) -> dict``: the one function every
  caller uses (`sharpo eval`, the demo and compare recipes, ``Trainer.evaluate``). ``policy``
  is a checkpoint directory (an HF folder: RUN/checkpoints/step_S/policy, an SFT output) or a
  ``(model, tokenizer)`` pair already in memory.

The result is the RUN/eval.json object (docs/run_directory.md):
{"success", "per_family": {family: rate}, "per_family_episodes": {family: n}, "episodes",
"games", "per_task": {task id: 1 or 0}} (with eval.episodes_per_task = k > 1: the task's
success rate over its k episodes, and "episodes_per_task": k) (per_task lets two evaluations on the same tasks be
compared game by game: analysis/report/stats.py); an environment that scores its episodes (WebShop:
info["task_score"], WebShop's reward in [0, 1]; success is score == 1) adds {"score": mean
task score, "per_family_score": {family: mean}, "per_task_score": {task id: score}} -- the
paper reports both for WebShop. WebShop's
families are the product categories (beauty, electronics, fashion, garden, grocery); its
evaluation tasks are its test split (env.eval_split, default "test": goals 0..499).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from ..models.device import resolve_device
from ..envs import env_prompts, make_suite
from ..envs.base import balanced_tasks, episodes_by_family
from ..envs.registry import DEFAULT_ENV, get_spec
from ..models.policy import build_policy
from ..step.finite_logits import NonFiniteLogitsError
from ..step.rollout import collect_rollouts


def success_by_family(episodes) -> tuple[float, dict[str, float]]:
    fam: dict[str, list[bool]] = {}
    for ep in episodes:
        fam.setdefault(ep.task.family, []).append(ep.success)
    overall = sum(ep.success for ep in episodes) / max(len(episodes), 1)
    return overall, {f: sum(v) / len(v) for f, v in sorted(fam.items())}


def score_by_family(episodes) -> Optional[tuple[float, dict[str, float]]]:
    """Mean task score overall and per family, or None when no episode has a score (an
    environment without one, e.g. ALFWorld). An episode without a score (an env fault before
    any step) counts as its success, 0 or 1."""
    if not any(ep.score is not None for ep in episodes):
        return None
    fam: dict[str, list[float]] = {}
    values = []
    for ep in episodes:
        v = float(ep.score) if ep.score is not None else float(ep.success)
        values.append(v)
        fam.setdefault(ep.task.family, []).append(v)
    return sum(values) / len(values), {f: sum(v) / len(v) for f, v in sorted(fam.items())}


def per_task_mean(episodes, value) -> dict[str, float]:
    """{task id: mean of value(episode) over the task's episodes}."""
    by: dict[str, list[float]] = {}
    for ep in episodes:
        by.setdefault(ep.task.id, []).append(value(ep))
    return {i: sum(v) / len(v) for i, v in by.items()}


def evaluate(model, tokenizer, suite, tasks, config, pool=None) -> dict:
    r, ev = config.rollout, config.eval
    k = ev.episodes_per_task
    own_pool = pool is None
    pool = pool or suite.make_pool(r.num_env_workers)
    try:
        episodes = collect_rollouts(
            model, tokenizer, pool, list(tasks), k, env_prompts(config.env),
            max_turns=ev.max_turns or r.max_turns, max_new_tokens=r.max_new_tokens,
            temperature=ev.temperature, top_p=r.top_p, history_length=r.history_length,
            max_prompt_tokens=r.max_prompt_tokens, generation_batch_size=r.generation_batch_size,
            autocast_bf16=config.model.autocast_bf16)
    finally:
        if own_pool:
            pool.close()
    overall, per_family = success_by_family(episodes)
    result = {"success": overall, "per_family": per_family, "episodes": len(episodes),
              "games": eval_source(config.env),
              "per_task": ({ep.task.id: int(bool(ep.success)) for ep in episodes} if k == 1
                           else per_task_mean(episodes, lambda ep: float(bool(ep.success))))}
    if k > 1:
        result["episodes_per_task"] = k
    scored = score_by_family(episodes)
    if scored is not None:
        result["score"], result["per_family_score"] = scored
        result["per_task_score"] = per_task_mean(
            episodes, lambda ep: float(ep.score if ep.score is not None else ep.success))
    return result


def family_episodes(tasks, result: dict) -> dict[str, int]:
    """eval.json's "per_family_episodes": episodes played per family (tasks x
    episodes_per_task)."""
    k = int(result.get("episodes_per_task", 1))
    return {f: n * k for f, n in episodes_by_family(tasks).items()}


def eval_source(env: dict) -> str:
    """What an evaluation played, for eval.json's "games": the environment's own words
    (EnvSpec.describe_eval: ALFWorld's games folder, WebShop's split and data folder), else
    its name."""
    describe = get_spec(env.get("name", DEFAULT_ENV)).describe_eval
    return describe(env) if describe is not None else str(env.get("name"))


def eval_only_env(env: dict, games_dir: Optional[str | Path] = None) -> dict:
    """The env config of an evaluation: ``games_dir`` (when given) replaces env.games_dir,
    then the environment drops what only training needs (EnvSpec.eval_env: ALFWorld's
    evaluation split stands in for the training split, WebShop loads no training goals)."""
    env = dict(env)
    if games_dir is not None:
        env["games_dir"] = str(games_dir)
    spec = get_spec(env.get("name", DEFAULT_ENV))
    return spec.eval_env(env) if spec.eval_env is not None else env


def evaluate_checkpoint(policy, config, tasks: Optional[Sequence] = None, *, suite=None,
                        pool=None, seed: Optional[int] = None,
                        games_dir: Optional[str | Path] = None,
                        max_turns: Optional[int] = None, sample_key: str = "eval",
                        label: Optional[str] = None) -> dict:
    """Greedy (eval.temperature=0) evaluation of one policy, one episode per task
    (eval.episodes_per_task sampled ones at eval.temperature > 0).

    policy: a checkpoint directory, or a (model, tokenizer) pair (the trainer's own).
    tasks: what to play; None: ``balanced_tasks(suite.eval_tasks, eval.num_tasks, sample_key)``.
    suite/pool: reuse the caller's (the trainer's); None: made here from ``config.env`` with
    its evaluation split only (``eval_only_env``; ``games_dir`` replaces env.games_dir).
    max_turns: sets eval.max_turns and the environment step limit.
    seed: torch seed before playing (default config.seed).
    label: how errors name a checkpoint directory ``policy`` (default: its path; `sharpo
    eval --run-dir` reads a pinned copy and names the checkpoint).
    Returns the eval.json object with ``per_family_episodes``. ``config`` is not modified."""
    import copy

    import torch

    cfg = copy.deepcopy(config)
    if max_turns is not None:
        cfg.eval.max_turns = max_turns
        cfg.env = dict(cfg.env, max_steps=max_turns)
    if suite is None:
        cfg.env = eval_only_env(cfg.env, games_dir)
        suite = make_suite(cfg.env)
    elif games_dir is not None:
        cfg.env = dict(cfg.env, games_dir=str(games_dir))
    if tasks is None:
        tasks = balanced_tasks(suite.eval_tasks, cfg.eval.num_tasks or 0, sample_key)
    tasks = list(tasks)
    if not tasks:
        raise ValueError("env: the environment has no evaluation tasks (env.eval_split)")
    threads = torch.get_num_threads()
    if cfg.model.cpu_threads:
        torch.set_num_threads(cfg.model.cpu_threads)
    try:
        torch.manual_seed(cfg.seed if seed is None else seed)
        if isinstance(policy, (str, Path)):
            model, tokenizer = build_policy(cfg.model, weights_from=policy,
                                            weights_key=label or str(policy))
            model.to(resolve_device(cfg.model.device)).eval()
        else:
            model, tokenizer = policy
        try:
            result = evaluate(model, tokenizer, suite, tasks, cfg, pool=pool)
        except NonFiniteLogitsError as exc:     # finite weights, NaN/inf logits: no score
            if not isinstance(policy, (str, Path)):
                raise
            from ..runs.checkpoint import CheckpointError
            raise CheckpointError(f"{label or policy}: {str(exc).split(': ', 1)[-1]}; the checkpoint "
                                  f"is unusable (no result was written)") from None
    finally:
        torch.set_num_threads(threads)
    result["per_family_episodes"] = family_episodes(tasks, result)
    return result
