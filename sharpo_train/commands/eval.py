"""`sharpo eval --run-dir RUN | --model DIR [--games DIR] [--config FILE] [--out FILE] [--force]
[key=value ...]`.

Plays one episode per evaluation task (greedy unless eval.temperature > 0;
eval.episodes_per_task=k sampled ones, per_task then each task's rate) with the newest
checkpoint of a run (its resolved config.yaml is the base config; a `sharpo demo` directory
means its rl/ run) or with a local HF model directory, and prints the eval.json object.

Games: the evaluation split only (env.eval_split; no training split needed), eval.num_tasks
of them spread evenly over the task families (0: all). --games takes a folder holding
json_2.1.1/, json_2.1.1 itself, or one split folder (json_2.1.1/valid_seen). WebShop
(env.name=webshop): the goals of env.eval_split (default test: WebShop's goals 0-499),
families are product categories, and the result adds the mean task score ("score").

`--run` is the older spelling of `--run-dir`. Written to --out, else (with --run-dir) to a
new RUN/eval-<time>.json: the run's own eval.json
(its final evaluation) is never overwritten; an existing --out needs --force.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ._run_dir_arg import add_run_dir


def register(subparsers) -> None:
    from .settings import add_settings_parser
    # the trainer's settings (eval.*, env.*, model.*): eval loads the trainer's Config
    p = add_settings_parser(subparsers, "eval", "evaluate a run's checkpoint or a model directory",
                            __doc__, settings="train")
    src = p.add_mutually_exclusive_group(required=True)
    add_run_dir(src, "--run", help="a run directory (uses RUN/checkpoints/latest) or a "
                                   "`sharpo demo` directory")
    src.add_argument("--model", help="a local Hugging Face model directory")
    p.add_argument("--games", help="ALFWorld games: a folder holding json_2.1.1/, or a split "
                                   "folder json_2.1.1/<split> (sets env.games_dir / eval_split)")
    p.add_argument("--config", help="base YAML config (default: the run's, else the embedded one)")
    p.add_argument("--out", help="where to write the result (default RUN/eval-<time>.json)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=run)


def default_out(run_dir: Path) -> Path:
    """RUN/eval-<YYYYmmdd-HHMMSS>.json, never an existing file (nor RUN/eval.json)."""
    stem = time.strftime("eval-%Y%m%d-%H%M%S")
    path, k = run_dir / f"{stem}.json", 1
    while path.exists():
        path, k = run_dir / f"{stem}-{k}.json", k + 1
    return path


def plan(args) -> tuple:
    """(config, weights, out path or None) for the arguments; a user error (ConfigError,
    FileNotFoundError, FileExistsError) names the argument, before anything is loaded or
    written."""
    from ..runs.checkpoint import latest_checkpoint
    from ..loops.train_config import load_config
    from ..envs.registry import check_env_data, get_spec
    from ..analysis.report.records import find_run_dir

    overrides = list(args.overrides)
    weights, out, base = args.model, args.out, args.config
    if args.run_dir:
        run_dir = find_run_dir(args.run_dir, "--run-dir")
        ckpt = latest_checkpoint(run_dir)
        if ckpt is None:
            raise FileNotFoundError(f"--run-dir: {run_dir} has no checkpoint "
                                    f"(checkpoints/latest)")
        weights = ckpt / "policy"
        base = base or (run_dir / "config.yaml")
        out = out or default_out(run_dir)
    cfg = load_config(base, overrides)           # settings first: a bad key is named
    if args.games:
        games_overrides = get_spec(cfg.env["name"]).games_overrides
        if games_overrides is None:
            from ..errors import UsageError
            raise UsageError(f"--games: environment {cfg.env.get('name')!r} takes no games "
                             f"folder; it reads its own data (its env.* settings, "
                             f"docs/training.md)")
        overrides += games_overrides(args.games)
        cfg = load_config(base, overrides)
    check_env_data(cfg.env)      # e.g. ALFWorld's games folder (env.games_dir)
    if args.model and not Path(args.model).is_dir():
        raise FileNotFoundError(f"--model: {args.model} is not a directory")
    if args.model:          # safetensors weights only (a pickle-only directory is refused)
        from ..models.lora import is_adapter_dir
        from ..models.weights import check_weights_dir
        if not is_adapter_dir(args.model):     # a LoRA policy/: base + adapter, merged
            check_weights_dir(args.model, "--model")
    if args.out is not None:        # a folder, a link, a system path, or exists without --force
        from ..outputs import EVAL_RESULT, check_out_file
        check_out_file(args.out, "--out", args.force, EVAL_RESULT)
    return cfg, weights, out


def run(args) -> int:
    from ..loops.evaluate import evaluate_checkpoint
    from ..io import clean
    from ..outputs import create_exclusive, write_out_json
    from ..recipes.phases import quiet_transformers
    from ..runs.checkpoint import pinned_checkpoint

    cfg, weights, out = plan(args)      # user errors: one line, exit 2 (cli.py)
    quiet_transformers()
    if args.run_dir:       # a training run may rotate the checkpoint out: read a pinned copy
        from ..analysis.report.records import find_run_dir
        run_dir = find_run_dir(args.run_dir, "--run-dir")
        with pinned_checkpoint(run_dir, warn=lambda line: None) as (ckpt, files):  # plan warned
            if ckpt is None:
                raise FileNotFoundError(f"--run-dir: {args.run_dir} has no checkpoint "
                                        f"(checkpoints/latest)")
            result = evaluate_checkpoint(files / "policy", cfg, label=str(ckpt / "policy"))
    else:
        result = evaluate_checkpoint(Path(weights), cfg)
    print(json.dumps(result, indent=1))
    if args.out:
        write_out_json(out, result)
    elif out:       # RUN/eval-<time>.json: created exclusively, "-<k>" when the name is taken
        out = create_exclusive(Path(out).parent, Path(out).stem, ".json", (json.dumps(
            clean(result), indent=1, allow_nan=False) + "\n").encode("utf-8"))
    if out:
        print(f"sharpo eval: wrote {out}", file=sys.stderr)
    return 0
