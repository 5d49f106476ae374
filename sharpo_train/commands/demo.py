"""`sharpo demo [--run-dir DIR] [--quick] [--print-config] [key=value ...]`: the main use case
end to end on a CPU — generate ALFWorld games, warm start the tiny policy on expert demonstrations, train it
with SHARPO, evaluate on held-out games (generated, plus a sample of the real valid_seen
games when ../shared/data/alfworld is present), and write a results table per family, a
learning-curve PNG and a credit report. Rerunning with the same --run-dir resumes (older
spellings: --out DIR, run_dir=DIR).

Overrides: demo.<key> (sizes: train_games, eval_games, ...; the environment may add its
own keys, e.g. the generated games' size: --print-config lists them, docs/training.md),
sft.<key> (warm start: max_steps, lr, model.hidden_size, ...), anything else is a trainer
key (total_steps=30, method=grpo, estimator.lam=0.05); `+key=value` / `++key=value` as for
`sharpo train`. --print-config prints every resolved setting (demo.*, sft.*, the RL run's
trainer config) as YAML and exits without creating anything. WebShop instead of ALFWorld:
env=webshop (WebShop's train goals, expert demonstrations, held-out test goals; success and mean score).
The recipe: sharpo_train/recipes/demo.py.
"""
from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from ._run_dir_arg import add_run_dir, resolve_run_dir


def register(subparsers) -> None:
    from .settings import add_settings_parser
    p = add_settings_parser(subparsers, "demo", "games -> warm start -> SHARPO -> held-out "
                            "eval, table, plot, credit report", __doc__)
    add_run_dir(p, "--out", help="the demo's directory (default runs/demo-<time>)")
    p.add_argument("--quick", action="store_true", help="CI size: a few games and steps")
    add_print_config(p)
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=run)


def command_line(name: str) -> str:
    """The command as typed (recorded in the results), e.g. 'sharpo demo --quick'."""
    if sys.argv[1:2] == [name]:
        return f"sharpo {name} " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    return f"sharpo {name}"


def add_print_config(p) -> None:
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved settings (YAML) and exit; creates nothing")


def pipeline_dir(args, name: str) -> Path:
    """The directory of `sharpo demo` / `sharpo compare`: --run-dir (--out, or a run_dir=
    item, which is taken out of the trainer overrides: the pipeline names its runs' own
    run_dir), else runs/<name>-<time>."""
    given = resolve_run_dir(args, overrides=args.overrides, take_override=True)
    return Path(given) if given else Path("runs") / time.strftime(f"{name}-%Y%m%d-%H%M%S")


def print_resolved(plan, runs) -> None:
    import yaml
    print(yaml.safe_dump(plan.resolved(runs), sort_keys=False), end="")


def run(args) -> int:
    from sharpo_train.recipes.demo import run_demo
    from sharpo_train.recipes.overrides import PipelinePlan

    out = pipeline_dir(args, "demo")
    # a bad setting raises ConfigError: one line, exit 2 (cli.py), before anything is made
    plan = PipelinePlan.from_args(out, args.overrides, args.quick, command_line("demo"))
    if args.print_config:
        print_resolved(plan, [("rl", [])])
        return 0
    run_demo(plan)
    return 0
