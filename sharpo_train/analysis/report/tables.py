"""Results tables in the layout of the paper's Tables 1-2: final success, mean and sample
standard deviation over runs (seeds), overall and per task family (ALFWorld) or product
category (WebShop: ``families=`` its categories; its mean task score is tabled through
``score_runs``), in percent."""
from __future__ import annotations

import math
import statistics
from typing import Optional

from ...envs.registry import DEFAULT_ENV, get_spec

FAMILIES = get_spec(DEFAULT_ENV).families    # default row order (the default env's)


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and *sample* standard deviation (n-1); std is NaN for a single value."""
    if not values:
        return math.nan, math.nan
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else math.nan
    return mean, std


def format_mean_std(mean: float, std: float, scale: float = 100.0) -> str:
    if math.isnan(mean):
        return "–"
    if math.isnan(std):
        return f"{mean * scale:.2f}"
    return f"{mean * scale:.2f} ± {std * scale:.2f}"


def aggregate_runs(results: dict[str, list[dict]],
                   families: list[str] = FAMILIES) -> dict[str, dict]:
    """results: method -> one eval dict per run ({"success", "per_family": {family: x},
    "episodes"}). Returns method -> {"n": runs, "overall": (mean, std),
    "per_family": {family: (mean, std)}} — a family is averaged over the runs that
    evaluated it."""
    table = {}
    for method, runs in results.items():
        per_family = {}
        for family in families:
            values = [r["per_family"][family] for r in runs
                      if r.get("per_family", {}).get(family) is not None]
            per_family[family] = mean_std(values)
        table[method] = {"n": len(runs),
                         "overall": mean_std([r["success"] for r in runs]),
                         "per_family": per_family}
    return table


def score_runs(results: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The runs' mean task scores in the shape aggregate_runs reads ({"success": score,
    "per_family": per_family_score}); runs without a score are left out."""
    return {method: [{"success": r["score"], "per_family": r.get("per_family_score", {}),
                      "episodes": r.get("episodes")} for r in runs if "score" in r]
            for method, runs in results.items()}


def results_markdown(table: dict[str, dict], families: list[str] = FAMILIES,
                     title_overall: str = "Table 1 layout: final success (%)",
                     title_family: str = "Table 2 layout: final success per task family (%)",
                     metric: Optional[str] = None, env: str = DEFAULT_ENV) -> str:
    """Two markdown tables: overall (Method | runs | <metric>) and per family; ``metric``
    defaults to "<label> success" of environment ``env`` (its EnvSpec)."""
    metric = metric or f"{get_spec(env).title} success"
    present = [f for f in families
               if any(not math.isnan(row["per_family"][f][0]) for row in table.values())]
    lines = [f"**{title_overall}** (mean ± sample std over runs)", "",
             f"| Method | runs | {metric} |", "|---|---:|---:|"]
    for method, row in table.items():
        lines.append(f"| {method} | {row['n']} | {format_mean_std(*row['overall'])} |")
    lines += ["", f"**{title_family}** (mean ± sample std over runs)", "",
              "| Method | " + " | ".join(present) + " | All |",
              "|---|" + "---:|" * (len(present) + 1)]
    for method, row in table.items():
        cells = [format_mean_std(*row["per_family"][f]) for f in present]
        lines.append(f"| {method} | " + " | ".join(cells)
                     + f" | {format_mean_std(*row['overall'])} |")
    return "\n".join(lines) + "\n"


def single_run_markdown(eval_result: dict, families: list[str] = FAMILIES,
                        label: str = "held-out games") -> str:
    """Success per family of one evaluation, with episode counts when recorded, and the
    mean task score (x100) when the evaluation has one (WebShop)."""
    counts = eval_result.get("per_family_episodes", {})
    scored = "score" in eval_result
    if scored:
        lines = [f"| {label} | success (%) | score | episodes |", "|---|---:|---:|---:|"]
    else:
        lines = [f"| {label} | success (%) | episodes |", "|---|---:|---:|"]
    for family in families:
        value = eval_result.get("per_family", {}).get(family)
        if value is None:
            continue
        score = (f" {eval_result.get('per_family_score', {}).get(family, 0) * 100:.1f} |"
                 if scored else "")
        lines.append(f"| {family} | {value * 100:.1f} |{score} {counts.get(family, '')} |")
    score = f" **{eval_result['score'] * 100:.1f}** |" if scored else ""
    lines.append(f"| **All** | **{eval_result['success'] * 100:.1f}** |{score} "
                 f"{eval_result.get('episodes', '')} |")
    return "\n".join(lines) + "\n"
