"""The gated study (issue 49; the declared reading: benchmarks/results/gated.md; the rules:
docs/estimators.md, "Gated credit"; numbers: benchmarks/corridor_map/gated.py).

    run     [--cell C ...] [--jobs 2] [--stop-at HH:MM] [--prepare]
            every unit not yet filed, cell by cell in the declared order (corridor_map/gated.py
            CELLS), at most --jobs processes at once (each `nice -n 19` unless --nice,
            OMP_NUM_THREADS=1): per cell, (1) its warm start filed where it is not (`map.py file-warm --build`:
            rebuilt here and filed only when its sha256 is the map's warm.json's; a cell whose
            start differs is skipped, its filed arms cannot be paired), (2) the two
            calibration runs of control (b) (seed 0), (3) per seed 0-4: gated, random_mask,
            grpo_step_matched at the cell's matched rate. Each unit is a `map.py unit`, filed
            in the map's cell folder at once; rerunning skips what is filed. --stop-at: start
            nothing after that time (UTC, today). --prepare: only (1) and (2), which
            judge nothing (they may run before the declared reading is committed).
    report  [--figures]   results/gated/report.md (and gains.png) from the filed results alone
    status                what is filed and what is left, per cell

--runs: run folders (default runs/map, ignored by git); --results: the map's filed cells
(default benchmarks/results/map).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (HERE, ROOT):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from corridor_map import gated as study  # noqa: E402
from corridor_map import grid  # noqa: E402

MAP = str(HERE / "map.py")


def _cells(args):
    return [grid.parse_cell(c) for c in args.cell] if args.cell else list(study.CELLS)


def warm_filed(results: Path, cell) -> bool:
    return (Path(results) / cell.name / "sft" / "model.safetensors").is_file()


def units(results: Path, cell, seeds=study.SEEDS) -> list[tuple]:
    """The cell's units left, in order: ("warm",) then (arm, seed); control (b) as
    ("matched", seed) until its rate is known."""
    out = [] if warm_filed(results, cell) else [("warm", None)]
    todo = [(a, study.CALIBRATION_SEED) for a in study.CALIBRATION]
    lr = study.matched_lr(results, cell)
    for k in seeds:
        todo += [(study.RULE, k), (study.CONTROL_A, k),
                 (study.matched_arm(lr) if lr is not None else "matched", k)]
    return out + [(a, k) for a, k in todo
                  if a == "matched" or not grid.is_done(grid.Unit(cell, a, k), results)]


def command(cell, arm, seed, runs, results, nice: int = 19) -> list[str]:
    # `nice -n` adds to this process's own niceness: the unit gets ``nice`` itself
    base = ["nice", "-n", str(max(0, nice - os.nice(0))), sys.executable, MAP]
    if arm == "warm":
        return base + ["file-warm", "--build", "--cell", cell.name, "--runs", str(runs),
                       "--results", str(results)]
    return base + ["unit", "--cell", cell.name, "--arms", arm, "--arm", arm, "--seed", str(seed),
                   "--runs", str(runs), "--results", str(results)]


def cmd_run(args) -> int:
    runs, results = Path(args.runs), Path(args.results)
    stop = None
    if args.stop_at:
        import datetime
        try:
            h, m = (int(x) for x in args.stop_at.split(":"))
            now = datetime.datetime.now(datetime.timezone.utc)
            stop = now.replace(hour=h, minute=m, second=0, microsecond=0).timestamp()
        except ValueError:
            raise ValueError(f"--stop-at: expected HH:MM (UTC), got {args.stop_at!r}") from None
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get(
                   "PYTHONPATH", "").split(os.pathsep) if p]))
    logs = runs / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    running: dict = {}          # (cell, arm, seed) -> Popen
    failed_cells, failed = set(), []
    cells = _cells(args)
    while True:
        for key, proc in list(running.items()):
            if proc.poll() is not None:
                del running[key]
                cell, arm, seed = key
                print(f"{time.strftime('%H:%M:%S')} {cell.name}/{arm}/{seed}: "
                      f"{'done' if proc.returncode == 0 else f'FAILED (exit {proc.returncode})'}",
                      flush=True)
                if proc.returncode != 0:
                    failed.append(key)
                    if arm == "warm":
                        failed_cells.add(cell)
        late = stop is not None and time.time() >= stop
        while not late and len(running) < args.jobs:
            nxt = None
            for cell in cells:
                if cell in failed_cells:
                    continue
                for arm, seed in units(results, cell):
                    key = (cell, arm, seed)
                    if key in running or key in failed or arm == "matched":
                        continue
                    if args.prepare and arm != "warm" and arm not in study.CALIBRATION:
                        continue
                    if arm != "warm" and not warm_filed(results, cell):
                        break
                    nxt = key
                    break
                if nxt:
                    break
            if nxt is None:
                break
            cell, arm, seed = nxt
            log = open(logs / f"gated-{cell.name}-{grid.arm_slug(arm) if arm != 'warm' else 'warm'}"
                              f"-{seed}.log", "a")
            print(f"{time.strftime('%H:%M:%S')} {cell.name}/{arm}/{seed}: started", flush=True)
            running[nxt] = subprocess.Popen(command(cell, arm, seed, runs, results, args.nice),
                                            stdout=log,
                                            stderr=subprocess.STDOUT, env=env)
        if not running:
            break
        time.sleep(3)
    left = sum(len(units(results, c)) for c in cells)
    print(f"{len(failed)} failed, {left} unit(s) left" + (" (stopped at --stop-at)" if stop and
                                                           time.time() >= stop else ""), flush=True)
    return 1 if failed else 0


def cmd_status(args) -> int:
    for cell in _cells(args):
        left = units(Path(args.results), cell)
        print(f"{cell.name:14s} warm start {'filed' if warm_filed(args.results, cell) else 'NOT filed'}"
              f", control (b) lr {study.matched_lr(Path(args.results), cell)}, {len(left)} unit(s) left")
    return 0


def cmd_report(args) -> int:
    from corridor_map.gated_report import write_report
    path = write_report(Path(args.results), Path(args.out), figures=args.figures)
    print(path.read_text())
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    for name in ("run", "status", "report"):
        q = sub.add_parser(name)
        q.add_argument("--cell", action="append", default=[], help="a cell (default: all declared)")
        q.add_argument("--runs", default=str(ROOT / "runs" / "map"))
        q.add_argument("--results", default=str(HERE / "results" / "map"))
        if name == "run":
            q.add_argument("--jobs", type=int, default=2)
            q.add_argument("--stop-at", default=None, help="HH:MM UTC: start nothing after it")
            q.add_argument("--nice", type=int, default=19,
                           help="nice level of each unit (default 19: the judged arms)")
            q.add_argument("--prepare", action="store_true",
                           help="only the warm starts and the calibration runs (no judged "
                                "arm: they may run before the reading is committed)")
        if name == "report":
            q.add_argument("--out", default=str(HERE / "results" / "gated"))
            q.add_argument("--figures", action="store_true")
    a = p.parse_args(argv)
    try:
        return {"run": cmd_run, "status": cmd_status, "report": cmd_report}[a.what](a)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
