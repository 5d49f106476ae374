"""`sharpo sft --demos FILE.jsonl --out DIR [key=value ...]`: warm start the policy on
expert demonstrations (loss on assistant tokens only) and save a checkpoint that
`model.path=DIR` starts RL from. Keys (sharpo_train/loops/sft.py: SFTConfig; model.<key> as
for `sharpo train`): the list below, `sharpo settings --command sft`. Settings are checked
before anything is loaded or written."""
from __future__ import annotations

from pathlib import Path


def register(subparsers) -> None:
    from .settings import add_settings_parser
    p = add_settings_parser(subparsers, "sft", "supervised warm start on expert demonstrations",
                            __doc__)
    p.add_argument("--demos", required=True, help="chat-format JSONL (sharpo alfworld demos)")
    p.add_argument("--out", required=True, help="checkpoint directory to write (new, empty, "
                   "or an earlier sft output; docs/run_directory.md, 'Outputs')")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out that is no sft output (its other "
                        "files are kept)")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=run)


def run(args) -> int:
    from sharpo_train.errors import UsageError
    from sharpo_train.loops.sft import load_demos, parse_sft_overrides, run_sft

    from sharpo_train.outputs import check_out_dir

    cfg = parse_sft_overrides(args.overrides)   # errors: one line, exit 2 (cli.py)
    check_out_dir(args.out, "--out", args.force)
    load_demos(args.demos)                      # a missing or malformed file, before loading
    from sharpo_train.models.named import NAMED_MODELS
    if cfg.model.path is not None and not Path(cfg.model.path).is_dir() and \
            cfg.model.path not in NAMED_MODELS:         # a named model (models/named.py)
        raise UsageError(f"model.path: no such directory {cfg.model.path!r}")
    from sharpo_train.models.tiny import check_tiny_model_fits
    from sharpo_train.models.weights import check_weights_dir
    if cfg.model.path is None:           # the tiny model: it must fit in the memory free now
        check_tiny_model_fits(cfg.model)
    elif cfg.model.path not in NAMED_MODELS:       # safetensors weights only, never pickle
        check_weights_dir(cfg.model.path, "model.path")
    summary = run_sft(args.demos, args.out, cfg, force=args.force)
    print(f"sft: {summary['examples']} examples, {summary['steps']} steps, "
          f"final loss {summary['final_loss']:.4f}\ncheckpoint: {args.out}")
    return 0
