"""`sharpo compare`: GRPO and SHARPO side by side from one warm start.

One set of tasks (those of the environment ``demo.env``: its RecipeSpec), one set of expert demonstrations and one SFT warm start are shared by
every run (the demo's first phases); each method then trains from the warm start with each
seed (the same seed gives every method the same task sequence), and every final policy is
evaluated on the same held-out tasks. Output: compare.md, compare_curves.png and
runs/<method>-seed<k>/ (each a full run directory). Rerunning resumes.
"""
from __future__ import annotations

from pathlib import Path

from ..analysis.report.compare import write_compare_report
from . import phases
from .demo import open_pipeline
from .overrides import PipelinePlan


def compare_runs(methods, seeds) -> list[tuple[str, int, str, list[str]]]:
    """(slug, seed, run folder under the compare directory, trainer overrides) of each RL
    run: runs/<slug>-seed<k>, seed by seed, method by method."""
    return [(slug, seed, f"runs/{slug}-seed{seed}", list(extra) + [f"seed={seed}"])
            for seed in seeds for _label, slug, extra in methods]


def run_compare(plan: PipelinePlan, methods, seeds, echo=print) -> Path:
    out, s = plan.out, plan.settings
    env, log = open_pipeline(plan, echo)
    log.set("env", s.env)
    log.set("methods", [m[0] for m in methods])
    log.set("seeds", seeds)
    tasks, demos, sft_dir = out / env.tasks_path, out / "demos.jsonl", out / "sft"

    def cfg_for(run_dir, extra=()):
        return phases.train_config(tasks, sft_dir, s, plan.train_overrides, run_dir, list(extra))

    probe = cfg_for(out / "runs" / "probe")
    log.run(env.tasks_phase, lambda: env.prepare(tasks, s, probe), echo)
    log.run("demos", lambda: env.demos(tasks, demos, s, probe), echo)
    log.run("sft", lambda: phases.sft(demos, sft_dir, plan.sft), echo)
    held = env.heldout(tasks, s, probe)
    real_root, real = env.real_eval(s)
    warm_cfg = cfg_for(out / "runs" / "sft")
    log.run("eval/warm-start", lambda: phases.evaluate(sft_dir, warm_cfg, held,
                                                       env.eval_dir(tasks)), echo)
    if real:
        log.run("eval_real/warm-start", lambda: phases.evaluate(
            sft_dir, warm_cfg, real, real_root, env.real_turns(s)), echo)
    for slug, seed, folder, extra in compare_runs(methods, seeds):
        run_dir = out / folder

        def rl(run_dir=run_dir, extra=extra):
            phases.rl(cfg_for(run_dir, extra))
            return phases.final_eval(run_dir, held)

        log.run(f"rl/{slug}/seed{seed}", rl, echo)
        if real:
            log.run(f"eval_real/{slug}/seed{seed}", lambda run_dir=run_dir: phases.evaluate(
                phases.latest_policy(run_dir), cfg_for(run_dir), real, real_root,
                env.real_turns(s)), echo)
        write_compare_report(out, log, methods, seeds, s)   # partial results stay readable
    echo(f"\nresults: {out / 'compare.md'}\nrun directory: {out}")
    return out
