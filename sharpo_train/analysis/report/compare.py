"""compare.md and compare_curves.png of `sharpo compare`: final success, mean ± sample std
over seeds per method, overall and per family (the layout of the paper's Tables 1-2; WebShop:
per product category, and the same tables for the mean task score), the training outcomes,
and the time per phase. ``log`` is the recipe's PhaseLog
(sharpo_train/recipes/phases.py) whose phases are named rl/<slug>/seed<k> and
eval_real/<slug>/seed<k>; ``methods`` are (label, slug, overrides) triples."""
from __future__ import annotations

import json
from pathlib import Path

from ...io import atomic_write_text
from .compare_training import training_lines
from .curves import plot_learning_curves
from .environments import env_report
from .records import mixed_groups_cell, training_outcomes
from .stats import paired_difference
from .tables import aggregate_runs, results_markdown, score_runs, single_run_markdown


def collect(log, methods, seeds, prefix):
    results, done = {}, {}
    for label, slug, _ in methods:
        runs = [log.result(f"{prefix}/{slug}/seed{k}") for k in seeds]
        results[label] = [r for r in runs if r]
        done[label] = [k for k, r in zip(seeds, runs) if r]
    return results, done


def write_compare_report(out: Path, log, methods, seeds, s) -> None:

    env = env_report(s)
    fams = env.families
    held, done = collect(log, methods, seeds, "rl")
    real, real_done = collect(log, methods, seeds, "eval_real")
    warm = log.result("eval/warm-start")
    run_dirs = {label: [out / "runs" / f"{slug}-seed{k}" for k in done[label]]
                for label, slug, _ in methods}
    if any(run_dirs.values()):
        plot_learning_curves({k: v for k, v in run_dirs.items() if v}, out / "compare_curves.png",
                             title="GRPO vs SHARPO from one warm start (mean over seeds, min-max shaded)",
                             start_success=warm["success"] if warm else None)
    secs = log.seconds()
    sft = log.result("sft") or {}
    first = warm or next((r for v in held.values() for r in v), {})
    per_task = int(first.get("episodes_per_task", 1))
    n_held = first.get("episodes", s.eval_games * per_task) // per_task
    lines = [f"# GRPO vs SHARPO on {env.label} (CPU scale)", "",
             f"Command: `{log.state.get('command', '')}`", "",
             f"Seeds: {seeds}. Runs finished per method: "
             + ", ".join(f"{label}: {len(done[label])}/{len(seeds)}" for label in done) + ".",
             "",
             f"Shared warm start: {sft.get('steps', '?')} SFT steps on {sft.get('examples', '?')} "
             f"{env.demo_word} turns from {env.warm_data(s)}"
             + env.tasks_note(s)
             + ". Every run starts from it, with the same trainer settings "
             "except the method; seed k gives every method the same task sequence.", "",
             f"## {env.heldout(s, n_held)}; {env.decoding}, "
             + (f"{per_task} episodes per " if per_task > 1 else "one episode per ")
             + f"{'goal' if env.scored else env.task_word}"
             + (" (a task's score: its success rate over them)" if per_task > 1 else ""), ""]
    if warm:
        lines += ["Warm start before RL: ", "",
                  single_run_markdown(warm, fams, label="warm start"), ""]
    lines.append(results_markdown(aggregate_runs(held, fams), fams,
                                  title_family=f"Table 2 layout: final success per "
                                               f"{env.family_word} (%)",
                                  metric=f"{env.label} success"))
    lines += paired_lines(warm, held, "goals" if env.scored else "games")
    scores = score_runs(held)
    if any(scores.values()):
        lines += ["", "WebShop task score (its reward in [0, 1], x100; success = score 1):", "",
                  results_markdown(aggregate_runs(scores, fams), fams,
                                   title_overall="final mean task score",
                                   title_family=f"final mean task score per {env.family_word}",
                                   metric=f"{env.label} score")]
    lines += ["", "Training rollouts (all seeds): what the RL updates had to learn from — "
              "successes / episodes, and groups with mixed outcomes (the only ones with a "
              "non-zero advantage) / groups recorded:", "",
              "| Method | successes / episodes | mixed groups / groups |", "|---|---:|---:|"]
    for label, dirs in run_dirs.items():
        outs = [training_outcomes(d) for d in dirs]
        lines.append(f"| {label} | {sum(o['successes'] for o in outs)} / "
                     f"{sum(o['episodes'] for o in outs)} | "
                     + mixed_groups_cell(sum(o['mixed_groups'] for o in outs),
                                         sum(o['groups_recorded'] for o in outs)) + " |")
    if any(real.values()):
        some = next(r for v in real.values() for r in v)
        lines += ["", f"## {env.real_label} (the same family-balanced sample of "
                  f"{some['episodes']} games for every run, from {some['games']}; "
                  f"up to {env.real_turns(s)} turns)", ""]
        warm_real = log.result("eval_real/warm-start")
        if warm_real:
            lines += ["Warm start before RL: ", "",
                      single_run_markdown(warm_real, fams, label="warm start"), ""]
        lines.append(results_markdown(aggregate_runs(real, fams), fams))
    lines += training_lines(out, methods, seeds, done, log.seconds())
    lines += ["", "Learning curves: `compare_curves.png`.", "",
              "## Time per phase (s)", "", "| phase | seconds |", "|---|---:|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in secs.items()]
    lines.append(f"| total | {sum(secs.values()):.0f} |")
    per_run = {label: [r["success"] for r in runs] for label, runs in held.items()}
    lines += ["", "Per-run held-out success: `" + json.dumps(per_run) + "`"]
    if any(scores.values()):
        per_run = {label: [r["success"] for r in runs] for label, runs in scores.items()}
        lines += ["", "Per-run held-out task score: `" + json.dumps(per_run) + "`"]
    atomic_write_text(out / "compare.md", "\n".join(lines) + "\n")


def per_task_mean(runs: list[dict]) -> dict[str, float]:
    """{task id: success averaged over the runs (seeds) that played it}, from eval.json
    "per_task"; {} when a run did not record it."""
    if not runs or not all(r.get("per_task") for r in runs):
        return {}
    ids = set.intersection(*(set(r["per_task"]) for r in runs))
    return {i: sum(r["per_task"][i] for r in runs) / len(runs) for i in sorted(ids)}


def paired_lines(warm, held: dict[str, list[dict]], unit: str) -> list[str]:
    """Each method against the warm start and against the first method, paired on the same
    held-out tasks: per task, the success averaged over the method's seeds
    (report/stats.py paired_difference; a 95% interval that excludes 0 is beyond noise)."""
    means = {label: per_task_mean(runs) for label, runs in held.items()}
    means = {label: m for label, m in means.items() if m}
    if not means:
        return []
    first = next(iter(means))
    lines = ["", f"Paired on the same held-out {unit} (per {unit[:-1]}: success averaged over "
             "the seeds run; 95% bootstrap over them, sign test on those that moved):", "",
             "| Method | vs warm start | vs " + first + " |", "|---|---|---|"]
    warm_tasks = (warm or {}).get("per_task")
    for label, m in means.items():
        vs_warm = paired_difference(warm_tasks, m).describe(unit) if warm_tasks else "-"
        vs_first = paired_difference(means[first], m).describe(unit) if label != first else "-"
        lines.append(f"| {label} | {vs_warm} | {vs_first} |")
    return lines
