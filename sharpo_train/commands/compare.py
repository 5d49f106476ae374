"""`sharpo compare [--run-dir DIR] [--seeds 0,1,2] [--methods grpo,sharpo:0.2,sharpo:0.05]
[--quick] [--print-config] [key=value ...]`: GRPO and SHARPO side by side from one warm
start.

One set of generated games, one set of expert demonstrations and one SFT warm start are
shared by every run; each method then trains from the warm start with each seed (the same
seed gives every method the same task sequence), and every final policy is evaluated on the
same held-out games: the generated held-out split and, when ../shared/data/alfworld is
present, the same sample of real valid_seen games. Output in DIR: compare.md (final success,
mean ± sample std over seeds, overall and per family: the layout of the paper's Tables 1-2),
compare_curves.png (learning curves), and runs/<method>-seed<k>/ (each a full run directory).
Rerunning the same command resumes: finished runs are kept, an interrupted one continues from
its last checkpoint. Overrides as for `sharpo demo` (demo.*, sft.*, trainer keys; env=webshop:
WebShop's goals, per product category, with the mean task score; `+key`/`++key`). Older
spellings of --run-dir: --out DIR, run_dir=DIR. --print-config prints the resolved settings
(demo.*, sft.*, the first RL run's trainer config and what each run changes) and exits
without creating anything. The recipe: sharpo_train/recipes/compare.py.
"""
from __future__ import annotations

from .demo import add_print_config, command_line, pipeline_dir, print_resolved
from ._run_dir_arg import add_run_dir


def register(subparsers) -> None:
    from .settings import add_settings_parser
    p = add_settings_parser(subparsers, "compare", "GRPO vs SHARPO from one warm start, over seeds",
                            __doc__)
    add_run_dir(p, "--out", help="the comparison's directory (default runs/compare-<time>)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated RL seeds (default 0,1,2)")
    p.add_argument("--methods", default="grpo,sharpo:0.2,sharpo:0.05",
                   help="comma-separated registered methods (grpo, sharpo, sharpo_rho, gigpo, "
                        "rlsd, serl, opsd, sdar, empg); NAME:<value> sets the method's main "
                        "parameter, e.g. sharpo:0.05 (lambda), rlsd:0.5 (docs/estimators.md); "
                        "@key=value gives one arm its own estimator.*/optim.*/teacher.*/loss.* "
                        "setting, e.g. grpo@optim.lr=1e-3 "
                        "(default grpo,sharpo:0.2,sharpo:0.05)")
    p.add_argument("--quick", action="store_true", help="CI size: a few games and steps")
    add_print_config(p)
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=run)


def run(args) -> int:
    """Settings errors raise ConfigError (one line, exit 2: cli.py) before anything is made."""
    from sharpo_train.recipes.compare import compare_runs, run_compare
    from sharpo_train.recipes.overrides import PipelinePlan
    from sharpo_train.recipes.recipe_config import parse_methods, parse_seeds
    from sharpo_train.recipes.recipe_config import CompareConfig

    out = pipeline_dir(args, "compare")
    methods = parse_methods(args.methods)
    seeds = parse_seeds(args.seeds)
    plan = PipelinePlan.from_args(out, args.overrides, args.quick, command_line("compare"),
                                  settings_cls=CompareConfig)
    plan.settings.seeds = seeds
    plan.settings.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.print_config:
        print_resolved(plan, [(folder, extra) for _, _, folder, extra in
                              compare_runs(methods, seeds)])
        return 0
    run_compare(plan, methods, seeds)
    return 0
