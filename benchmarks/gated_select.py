"""Choosing theta and kappa of the gated rules once, before any judged run
(benchmarks/results/gated.md, "Choosing theta and kappa"; the rules: docs/estimators.md,
"Gated credit").

On the default corridor size (10 turns, 3 lamps) from a warm start that is no cell of the
map (the full start of SFT seed 2, ``t10-d3-full-sft2``), RL seeds 100, 101, 102 (never the
map's 0-9), 20 steps of the ``gated`` arm at theta = 0 with every step's batch saved
(``log.save_batches=1``). Then, offline, on every saved batch, each candidate value is
scored against the corridor's exact labels (what the oracle credits):

    theta: R1's keep against the oracle's credit, over the rows R1 gates (a teacher,
           A_i != 0): balanced accuracy (the mean of the kept share of credited rows and
           the dropped share of the others), pooled over the three runs' steps; the best
           of THETAS, ties to the smaller |theta|;
    kappa: with that theta, R2's keep against the oracle's credit over every row with
           A_i != 0 of a group with a teacher: balanced accuracy, the best of KAPPAS, ties
           to the value nearest 1.

    python benchmarks/gated_select.py run      [--seeds 100,101,102] [--jobs 2]
    python benchmarks/gated_select.py choose   (writes results/gated/select/choice.json)

--runs: run folders (default runs/gated, ignored by git); --results: where the warm start
and the choice are filed (default benchmarks/results/gated/select).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (HERE, ROOT):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from corridor_map import grid  # noqa: E402

CELL = grid.Cell(10, 3, "full", 2)
SEEDS = (100, 101, 102)
ARM = "gated@estimator.gate_theta=0"
THETAS = (-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
KAPPAS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def run_one(seed: int, runs: Path, results: Path) -> Path:
    """One selection run (the cell's trainer config, as map.py builds it, plus
    ``log.save_batches=1``) in RUNS/<cell>/runs/select-seed<k>; returns its folder."""
    from corridor_map.runner import build_warm, machine, write_json
    from sharpo_train.recipes import phases
    from sharpo_train.recipes.recipe_config import parse_methods
    plan, env, _log = build_warm(CELL, runs, SEEDS, (ARM,), results=results)
    out, s = plan.out, plan.settings
    [(_label, _slug, extra)] = parse_methods(ARM)
    run_dir = out / "runs" / f"select-seed{seed}"
    if (run_dir / "select.json").is_file():
        return run_dir
    tasks = out / env.tasks_path
    cfg = phases.train_config(tasks, out / "sft", s, plan.train_overrides, run_dir,
                              list(extra) + [f"seed={seed}", "log.save_batches=1",
                                             "eval.at_end=false"])
    start = time.time()
    phases.rl(cfg)
    write_json(run_dir / "select.json", {"seed": seed, "seconds": round(time.time() - start, 1),
                                         "machine": machine()})
    return run_dir


def row_table(run_dir: Path) -> list[dict]:
    """Per saved step of a run: A_i [B], D~ [B], has_teacher [B], oracle credit [B], group
    [B], turn [B] (tensors), from the saved batch and the corridor's exact labels."""
    import torch

    from sharpo_train.analysis.rescoring import load_batch
    from sharpo_train.envs.registry import get_spec
    from sharpo_train.estimators.gated import offset_free_gaps, row_gap_sums
    from sharpo_train.estimators.oracle import oracle_token_advantages
    from sharpo_train.estimators.registry import GroupParams
    from sharpo_train.step.batch import segment_kind_mask
    from sharpo_train.step.exact_labels import row_labels

    exact = get_spec("corridor").load("exact_labels")
    steps = []
    for path in sorted((run_dir / "batches").glob("step_*.json")):
        batch, _info = load_batch(path)
        if not len(batch):
            continue
        batch.credit_labels = exact(batch.episodes)
        base = batch.episode_advantages(GroupParams())[batch.traj_index]
        teacher = torch.where(batch.has_teacher[:, None], batch.teacher_logp, batch.old_logp)
        action = segment_kind_mask(batch, "action", "gated_select")
        gaps = offset_free_gaps(row_gap_sums(teacher, batch.old_logp, action), batch.traj_index)
        label = row_labels(batch, batch.credit_labels)
        credited = oracle_token_advantages(base, label, torch.ones(len(base), 1),
                                           batch.traj_index)[:, 0] != 0
        steps.append({"base": base, "gaps": gaps, "has_teacher": batch.has_teacher,
                      "credited": credited, "group": batch.group_of[batch.traj_index],
                      "turn": torch.as_tensor(batch.turn, dtype=torch.long)})
    return steps


