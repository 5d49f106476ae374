"""Measures the WebShop environment on this machine: loading (catalogue, goals, BM25
index), reset, a search step, click steps, the buy step (reward: spaCy tagging of two
titles, cold and cached), and whole expert / random episodes. A measuring script (no
assertions); writes a markdown table.

    .venv/bin/python benchmarks/bench_webshop.py [--n 200] [--out benchmarks/results/webshop.md]
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inputs import Parser, guarded, positive_int  # noqa: E402
HEADING = "# WebShop environment: measurements"


def _ms(xs):
    return (f"median {1000 * statistics.median(xs):.3f} ms, mean {1000 * statistics.mean(xs):.3f} ms, "
            f"max {1000 * max(xs):.1f} ms (n={len(xs)})")


def parse(argv=None):
    """--n positive; --out a file this script may write (benchmarks/_inputs.py)."""
    ap = Parser(prog="bench_webshop.py")
    ap.add_argument("--n", type=positive_int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    ap.check_report(args.out, "--out", HEADING)
    return args


def main(argv=None) -> int:
    args = parse(argv)
    rows = []
    t = time.perf_counter()
    from sharpo_train.envs.webshop.agents import ExpertAgent, play
    from sharpo_train.envs.webshop.data import load_catalogue
    from sharpo_train.envs.webshop.engine import WebShopEnv, WebShopWorld
    from sharpo_train.envs.webshop.goals import synthetic_goals
    from sharpo_train.envs.webshop.search import SearchIndex
    rows.append(("import sharpo_train.envs.webshop (+ bm25s, numpy)", f"{time.perf_counter() - t:.2f} s"))
    t = time.perf_counter(); cat = load_catalogue(); rows.append(("load the 1,000-product catalogue", f"{1000 * (time.perf_counter() - t):.0f} ms"))
    t = time.perf_counter(); synthetic_goals(cat); rows.append(("build + shuffle the 6,910 synthetic goals", f"{1000 * (time.perf_counter() - t):.0f} ms"))
    t = time.perf_counter(); SearchIndex(cat.products); rows.append(("build the BM25 index (analyze 1,000 documents, bm25s)", f"{1000 * (time.perf_counter() - t):.0f} ms"))
    t = time.perf_counter(); world = WebShopWorld(); rows.append(("WebShopWorld (all of the above, once per process)", f"{time.perf_counter() - t:.2f} s"))
    env = WebShopEnv(world)
    tasks = world.tasks("test")[:args.n]
    resets, searches, cached, clicks, buys_cold, buys_warm = [], [], [], [], [], []
    for task in tasks:
        t = time.perf_counter(); env.reset(task); resets.append(time.perf_counter() - t)
    from sharpo_train.envs.webshop.reward import _nlp
    t = time.perf_counter(); _nlp(); rows.append(("load spaCy en_core_web_sm (first buy of a process)", f"{time.perf_counter() - t:.2f} s"))
    from sharpo_train.envs.webshop.reward import title_nouns
    for i, task in enumerate(tasks):
        env.reset(task)
        q = env.goal["instruction_text"]
        t = time.perf_counter(); env.step(f"search[{q}]"); searches.append(time.perf_counter() - t)
        env.reset(task)
        t = time.perf_counter(); env.step(f"search[{q}]"); cached.append(time.perf_counter() - t)
        for cold in (True, False):           # the same episode twice: nouns uncached, cached
            env.reset(task)
            expert = ExpertAgent(env)
            while not env.done:
                a = expert.act()[0]
                if a == "click[buy now]" and cold:
                    title_nouns.cache_clear()
                t = time.perf_counter(); env.step(a); dt = time.perf_counter() - t
                if a == "click[buy now]":
                    (buys_cold if cold else buys_warm).append(dt)
                elif a.startswith("click[") and cold:
                    clicks.append(dt)
    rows += [("reset", _ms(resets)),
             ("step: search[<instruction>] (new query: analyze + BM25 over 1,000 docs + page)", _ms(searches)),
             ("step: the same search again (results cached per query)", _ms(cached)),
             ("step: click (product, option, next/prev, back)", _ms(clicks)),
             ("step: buy now, nouns of the two titles not cached (reward incl. 2 spaCy calls)", _ms(buys_cold)),
             ("step: buy now, nouns cached (the common case: 1,000 titles in all)", _ms(buys_warm))]
    t = time.perf_counter(); recs = play(env, world.tasks("eval")[:args.n], "random"); dt = time.perf_counter() - t
    steps = sum(r.steps for r in recs)
    rows.append(("random agent, eval goals", f"{len(recs) / dt:.1f} episodes/s, {1000 * dt / steps:.2f} ms/step ({steps} steps)"))
    load = os.getloadavg()
    head = (f"{HEADING}\n\nMachine: {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, {platform.platform()}; load average at the end "
            f"{load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} (other jobs shared the CPUs when the load is above the CPU count).\n\n"
            f"Command: `.venv/bin/python benchmarks/bench_webshop.py --n {args.n}"
            f"{' --out ' + args.out if args.out else ''}`\n\n| what | measured |\n|---|---|\n")
    text = head + "\n".join(f"| {a} | {b} |" for a, b in rows) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, prog="bench_webshop.py"))
