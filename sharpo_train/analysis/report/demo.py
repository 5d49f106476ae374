"""results.md of `sharpo demo`: success per family before and after RL, on the held-out
tasks (ALFWorld: generated games, and the real valid_seen sample; WebShop: test goals, with
the mean task score beside the success rate), the files written and the time per phase.
``log`` is the recipe's PhaseLog (sharpo_train/recipes/phases.py), ``s`` its DemoConfig."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ...io import atomic_write_text
from .curves import plot_learning_curves
from .environments import env_report
from .explain import explain_run
from .records import CreditRecordError, outcomes_sentence, training_outcomes
from .stats import paired_difference, wilson_interval


def write_demo_report(out: Path, log, s) -> dict:
    """RUN/results.md, RUN/learning_curve.png and (s.explain) RUN/credit_report.{html,png}."""
    rl_dir = out / "rl"
    sft_eval = log.result("eval_sft")
    method = (log.result("rl") or {}).get("method", "rl").upper()
    plot_learning_curves({method: [rl_dir]}, out / "learning_curve.png",
                         title=f"sharpo demo: {method} from the SFT warm start",
                         start_success=sft_eval["success"] if sft_eval else None)
    credit = None
    if s.explain:
        try:
            html_path, png_path = explain_run(rl_dir, out=out / "credit_report")
            credit = [html_path.name, png_path.name]
        except CreditRecordError as exc:
            credit = f"no credit report: {exc}"
    md = demo_results_markdown(log, s, method, credit, env_report(s).families,
                               outcomes_sentence(training_outcomes(rl_dir)))
    atomic_write_text(out / "results.md", md)
    return {"results": "results.md", "plot": "learning_curve.png", "credit": credit}


def demo_results_markdown(log, s, method: str, credit, families,
                          outcomes: str = "") -> str:
    env = env_report(s)

    def table(before: Optional[dict], after: Optional[dict], label: str) -> list[str]:
        # per column: success (%), and the mean task score (x100) where recorded
        runs = ([("warm start (SFT)", before)] if before else []) + [(f"after {method}", after)]
        cols = []
        for name, res in runs:
            cols.append((f"{name} success" if "score" in res else name, res, "success",
                         "per_family"))
            if "score" in res:
                cols.append((f"{name} score", res, "score", "per_family_score"))
        lines = [f"| {label} | episodes | " + " | ".join(c[0] for c in cols) + " |",
                 "|---|---:|" + "---:|" * len(cols)]
        counts = after.get("per_family_episodes", {})
        for fam in families:
            if fam not in after.get("per_family", {}):
                continue
            cells = [f"{res[per].get(fam, 0) * 100:.1f}" for _, res, _, per in cols]
            lines.append(f"| {fam} | {counts.get(fam, '')} | " + " | ".join(cells) + " |")
        cells = [f"**{res[key] * 100:.1f}**" for _, res, key, _ in cols]
        lines.append(f"| **All** | {after['episodes']} | " + " | ".join(cells) + " |")
        return lines

    secs = log.seconds()
    sft = log.result("sft") or {}
    after = log.result("eval_rl") or {}
    measure = (f"Success rate (%) of greedy episodes, one per {'goal' if env.scored else 'game'}, "
               f"per {env.label} {env.family_word}")
    if env.scored:
        measure += ("; score: the mean WebShop task score (its reward in [0, 1], x100), "
                    "success: the share of episodes with score 1 (the paper reports both)")
    lines = [f"# sharpo demo: results ({env.label})", "",
             f"Command: `{log.state.get('command', '')}`", "",
             f"{measure}. Warm start: {sft.get('steps', '?')} SFT steps on "
             f"{sft.get('examples', '?')} expert turns from {env.warm_data(s)}; then {method} "
             f"({(log.result('rl') or {}).get('steps', '?')} steps).", "",
             f"## {env.heldout(s, after.get('episodes', s.eval_games))}", ""]
    lines += table(log.result("eval_sft"), log.result("eval_rl"),
                   "category" if env.scored else "family")
    lines += ["", change_sentence(log.result("eval_sft"), after, method,
                                  "goals" if env.scored else "games")]
    if outcomes:
        lines += ["", outcomes]
    if log.result("eval_real_rl"):
        real = log.result("eval_real_rl")
        lines += ["", f"## {env.real_label} (a family-balanced sample of "
                  f"{real['episodes']} from {real['games']}; up to {env.real_turns(s)} turns)", ""]
        lines += table(log.result("eval_real_sft"), real, "family")
        lines += ["", change_sentence(log.result("eval_real_sft"), real, method, "games")]
    elif env.real_missing:
        lines += ["", env.real_missing]
    lines += ["", "## Files", "", "- learning curve: `learning_curve.png`",
              "- RL run (metrics.jsonl, credit records, checkpoints): `rl/`"]
    if isinstance(credit, list):
        lines.append(f"- credit report of one group: `{credit[0]}` (and `{credit[1]}`)")
    elif credit:
        lines.append(f"- {credit}")
    lines += ["", "## Time per phase (s)", "", "| phase | seconds |", "|---|---:|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in secs.items()]
    lines.append(f"| total | {sum(secs.values()):.0f} |")
    return "\n".join(lines) + "\n"


def change_sentence(before: Optional[dict], after: dict, method: str, unit: str) -> str:
    """The success rates with their 95% Wilson intervals and, when both evaluations recorded
    per-task outcomes (eval.json "per_task"), the paired difference on the same tasks: a
    change counts as beyond noise when its paired 95% interval excludes 0 (report/stats.py)."""

    def rate(res: dict) -> str:
        n = int(res.get("episodes", 0))
        k = round(res["success"] * n)
        lo, hi = wilson_interval(k, n)
        return f"{100 * res['success']:.1f}% ({k}/{n}; 95% Wilson {100 * lo:.1f}-{100 * hi:.1f})"

    if not after:
        return ""
    if not before:
        return f"After {method}: {rate(after)}."
    text = f"Success: warm start {rate(before)} -> after {method} {rate(after)}."
    if before.get("per_task") and after.get("per_task"):
        d = paired_difference(before["per_task"], after["per_task"])
        verdict = ("beyond noise: the paired interval excludes 0" if d.lo > 0 or d.hi < 0
                   else "within noise: the paired interval includes 0")
        text += f" Paired on the same {unit}: {d.describe(unit)}; {verdict}."
    return text