def balanced_accuracy(keep, credited) -> float | None:
    """Mean of the kept share of credited rows and the dropped share of the others."""
    pos, neg = credited, ~credited
    if not bool(pos.any()) or not bool(neg.any()):
        return None
    return 0.5 * (float((keep & pos).sum()) / float(pos.sum())
                  + float((~keep & neg).sum()) / float(neg.sum()))


def choose(steps: list[dict]) -> dict:
    """theta and kappa by the rule of the module docstring, with every candidate's score."""
    import torch

    from sharpo_train.estimators.gated import gate_keep, pooled_keep
    cat = {k: torch.cat([s[k] for s in steps]) for k in ("base", "gaps", "has_teacher",
                                                         "credited")}
    gated = cat["has_teacher"] & (cat["base"] != 0)
    theta_scores = {}
    for th in THETAS:
        keep = gate_keep(cat["base"], cat["gaps"], cat["has_teacher"], th)
        theta_scores[th] = balanced_accuracy(keep[gated], cat["credited"][gated])
    theta = max((t for t in THETAS if theta_scores[t] is not None),
                key=lambda t: (round(theta_scores[t], 12), -abs(t)))
    kappa_scores = {}
    for ka in KAPPAS:
        keeps, creds = [], []
        for s in steps:
            keep, _dec = pooled_keep(s["base"], s["gaps"], s["has_teacher"], s["group"],
                                     s["turn"], theta, ka)
            taught_group = torch.isin(s["group"], s["group"][s["has_teacher"]])
            rows = taught_group & (s["base"] != 0)
            keeps.append(keep[rows])
            creds.append(s["credited"][rows])
        kappa_scores[ka] = balanced_accuracy(torch.cat(keeps), torch.cat(creds))
    kappa = max((k for k in KAPPAS if kappa_scores[k] is not None),
                key=lambda k: (round(kappa_scores[k], 12), -abs(k - 1)))
    r1_keep = gate_keep(cat["base"], cat["gaps"], cat["has_teacher"], theta)
    return {"theta": theta, "kappa": kappa,
            "theta_scores": {str(k): v for k, v in theta_scores.items()},
            "kappa_scores": {str(k): v for k, v in kappa_scores.items()},
            "rows_gated": int(gated.sum()), "rows": int(len(gated)),
            "steps": len(steps),
            "r1_kept_share_of_gated": float(r1_keep[gated].float().mean()),
            "oracle_credited_share_of_gated": float(cat["credited"][gated].float().mean())}


def cmd_run(args) -> int:
    seeds = grid.parse_seeds(args.seeds)
    runs, results = Path(args.runs), Path(args.results)
    if not (results / CELL.name / grid.WARM_FILE).is_file():
        raise ValueError(f"--results: no warm start of {CELL.name} filed in {results}; make it "
                         f"with `python benchmarks/map.py unit --cell {CELL.name} --runs {runs} "
                         f"--results {results}`")
    procs = []
    for k in seeds:
        while len([p for p in procs if p.poll() is None]) >= args.jobs:
            time.sleep(2)
        procs.append(subprocess.Popen(
            ["nice", "-n", "19", sys.executable, __file__, "one", "--seed", str(k),
             "--runs", str(runs), "--results", str(results)]))
    return max(p.wait() for p in procs)


def cmd_one(args) -> int:
    print(run_one(args.seed, Path(args.runs), Path(args.results)))
    return 0


def cmd_choose(args) -> int:
    runs, results = Path(args.runs), Path(args.results)
    steps = []
    for k in grid.parse_seeds(args.seeds):
        d = runs / CELL.name / "runs" / f"select-seed{k}"
        if not (d / "select.json").is_file():
            raise ValueError(f"--seeds: the selection run of seed {k} is not finished ({d})")
        steps += row_table(d)
    out = choose(steps)
    out.update(cell=CELL.name, seeds=grid.parse_seeds(args.seeds), arm=ARM)
    path = results / "choice.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps(out, indent=1))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    for name in ("run", "one", "choose"):
        q = sub.add_parser(name)
        q.add_argument("--seeds", default=",".join(map(str, SEEDS)))
        q.add_argument("--runs", default=str(ROOT / "runs" / "gated"))
        q.add_argument("--results", default=str(HERE / "results" / "gated" / "select"))
        if name == "run":
            q.add_argument("--jobs", type=int, default=2)
        if name == "one":
            q.add_argument("--seed", type=int, required=True)
    a = p.parse_args(argv)
    try:
        return {"run": cmd_run, "one": cmd_one, "choose": cmd_choose}[a.what](a)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
