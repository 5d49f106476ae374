"""`sharpo compare [--out DIR] [--seeds 0,1,2] [--methods grpo,sharpo:0.2,sharpo:0.05]
[--quick] [key=value ...]`: GRPO and SHARPO side by side from one warm start.

One set of generated games, one set of expert demonstrations and one SFT warm start are
shared by every run; each method then trains from the warm start with each seed (the same
seed gives every method the same task sequence), and every final policy is evaluated on the
same held-out games: the generated held-out split and, when ../shared/data/alfworld is
present, the same sample of real valid_seen games. Output in DIR: compare.md (final success,
mean ± sample std over seeds, overall and per family: the layout of the paper's Tables 1-2),
compare_curves.png (learning curves), and runs/<method>-seed<k>/ (each a full run directory).
Rerunning the same command resumes: finished runs are kept, an interrupted one continues from
its last checkpoint. Overrides as for `sharpo demo` (demo.*, sft.*, trainer keys; env=webshop:
WebShop's goals, per product category, with the mean task score). The recipe:
sharpo_train/recipes/compare.py.
"""
from __future__ import annotations

import time
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="GRPO vs SHARPO from one warm start, over seeds",
                              description=__doc__)
    p.add_argument("--out", default=None, help="output directory (default runs/compare-<time>)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated RL seeds (default 0,1,2)")
    p.add_argument("--methods", default="grpo,sharpo:0.2,sharpo:0.05",
                   help="comma-separated registered methods (grpo, sharpo, gigpo, rlsd, serl, "
                        "opsd, sdar, empg); NAME:<value> sets the method's main parameter, e.g. "
                        "sharpo:0.05 (lambda), rlsd:0.5 (docs/estimators.md) "
                        "(default grpo,sharpo:0.2,sharpo:0.05)")
    p.add_argument("--quick", action="store_true", help="CI size: a few games and steps")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=run)


def run(args) -> int:
    """Settings errors raise ConfigError (one line, exit 2: cli.py) before anything is made."""
    from sharpo_train.commands.demo import command_line
    from sharpo_train.recipes.compare import run_compare
    from sharpo_train.recipes.settings import PipelinePlan, parse_methods, parse_seeds
    from sharpo_train.recipes.schema import CompareConfig

    out = Path(args.out) if args.out else Path("runs") / time.strftime("compare-%Y%m%d-%H%M%S")
    methods = parse_methods(args.methods)
    seeds = parse_seeds(args.seeds)
    plan = PipelinePlan.from_args(out, args.overrides, args.quick, command_line("compare"),
                                  settings_cls=CompareConfig)
    plan.settings.seeds = seeds
    plan.settings.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    run_compare(plan, methods, seeds)
    return 0
