"""Credit quality in `sharpo explain` (docs/credit_quality.md): the per-step credit AUC
that training logged (``log.credit_quality``, metrics.jsonl keys ``credit_quality/*``) as
an HTML section, and the offline table of every registered method scored on the run's
saved batches (``log.save_batches``; ``sharpo explain RUN --credit-quality``)."""
from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Optional, Sequence

from ..rescoring import results_table, saved_batches, score_run
from ...io import atomic_write_text
from ...runs.run_files import run_subdir
from .records import read_metrics


def _f(x, d: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def logged_credit_quality(run_dir) -> list[dict]:
    """The train rows of metrics.jsonl that carry a credit AUC (oldest first)."""
    try:
        train, _ = read_metrics(run_dir)
    except FileNotFoundError:
        return []
    return [r for r in train if "credit_quality/auc" in r]


def credit_quality_html(run_dir, step: Optional[int] = None) -> str:
    """An HTML section: the credit AUC of ``step`` (and of every logged step), or "" when
    the run did not log it."""
    rows = logged_credit_quality(run_dir)
    if not rows:
        return ""
    parts = ["<h2 id='credit-quality'>Credit quality (planner labels)</h2>",
             "<p class='note'>Within-rollout AUC of the method's token coefficient "
             "(advantage / A<sub>i</sub> on each action): on-plan actions of successful "
             "rollouts and off-plan actions of failed ones should get the larger one. "
             "GRPO = 0.5 by construction; interval: bootstrap over the step's groups "
             "(docs/credit_quality.md).</p>",
             "<table id='credit-quality-table'><tr><th>step</th><th>AUC</th><th>interval</th>"
             "<th>AUC success</th><th>AUC failure</th><th>pairs</th><th>on-plan</th></tr>"]
    for r in rows:
        mark = " style='font-weight:bold'" if step is not None and r.get("step") == step else ""
        parts.append(
            f"<tr{mark}><td>{html.escape(str(r.get('step')))}</td>"
            f"<td>{_f(r['credit_quality/auc'])}</td>"
            f"<td>[{_f(r.get('credit_quality/auc_lo'))}, {_f(r.get('credit_quality/auc_hi'))}]</td>"
            f"<td>{_f(r.get('credit_quality/auc_success'))}</td>"
            f"<td>{_f(r.get('credit_quality/auc_failure'))}</td>"
            f"<td>{r.get('credit_quality/pairs', 0)}</td>"
            f"<td>{_f(r.get('credit_quality/on_plan_frac'), 2)}</td></tr>")
    parts.append("</table>")
    return "\n".join(parts)


def credit_quality_line(run_dir) -> Optional[str]:
    """One line for the terminal: the pair-weighted AUC over the logged steps."""
    rows = [r for r in logged_credit_quality(run_dir)
            if r.get("credit_quality/pairs") and not math.isnan(r["credit_quality/auc"])]
    if not rows:
        return None
    pairs = sum(r["credit_quality/pairs"] for r in rows)
    auc = sum(r["credit_quality/auc"] * r["credit_quality/pairs"] for r in rows) / pairs
    return (f"credit AUC ({rows[0].get('method', '?')}): {auc:.3f} over {len(rows)} logged "
            f"step(s), {pairs} pairs (GRPO = 0.5)")


def write_credit_quality_report(run_dir, methods: Optional[Sequence[str]] = None,
                                out: Optional[str | Path] = None, *, n_boot: int = 1000
                                ) -> tuple[Path, str]:
    """Score every registered method (or ``methods``) on the run's saved batches and write
    the markdown table to RUN/report/credit_quality.md (or ``out``)."""
    run_dir = Path(run_dir)
    res = score_run(run_dir, methods, n_boot=n_boot)
    steps = [p.stem.split("_")[-1] for p in saved_batches(run_dir)]
    table = results_table(res)
    text = (f"# Credit quality of {run_dir}\n\nEvery method recomputed on the same saved "
            f"batches (steps {', '.join(s.lstrip('0') or '0' for s in steps)}); "
            f"docs/credit_quality.md.\n\n{table}\n")
    path = Path(out) if out else run_subdir(run_dir, "report") / "credit_quality.md"
    atomic_write_text(path, text)           # a link in its place is replaced, not followed
    return path, table
