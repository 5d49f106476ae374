"""Measures the ALFWorld environment on this machine: reset time, environment steps per
second through the worker pool with 1 and 2 workers, generator games per minute, worker
memory. A measuring script (no assertions); writes a markdown table.

    .venv/bin/python benchmarks/bench_alfworld.py [--real DIR] [--out benchmarks/results/alfworld.md]

--real defaults to ../shared/data/alfworld (skipped when absent). Steps are taken by a
seeded random agent over admissible commands (the cost of a step does not depend on who
chooses it; the grammar derivation of every admissible command dominates).
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inputs import Parser, guarded, positive_int  # noqa: E402
HEADING = "# ALFWorld environment: measurements"


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def bench_reset(tasks, label: str, rows: list) -> None:
    from sharpo_train.envs.alfworld.engine import AlfWorldEnv
    cold, warm = [], []
    for t in tasks:
        env = AlfWorldEnv()
        t0 = time.perf_counter()
        env.reset(t)
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        env.reset(t)
        warm.append(time.perf_counter() - t0)
        env.close()
    rows.append((f"reset, {label}: first load+reset (in-process, median of {len(tasks)})",
                 f"{1000 * statistics.median(cold):.0f} ms"))
    rows.append((f"reset, {label}: same game again (SAS cache)", f"{1000 * statistics.median(warm):.0f} ms"))
    env = AlfWorldEnv(expert="planner")
    t0 = time.perf_counter()
    for t in tasks[:3]:
        env.reset(t)
    rows.append((f"reset with planner expert, {label} (mean of {len(tasks[:3])})",
                 f"{1000 * (time.perf_counter() - t0) / len(tasks[:3]):.0f} ms"))
    env.close()


def bench_single_env(tasks, label: str, steps: int, rows: list) -> None:
    """In-process ms per step with textworld as shipped vs with the engine stand-ins."""
    import random
    from sharpo_train.envs.alfworld.engine import AlfWorldEnv, set_engine_caches
    for enabled in (False, True):
        set_engine_caches(enabled)
        rng = random.Random(0)
        total, n = 0.0, 0
        for t in tasks:
            env = AlfWorldEnv(max_steps=steps + 1)
            obs = env.reset(t)
            for _ in range(steps):
                a = rng.choice(obs.admissible_actions)
                t0 = time.perf_counter()
                r = env.step(a)
                total += time.perf_counter() - t0
                n += 1
                obs = r.observation
                if r.done:
                    break
            env.close()
        what = "engine stand-ins on" if enabled else "textworld as shipped (stand-ins off)"
        rows.append((f"one env in-process, {label}, {what}",
                     f"{1000 * total / n:.1f} ms/step ({n} steps)"))
    set_engine_caches(True)


def bench_pool(tasks, label: str, workers: int, steps: int, rows: list) -> None:
    from sharpo_train.envs.alfworld import make_pool
    import random
    pool = make_pool(workers, max_steps=steps + 1)
    rng = random.Random(0)
    try:
        pool.reset(tasks)               # starts the workers (not timed)
        t0 = time.perf_counter()
        res = pool.reset(tasks)
        t_reset = time.perf_counter() - t0
        n = 0
        t0 = time.perf_counter()
        for _ in range(steps):
            acts = {i: rng.choice(r.observation.admissible_actions)
                    for i, r in enumerate(res) if not r.done and r.observation.admissible_actions}
            if not acts:
                break
            out = pool.step(acts)
            for i, r in out.items():
                res[i] = r
            n += len(acts)
        dt = time.perf_counter() - t0
        rss = [_rss_mb(p) for p in pool.worker_pids() if p] if workers else [_rss_mb(os.getpid())]
    finally:
        pool.close()
    rows.append((f"steps/s, {label}, {workers} worker(s), batch {len(tasks)}",
                 f"{n / dt:.1f} steps/s ({1000 * dt / n:.0f} ms/step; {n} steps)"))
    rows.append((f"batch reset, {label}, {workers} worker(s), batch {len(tasks)} (games cached)",
                 f"{t_reset:.2f} s"))
    rows.append((f"worker RSS, {label}, {workers} worker(s)", ", ".join(f"{r:.0f} MB" for r in rss)))


def bench_generator(out: Path, n: int, workers: int, size: str, rows: list) -> list:
    from sharpo_train.envs.alfworld.generator import generate_games
    t0 = time.perf_counter()
    games = generate_games(out, n, seed=100 + workers, split=f"bench{workers}{size}", size=size,
                           workers=workers)
    dt = time.perf_counter() - t0
    plan = statistics.mean(len(g.plan) for g in games)
    rows.append((f"generator, {n} {size} games, {workers} process(es)",
                 f"{60 * n / dt:.0f} games/min ({dt:.1f} s; mean plan {plan:.1f} steps, "
                 f"{statistics.mean(g.attempts for g in games):.2f} attempts/game)"))
    return games


def parse(argv=None):
    """The arguments, checked before any work (benchmarks/_inputs.py): --steps/--batch
    positive, --real an existing folder holding json_2.1.1 when given, --out a file this
    script may write (never one it did not make)."""
    ap = Parser(prog="bench_alfworld.py", description=__doc__.splitlines()[0])
    ap.add_argument("--real", default=None,
                    help="ALFWorld data folder (json_2.1.1 inside); default: the project's "
                         "shared data when present, else the real-game rows are skipped")
    ap.add_argument("--out", default=None)
    ap.add_argument("--steps", type=positive_int, default=20)
    ap.add_argument("--batch", type=positive_int, default=8)
    args = ap.parse_args(argv)
    if args.real is not None and not (Path(args.real) / "json_2.1.1").is_dir():
        ap.error(f"--real: {args.real} is not an ALFWorld data folder (no json_2.1.1 inside)")
    if args.real is None:
        args.real = str(REPO.parent / "shared" / "data" / "alfworld")
    ap.check_report(args.out, "--out", HEADING)
    return args


def main(argv=None) -> int:
    args = parse(argv)

    from sharpo_train.envs.alfworld.engine import ensure_alfworld_data
    from sharpo_train.envs.alfworld.games import discover_games, task_of
    tmp = Path(tempfile.mkdtemp(prefix="bench_alfworld_"))
    ensure_alfworld_data(str(tmp))
    rows: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    import textworld  # noqa: F401
    import alfworld.agents.environment.alfred_tw_env  # noqa: F401
    rows.append(("import textworld + alfworld", f"{time.perf_counter() - t0:.2f} s"))

    bench_generator(tmp, 12, 1, "small", rows)
    bench_generator(tmp, 12, 2, "small", rows)
    bench_generator(tmp, 6, 1, "medium", rows)
    gen_tasks = [task_of(g) for g in discover_games(tmp, "bench1small")]
    gen_tasks = (gen_tasks * ((args.batch + len(gen_tasks) - 1) // len(gen_tasks)))[:args.batch]
    bench_reset(gen_tasks[:6], "generated small game", rows)
    bench_single_env(gen_tasks[:6], "generated small games", args.steps, rows)
    for w in (1, 2):
        bench_pool(gen_tasks, "generated small games", w, args.steps, rows)

    real = Path(args.real)
    if (real / "json_2.1.1").is_dir():
        games = discover_games(real, "valid_seen")
        # one game of each family, then repeat: a mix like a training batch
        by = {}
        for g in games:
            by.setdefault(g.family, g)
        real_tasks = [task_of(g) for g in by.values()]
        batch = (real_tasks * 2)[:args.batch]
        bench_reset(real_tasks, "real game (valid_seen)", rows)
        bench_single_env(real_tasks, "real games", args.steps, rows)
        for w in (1, 2):
            bench_pool(batch, "real games", w, args.steps, rows)
    else:
        rows.append(("real games", f"skipped: {real}/json_2.1.1 not found"))

    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    header = [
        HEADING,
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}; load average at the end {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} "
        "(other jobs shared the CPUs when the load is above the CPU count).",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_alfworld.py --steps {args.steps} "
        f"--batch {args.batch}{' --out ' + args.out if args.out else ''}`",
        "",
        "| what | measured |",
        "|---|---|",
    ]
    text = "\n".join(header + [f"| {a} | {b} |" for a, b in rows]) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, prog="bench_alfworld.py"))
