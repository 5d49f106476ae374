"""The gated study's cells, arms and numbers (benchmarks/results/gated.md; the rules:
docs/estimators.md, "Gated credit"), from the map's filed results alone (stats.py).

Every cell's runs live in the map's folder of that cell (results/map/<cell>/), from its
filed warm start: the map's GRPO, SHARPO lambda 0.2 and oracle runs (seeds 0-4) and the
study's new arms beside them. Control (b)'s learning rate is set per cell from two
calibration runs of seed 0 at the recipe's rate, ``grpo@optim.lr=0.0005`` and
``oracle@optim.lr=0.0005`` (the same runs as the map's, now with ``update_norm`` logged):
lr_b = 5e-4 * (the oracle's mean update_norm per step) / (GRPO's), to 3 significant digits
(under AdamW a step is proportional to the learning rate for the same gradients).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .grid import Cell, arm_slug, parse_cell
from .stats import boot, load_runs, run_rows, step_means

# The declared cells, in the order they are run: the map's eight weak starts and
# t20-d3-full, cheapest first (an incomplete grid then has the most cells).
CELLS = tuple(parse_cell(c) for c in (
    "t10-d3-weak", "t10-d5-weak", "t15-d3-weak", "t15-d5-weak", "t20-d3-weak", "t20-d3-full",
    "t20-d5-weak", "t25-d3-weak", "t25-d5-weak"))
SEEDS = (0, 1, 2, 3, 4)
LR = 5e-4                                    # the corridor recipe's optim.lr
CALIBRATION = (f"grpo@optim.lr={LR:g}", f"oracle@optim.lr={LR:g}")
CALIBRATION_SEED = 0
RULE, CONTROL_A, MATCHED = "gated", "random_mask", "grpo_step_matched"
FILED = ("grpo", "sharpo:0.2", "oracle")    # the map's arms, reused where the start is filed

# per run, the mean over its steps of (metrics.jsonl keys)
DIAGNOSTICS = {"auc": "credit_quality/auc", "kept": "gated/kept_rows",
               "kept_oracle": "gated/kept_rows_oracle", "abs_adv": "adv/abs_mean",
               "update_norm": "update_norm", "coverage": "sharpo/teacher_coverage"}


def matched_arm(lr: float) -> str:
    return f"{MATCHED}@optim.lr={lr:.3g}"


def mean_update_norm(run_folder: Path):
    path = Path(run_folder) / "metrics.jsonl"
    return step_means(run_rows(path), {"u": "update_norm"}, str(path))["u"]


def calibration_norms(results: Path, cell: Cell) -> list:
    """[GRPO's, the oracle's] mean update_norm per step in the calibration runs (None where
    a run is not filed)."""
    folder = Path(results) / cell.name
    return [mean_update_norm(folder / f"{arm_slug(a)}-seed{CALIBRATION_SEED}")
            if (folder / f"{arm_slug(a)}-seed{CALIBRATION_SEED}" / "unit.json").is_file()
            else None for a in CALIBRATION]


def matched_lr(results: Path, cell: Cell):
    """Control (b)'s learning rate in ``cell`` (module docstring); None until both
    calibration runs are filed."""
    norms = calibration_norms(results, cell)
    if None in norms or not norms[0]:
        return None
    return float(f"{LR * norms[1] / norms[0]:.3g}")


def cell_arms(results: Path, cell: Cell) -> dict | None:
    """{role: arm} of the cell's judged arms (control b only once its rate is known)."""
    lr = matched_lr(results, cell)
    out = {"grpo": "grpo", "oracle": "oracle", "sharpo": "sharpo:0.2", "rule": RULE,
           "control_a": CONTROL_A}
    if lr is not None:
        out["control_b"] = matched_arm(lr)
    return out


def _runs(folder: Path, arm: str, seeds) -> dict:
    runs = load_runs(folder, arm, seeds)
    slug = arm_slug(arm)
    for k, r in runs.items():
        path = folder / f"{slug}-seed{k}" / "metrics.jsonl"
        r["diag"] = step_means(run_rows(path), DIAGNOSTICS, str(path))
    return runs


def paired(a: dict, b: dict) -> dict[int, float]:
    """{seed: held-out a - b} on the seeds both ran."""
    return {k: a[k]["held"] - b[k]["held"] for k in sorted(set(a) & set(b))}


