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
WebShop's goals, per product category, with the mean task score; `+key`/`++key`);
demo.seeds=[..] and demo.methods=[..] are --seeds and --methods as settings (one of the
two, not both). Older
spellings of --run-dir: --out DIR, run_dir=DIR. --print-config prints the resolved settings
(demo.*, sft.*, the first RL run's trainer config and what each run changes) and exits
without creating anything. The recipe: sharpo_train/recipes/compare.py.
"""
from __future__ import annotations

from .demo import add_print_config, command_line, keep_pipeline, pipeline_dir, print_resolved
from ._run_dir_arg import add_run_dir


def register(subparsers) -> None:
    from .settings import add_settings_parser
    p = add_settings_parser(subparsers, "compare", "GRPO vs SHARPO from one warm start, over seeds",
                            __doc__)
    add_run_dir(p, "--out", help="the comparison's directory (default runs/compare-<time>)")
    p.add_argument("--seeds", default=None, help="comma-separated RL seeds (default 0,1,2; "
                   "the same as demo.seeds=[0,1,2]: give one of the two)")
    p.add_argument("--methods", default=None,
                   help="comma-separated registered methods (grpo, sharpo, sharpo_rho, gigpo, "
                        "rlsd, serl, opsd, sdar, empg); NAME:<value> sets the method's main "
                        "parameter, e.g. sharpo:0.05 (lambda), rlsd:0.5 (docs/estimators.md); "
                        "@key=value gives one arm its own estimator.*/optim.*/teacher.*/loss.* "
                        "setting, e.g. grpo@optim.lr=1e-3 "
                        "(default grpo,sharpo:0.2,sharpo:0.05; the same as demo.methods=[...]: "
                        "give one of the two)")
    p.add_argument("--quick", action="store_true", help="CI size: a few games and steps")
    add_print_config(p)
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=run)


def run(args) -> int:
    """Settings errors raise ConfigError (one line, exit 2: cli.py) before anything is made."""
    from sharpo_train.recipes.compare import compare_runs, run_compare
    from sharpo_train.recipes.overrides import PipelinePlan, split_overrides
    from sharpo_train.recipes.recipe_config import CompareConfig, parse_methods, parse_seeds
    from sharpo_train.settings.loader import ConfigError, override_key

    out = pipeline_dir(args, "compare")
    plan = PipelinePlan.from_args(out, args.overrides, args.quick, command_line("compare"),
                                  settings_cls=CompareConfig)
    given = {override_key(o) for o in split_overrides(args.overrides)[0]}
    for option, key in (("--seeds", "seeds"), ("--methods", "methods")):
        if getattr(args, key) is not None and key in given:
            raise ConfigError(f"demo.{key}: also given as {option}; give one of the two")
    # --seeds/--methods, else demo.seeds/demo.methods (CompareConfig's defaults included)
    seeds = (parse_seeds(args.seeds) if args.seeds is not None
             else parse_seeds(",".join(str(s) for s in plan.settings.seeds), prefix="demo."))
    methods_text = args.methods if args.methods is not None else ",".join(plan.settings.methods)
    methods = parse_methods(methods_text, prefix="--" if args.methods is not None else "demo.")
    plan.settings.seeds = seeds
    plan.settings.methods = [m.strip() for m in methods_text.split(",") if m.strip()]
    runs = [(folder, extra) for _, _, folder, extra in compare_runs(methods, seeds)]
    if args.print_config:
        print_resolved(plan, runs)
        return 0
    plan.resolved(runs)     # every arm's trainer config checked now, not after the others ran
    keep_pipeline(out, "compare")
    run_compare(plan, methods, seeds)
    return 0
