"""Where SHARPO helps: the corridor map over horizon, decisive turns and warm-start strength
(benchmarks/results/map_summary.md; code: benchmarks/corridor_map/).

Every cell is one warm start (the corridor recipe v2 at that size; "weak": the same with
sft.epochs=0.7) shared by GRPO, SHARPO λ 0.2 and the oracle, RL seeds 0-4, 20 steps, 4
episodes per held-out task, the format guard on every arm: the runs of

    sharpo compare env=corridor env.num_turns=T env.num_decisive=D [sft.epochs=0.7] \\
        --run-dir RUN --seeds 0,1,2,3,4 --methods grpo,sharpo:0.2,oracle

(`python benchmarks/map.py command --cell ...` prints it). Subcommands:

    run     [--cell C ...] [--seeds 0,1,2,3,4] [--jobs 2] [--max-units N] [--warm-only]
            run what is not finished, in the declared order (or only the cells given),
            at most --jobs processes at once (each `nice -n 10`, OMP_NUM_THREADS=1); each
            finished unit is filed in --results at once. Rerunning skips what is filed.
    unit    --cell C [--arm A --seed K]     one unit in this process (what `run` starts)
    report  [--figures]                     the table (RESULTS/map.md) and figures from
                                            the files in --results alone
    status                                  what is filed and what is left
    file-warm --cell C [--build]            file the cell's warm-start weights (RUNS/<cell>/sft,
                                            built here; --build: build it first where it is
                                            missing) beside its filed warm.json, only where
                                            their sha256 is warm.json's
    sft-data                                the SFT data of every size, without training
                                            (RESULTS/sft_data.md: lengths, lamp shares)
    command --cell C                        the cell's `sharpo compare` command

--cell: turns=20,decisive=5,start=weak[,sft_seed=1] or t20-d5-weak[-sft1].
--arms: the arms to run (run, unit, status; default grpo,sharpo:0.2,oracle): any
        `sharpo compare --methods` entries, e.g. gated,random_mask (the gated study,
        benchmarks/results/gated.md), each filed in the cell's folder beside the map's.
The warm start: where RESULTS/<cell>/sft holds the filed weights (warm.json's sha256) and
RUNS/<cell> has none, an RL run starts from them (no SFT), on any processor; unit.json
records the machine and whether the start was filed or built.
--runs: the run folders (default runs/map at the repository root, ignored by git:
        weights and checkpoints, gigabytes; set it to another disk if you like);
--results: the filed results (default benchmarks/results/map, in the repository); report
        and status read it and refuse one that does not exist (a typo makes no folder).
A refusal (a bad option or file, a unit whose warm start is not the filed one) is one
line on stderr, exit 2.
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
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from corridor_map import grid  # noqa: E402


def _cells(args) -> list:
    return [grid.parse_cell(c) for c in args.cell] if args.cell else grid.declared_order()


def cmd_run(args) -> int:
    from corridor_map.runner import is_locked, lock_path
    seeds, results, runs = grid.parse_seeds(args.seeds), Path(args.results), Path(args.runs)
    if args.jobs < 1:
        raise ValueError(f"--jobs: expected an integer >= 1, got {args.jobs}")
    arms = grid.parse_arms(args.arms)
    todo = grid.pending(_cells(args), results, seeds, arms)
    if args.warm_only:
        todo = [u for u in todo if u.is_warm]
    if args.max_units is not None:
        todo = todo[:args.max_units]
    print(f"{len(todo)} unit(s) to run, {args.jobs} at a time", flush=True)
    running: dict = {}          # unit -> Popen
    failed = []
    logs = runs / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in
                                          os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    while todo or running:
        for unit, proc in list(running.items()):
            if proc.poll() is not None:
                del running[unit]
                ok = proc.returncode == 0 and grid.is_done(unit, results)
                print(f"{time.strftime('%H:%M:%S')} {unit.label}: "
                      f"{'done' if ok else f'FAILED (exit {proc.returncode})'}", flush=True)
                if not ok:
                    failed.append(unit)
                    # an RL run cannot start without its cell's warm start
                    if unit.is_warm:
                        todo = [u for u in todo if u.cell != unit.cell]
        # units another process runs (a second `map.py run`, a `unit`) take their slot
        elsewhere = [u for u in todo if is_locked(lock_path(u, runs))]
        while len(running) + len(elsewhere) < args.jobs:
            unit = grid.ready(todo, results, list(running) + elsewhere)
            if unit is None:
                break
            todo.remove(unit)
            cmd = ["nice", "-n", str(args.nice), sys.executable, str(Path(__file__).resolve()),
                   "unit", "--cell", unit.cell.spec, "--seeds", args.seeds,
                   "--runs", str(runs), "--results", str(results), "--arms", args.arms]
            if not unit.is_warm:
                cmd += ["--arm", unit.arm, "--seed", str(unit.seed)]
            if args.quick:
                cmd.append("--quick")
            log = open(logs / (unit.label.replace("/", "__") + ".log"), "a")
            print(f"{time.strftime('%H:%M:%S')} {unit.label}: started", flush=True)
            running[unit] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        if not running and todo and not elsewhere:   # nothing can start: only units of
            break                                    # failed cells left
        todo = [u for u in todo if not grid.is_done(u, results)]   # filed elsewhere
        time.sleep(2)
    print(f"{len(failed)} failed: {', '.join(u.label for u in failed)}" if failed else "all done",
          flush=True)
    return 1 if failed else 0


def cmd_unit(args) -> int:
    from corridor_map.runner import run_unit
    cell = grid.parse_cell(args.cell[0] if isinstance(args.cell, list) else args.cell)
    if (args.arm is None) != (args.seed is None):
        raise ValueError("--arm and --seed: give both (an RL run) or neither (the warm start)")
    arms = grid.parse_arms(args.arms)
    if args.arm is not None and args.arm not in arms:
        raise ValueError(f"--arm: expected one of --arms ({', '.join(arms)}), got {args.arm!r}")
    unit = grid.Unit(cell, args.arm, args.seed)
    run_unit(unit, Path(args.runs), Path(args.results), grid.parse_seeds(args.seeds), arms,
             quick=args.quick)
    return 0


def filed_results(args) -> Path:
    """--results as a folder to read (report, status): an existing folder, else one line
    (a typo must not make a folder and report "0 of 16")."""
    from _inputs import input_dir
    return input_dir(args.results, "the folder of filed results (--results)")


def cmd_status(args) -> int:
    results = filed_results(args)
    for cell in _cells(args):
        units = grid.cell_units(cell, grid.parse_seeds(args.seeds), grid.parse_arms(args.arms))
        done = [u for u in units if grid.is_done(u, results)]
        print(f"{cell.name:16s} {len(done):2d}/{len(units)} units filed"
              + ("" if grid.is_done(units[0], results) else " (no warm start)"))
    return 0


def cmd_file_warm(args) -> int:
    """File RUNS/<cell>/sft's weights beside the cell's filed warm.json (RESULTS/<cell>/sft/)
    where their sha256 is the filed one; a cell whose rebuilt start differs is refused, naming
    both machines (its filed runs cannot be paired with a new one)."""
    from corridor_map.runner import build_warm, file_warm_weights, machine, sha256, warm_record
    bad = 0
    for cell in _cells(args):
        warm = warm_record(cell, Path(args.results))
        sft = Path(args.runs) / cell.name / "sft"
        if args.build and warm is not None and not sft.exists():
            build_warm(cell, Path(args.runs), grid.SEEDS, grid.ARMS)    # the SFT, here
        if warm is None or not (sft / "model.safetensors").is_file():
            print(f"{cell.name}: " + ("no filed warm.json" if warm is None
                                     else f"no warm start built in {sft}"))
            bad += 1
            continue
        got = sha256(sft / "model.safetensors")
        if got != warm["weights_sha256"]:
            there = warm.get("machine") or {}
            print(f"{cell.name}: the start built here (sha256 {got[:12]}, {machine()['cpu']}) is "
                  f"not the filed one ({warm['weights_sha256'][:12]}, "
                  f"{there.get('cpu', 'an unrecorded machine')}); not filed")
            bad += 1
            continue
        names = file_warm_weights(sft, Path(args.results) / cell.name)
        print(f"{cell.name}: filed {', '.join(names)} (sha256 {got[:12]} = warm.json's)")
    return 1 if bad else 0


def cmd_command(args) -> int:
    for cell in _cells(args):
        print(cell.compare_command(f"{args.runs}/{cell.name}", grid.parse_seeds(args.seeds)))
    return 0


def cmd_sft_data(args) -> int:
    """The SFT data of every size of the grid (or of the cells given), without training:
    the longest example against sft.max_length, the lamp turns' share of the trained
    tokens, the demonstrations' own right-door rate (RESULTS/sft_data.md)."""
    import tempfile

    from corridor_map.runner import sft_data
    cells = _cells(args)
    sizes = sorted({(c.turns, c.decisive) for c in cells})
    lines = ["# The SFT data of each size of the map (the same for a weak and a full start)", "",
             "Made by `python benchmarks/map.py sft-data` (no SFT run): the recipe's "
             "demonstrations and the SFT examples built from them (plain turns and a hinted "
             "copy of every lamp turn).", "",
             "| turns | lamps | examples | SFT steps in one pass | longest example (tokens) | "
             "sft.max_length | examples cut | lamp share of trained tokens, plain / all (%) | "
             "lamp share of all tokens (%) | demos' right door at a lamp (%) |",
             "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        for t, d in sizes:
            x = sft_data(grid.Cell(t, d, "full"), Path(tmp))
            lines.append(f"| {t} | {d} | {x['examples']} | {-(-x['examples'] // 16)} | "
                         f"{x['longest']} | {x['max_length']} | {x['over_max_length']} | "
                         f"{100 * x['plain_lamp_target_share']:.1f} / "
                         f"{100 * x['lamp_target_share']:.1f} | {100 * x['lamp_token_share']:.1f} "
                         f"| {100 * x['demo_right_door']:.1f} |")
            print(lines[-1], flush=True)
    path = Path(args.results) / "sft_data.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(f"written: {path}")
    return 0


def cmd_report(args) -> int:
    from corridor_map.report import write_report
    path = write_report(filed_results(args), figures=args.figures, seeds=grid.parse_seeds(args.seeds))
    print(path.read_text())
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    for name in ("run", "unit", "status", "command", "report", "sft-data", "file-warm"):
        q = sub.add_parser(name)
        q.add_argument("--cell", action="append", default=[],
                       help="a cell, turns=T,decisive=D,start=weak|full[,sft_seed=S] or "
                            "tT-dD-weak|full[-sftS] (repeatable; default: every grid cell)")
        q.add_argument("--seeds", default=",".join(map(str, grid.SEEDS)),
                       help="RL seeds, comma-separated (default %(default)s; 5,6,7,8,9: the "
                            "fresh-seed check)")
        q.add_argument("--runs", default=str(ROOT / "runs" / "map"),
                       help="run folders: warm starts' weights and RL checkpoints "
                            "(default %(default)s, ignored by git)")
        q.add_argument("--results", default=str(HERE / "results" / "map"),
                       help="where finished units are filed, and read back by report "
                            "(default %(default)s)")
        if name in ("run", "unit", "status"):
            q.add_argument("--arms", default=",".join(grid.ARMS),
                           help="the arms, `sharpo compare --methods` entries "
                                "(default %(default)s)")
        if name == "run":
            q.add_argument("--jobs", type=int, default=2,
                           help="processes at once, each OMP_NUM_THREADS=1 (default 2)")
            q.add_argument("--nice", type=int, default=10,
                           help="nice level of each process (default 10)")
            q.add_argument("--max-units", type=int, default=None,
                           help="run only the first N units left, in the declared order "
                                "(default: all)")
            q.add_argument("--warm-only", action="store_true",
                           help="make and file the cells' warm starts only")
        if name in ("run", "unit"):
            q.add_argument("--quick", action="store_true",
                           help="the compare's --quick sizes: a smoke test of the machinery")
        if name == "unit":
            q.add_argument("--arm", default=None,
                           help="grpo, sharpo:0.2 or oracle (with --seed; neither: the warm "
                                "start)")
            q.add_argument("--seed", type=int, default=None, help="the RL seed of --arm")
        if name == "file-warm":
            q.add_argument("--build", action="store_true",
                           help="first build the warm start in --runs where it is missing "
                                "(the recipe's SFT, as the cell's first run would)")
        if name == "report":
            q.add_argument("--figures", action="store_true",
                           help="also draw map_heat.png and map_share.png")
    a = p.parse_args(argv)
    try:
        if a.what == "unit" and len(a.cell) != 1:
            raise ValueError("--cell: `unit` takes exactly one cell")
        return {"run": cmd_run, "unit": cmd_unit, "status": cmd_status,
                "command": cmd_command, "report": cmd_report, "sft-data": cmd_sft_data,
                "file-warm": cmd_file_warm}[a.what](a)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
