"""`sharpo demo`: the headline use case end to end, composed from the phases:

    tasks (the environment's training and held-out tasks) -> expert demonstrations
    -> SFT warm start -> [eval of the warm start] -> RL from the warm start (SHARPO by
    default) -> evaluation on the held-out tasks (plus the environment's real-game sample,
    if it has one: RecipeSpec.real_eval) -> results table per family, learning-curve PNG,
    credit report HTML.

The environment is ``demo.env`` (any registered environment with a recipe:
envs/registry.py); what differs between them is its RecipeSpec (``phases.env_recipe``).
Rerunning with the same output directory skips finished phases
(RUN/pipeline.json) and resumes the RL run from its last checkpoint.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ..analysis.report.demo import write_demo_report
from ..runs.run_dir import check_pipeline_dir
from . import phases
from .overrides import PipelinePlan


def open_pipeline(plan: PipelinePlan, echo=print):
    """Start (or resume) a pipeline in plan.out, shared by `sharpo demo` and `sharpo compare`:
    the folder, the environment's setup, and the phase log (RUN/pipeline.json) with the
    command recorded. Returns (the env's recipe, the PhaseLog)."""
    out = plan.out
    env = phases.env_recipe(plan.settings.env)
    check_pipeline_dir(out)       # no system or foreign folder (runs/run_dir.py); creates nothing
    echo(f"run directory: {out}")
    out.mkdir(parents=True, exist_ok=True)
    log = phases.PhaseLog(out)
    log.set("command", plan.command)       # pipeline.json first: it marks the folder
    phases.quiet_transformers()
    env.setup(out)
    return env, log


def run_demo(plan: PipelinePlan, echo=print) -> Path:
    out, s = plan.out, plan.settings
    env, log = open_pipeline(plan, echo)
    log.set("settings", asdict(s))
    log.set("sft_config", asdict(plan.sft))
    log.set("train_overrides", plan.train_overrides)
    tasks, demos, sft_dir, rl_dir = out / env.tasks_path, out / "demos.jsonl", out / "sft", out / "rl"

    def cfg(extra=()):
        return phases.train_config(tasks, sft_dir, s, plan.train_overrides, rl_dir, list(extra))

    log.run(env.tasks_phase, lambda: env.prepare(tasks, s, cfg()), echo)
    log.run("demos", lambda: env.demos(tasks, demos, s, cfg()), echo)
    log.run("sft", lambda: phases.sft(demos, sft_dir, plan.sft), echo)
    held = env.heldout(tasks, s, cfg())
    if s.eval_sft:
        log.run("eval_sft", lambda: phases.evaluate(sft_dir, cfg(), held, env.eval_dir(tasks)),
                echo)
    log.run("rl", lambda: phases.rl(cfg()), echo)
    log.run("eval_rl", lambda: phases.final_eval(rl_dir, held), echo)
    real_root, real = env.real_eval(s)
    if real:
        if s.eval_sft:
            log.run("eval_real_sft", lambda: phases.evaluate(
                sft_dir, cfg(), real, real_root, env.real_turns(s)), echo)
        log.run("eval_real_rl", lambda: phases.evaluate(
            phases.latest_policy(rl_dir), cfg(), real, real_root, env.real_turns(s)), echo)
    log.run("report", lambda: write_demo_report(out, log, s), echo)
    echo(f"\nresults: {out / 'results.md'}\nrun directory: {out}")
    return out