def cell_numbers(results: Path, cell: Cell, seeds=SEEDS) -> dict | None:
    """The cell's arms (load_runs with DIAGNOSTICS), the differences by seed, and whether
    every judged arm has every seed; None without a filed warm start."""
    folder = Path(results) / cell.name
    if not (folder / "warm.json").is_file():
        return None
    warm = json.loads((folder / "warm.json").read_text())
    roles = cell_arms(results, cell)
    runs = {role: _runs(folder, arm, seeds) for role, arm in roles.items()}
    w = warm["eval"]["success"]
    arms = {}
    for role, r in runs.items():
        diag = {}
        for name in DIAGNOSTICS:
            xs = [x["diag"][name] for x in r.values() if x["diag"][name] is not None]
            diag[name] = float(np.mean(xs)) if xs else None
        held = [x["held"] for x in r.values()]
        secs = [x["seconds"] for x in r.values() if x["seconds"] is not None]
        arms[role] = {"arm": roles[role], "seeds": sorted(r),
                      "held": float(np.mean(held)) if held else None,
                      "collapses": sum(h < w for h in held), "diag": diag,
                      "seconds": float(np.mean(secs)) if secs else None}
    diffs = {"rule_vs_grpo": paired(runs["rule"], runs["grpo"]),
             "rule_vs_control_a": paired(runs["rule"], runs["control_a"]),
             "rule_vs_control_b": paired(runs["rule"], runs.get("control_b", {})),
             "oracle_vs_grpo": paired(runs["oracle"], runs["grpo"]),
             # reported beside the test, not part of it (added after the verdict)
             "control_a_vs_grpo": paired(runs["control_a"], runs["grpo"]),
             "control_b_vs_grpo": paired(runs.get("control_b", {}), runs["grpo"]),
             "oracle_vs_control_b": paired(runs["oracle"], runs.get("control_b", {}))}
    judged = ("grpo", "oracle", "rule", "control_a", "control_b")
    complete = all(role in runs and set(runs[role]) >= set(seeds) for role in judged)
    return {"cell": cell, "warm": warm, "arms": arms, "diffs": diffs, "complete": complete,
            "lr_b": matched_lr(results, cell), "norms": calibration_norms(results, cell)}


def pooled(cells: list[dict], key: str):
    """(mean, lo, hi) of the differences ``key`` pooled over the cells' paired seeds (95%
    bootstrap over the (cell, seed) pairs), and how many pairs; None without any."""
    xs = [d for c in cells for d in c["diffs"][key].values()]
    return (boot(np.array(xs)), len(xs)) if xs else None


def verdict(cells: list[dict], all_cells=CELLS) -> str:
    """The declared claim (results/gated.md): "holds" when every declared cell is complete
    and the pooled intervals of rule - GRPO, rule - control (a) and rule - control (b) all
    lie above 0; "does not hold" when complete and one does not; else "incomplete"."""
    declared = set(all_cells)
    done = {c["cell"] for c in cells if c["complete"]} & declared
    if not declared or done != declared:
        return f"incomplete ({len(done)}/{len(declared)} cells complete): no verdict"
    cells = [c for c in cells if c["cell"] in declared]
    ok = all(pooled(cells, k)[0][1] > 0 for k in ("rule_vs_grpo", "rule_vs_control_a",
                                                    "rule_vs_control_b"))
    return "holds" if ok else "does not hold"


def share_of_oracle(cells: list[dict]):
    """Pooled mean rule - GRPO over pooled mean oracle - GRPO, on the pairs both have."""
    a = [d for c in cells for k, d in c["diffs"]["rule_vs_grpo"].items()
         if k in c["diffs"]["oracle_vs_grpo"]]
    o = [d for c in cells for k, d in c["diffs"]["oracle_vs_grpo"].items()
         if k in c["diffs"]["rule_vs_grpo"]]
    if not a or not sum(o):
        return None
    r = boot(np.array(a), np.array(o))
    return r[3:]


__all__ = ["CELLS", "SEEDS", "CALIBRATION", "matched_lr", "matched_arm", "cell_arms",
           "cell_numbers", "pooled", "verdict", "share_of_oracle"]
