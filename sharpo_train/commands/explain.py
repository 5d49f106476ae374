"""`sharpo explain --run-dir RUN [--step S] [--episode K]` (older spelling: `sharpo explain
RUN`): the credit page (HTML + PNG) of one
group of a run — each rollout's turns, segments shaded by the update relative to GRPO
((1-lam)+lam*rho*w), gap, weight and length factor per segment, the hint used, GRPO vs
SHARPO advantages, and the run's logged credit AUC (log.credit_quality). With
--credit-quality: every registered method scored on the run's saved batches
(log.save_batches) instead, a table in RUN/report/credit_quality.md
(docs/credit_quality.md). RUN_DIR may be a `sharpo demo` directory (its rl/ run)."""
from __future__ import annotations

from ._run_dir_arg import add_run_dir, resolve_run_dir


def register(subparsers) -> None:
    p = subparsers.add_parser("explain", help="credit report (HTML + PNG) of one group of a run",
                              description=__doc__)
    add_run_dir(p, help="a run directory (`sharpo train`) or a `sharpo demo` directory")
    p.add_argument("run", nargs="?", metavar="RUN_DIR", default=None,
                   help="the same as --run-dir (the older spelling)")
    p.add_argument("--step", type=int, default=None,
                   help="training step (default: the latest step with a mixed group)")
    p.add_argument("--episode", "--group", dest="group", type=int, default=None,
                   help="group index within the step (default: its first mixed group)")
    p.add_argument("--out", default=None,
                   help="output path stem (default RUN_DIR/report/credit_step<S>_group<K>)")
    p.add_argument("--force", action="store_true", help="replace existing --out files")
    p.add_argument("--credit-quality", action="store_true",
                   help="score every method on the run's saved batches (log.save_batches) "
                        "and write RUN/report/credit_quality.md")
    p.add_argument("--methods", default=None,
                   help="with --credit-quality: comma-separated methods (default: all)")
    p.set_defaults(func=run)


def run(args) -> int:
    from sharpo_train.analysis.report.explain_quality import credit_quality_line, write_credit_quality_report
    from sharpo_train.errors import UsageError
    from sharpo_train.analysis.report.explain import explain_run
    from sharpo_train.analysis.report.records import find_run_dir

    run_dir = resolve_run_dir(args, positional=args.run)
    if run_dir is None:
        raise UsageError("--run-dir: the run directory is required (sharpo explain --run-dir "
                         "RUN, or sharpo explain RUN)")
    if args.out:         # output files outside the run: outputs.py's rule
        from pathlib import Path
        from sharpo_train.outputs import check_out_file
        stem = Path(args.out).with_suffix("") if not args.credit_quality else Path(args.out)
        for suffix in ((".md",) if args.credit_quality else (".html", ".png")):
            check_out_file(str(stem) + suffix, "--out", args.force)
    if args.credit_quality:
        from sharpo_train.estimators import ESTIMATORS
        methods = [m.strip() for m in (args.methods or "").split(",") if m.strip()] or None
        unknown = [m for m in methods or [] if m not in ESTIMATORS]
        if unknown:
            raise UsageError(f"--methods: unknown method(s) {unknown}; known: {sorted(ESTIMATORS)}")
        # no saved batches: FileNotFoundError, one line, exit 2
        path, table = write_credit_quality_report(find_run_dir(run_dir), methods,
                                                  args.out and args.out + ".md")
        print(f"{table}\ncredit quality: {path}")
        return 0
    # a missing run or credit record (FileNotFoundError, CreditRecordError): one line, exit 2
    html_path, png_path = explain_run(run_dir, args.step, args.group, args.out)
    print(f"credit report: {html_path}\ncredit plot:   {png_path}")
    line = credit_quality_line(find_run_dir(run_dir))
    if line:
        print(line)
    return 0
