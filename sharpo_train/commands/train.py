"""`sharpo train [--config FILE] [--resume] [--run-dir DIR] [--print-config] [key=value ...]`:
GRPO/SHARPO training.

Without --config the embedded default (sharpo_train/configs/default.yaml) is used.
Overrides are dotted keys: `method=grpo rollout.group_size=8 optim.lr=1e-3 env.name=synthetic`;
as in Hydra, `+key=value` adds a key the config does not hold yet (refused when it does),
`++key=value` adds or sets, and an unknown key is an error naming the known ones.
`--run-dir DIR` is `run_dir=DIR`. `--print-config` prints the resolved config (YAML, what
RUN/config.yaml would hold) and exits without creating anything (Hydra's `--cfg job`).

Every key with its type, default, range and help: the list below, `sharpo settings [PREFIX]`.

`--resume --run-dir RUN [key=value ...]` continues RUN from its newest checkpoint with RUN's
own config.yaml; the overrides may let total_steps grow and change log.*, eval.*,
checkpoint.every/keep, model.device and model.cpu_threads, nothing that changes what the run
is (docs/run_directory.md). With --config as well, FILE + overrides must restate the run.
Every setting and path is checked before the run directory is created.
"""
from __future__ import annotations

from pathlib import Path

from ._run_dir_arg import add_run_dir, resolve_run_dir


def register(subparsers) -> None:
    from .settings import add_settings_parser
    p = add_settings_parser(subparsers, "train", "train a policy with GRPO or SHARPO",
                            __doc__)
    p.add_argument("--config", default=None, help="YAML config (default: the embedded one)")
    p.add_argument("--resume", action="store_true",
                   help="continue RUN (run_dir) from RUN/checkpoints/latest with RUN/config.yaml")
    add_run_dir(p, help="the run directory (run_dir=DIR: the same)")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config (YAML) and exit; creates nothing and does "
                        "not check the run directory, paths or device")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=run)


def plan(args, check: bool = True):
    """The validated Config of a `sharpo train` command line; UsageError/ConfigError naming
    the key, option or path on a user error. Creates nothing. ``check=False``
    (--print-config): the settings only, not the run directory, paths or device."""
    from ..loops.resume import resume_config
    from ..loops.train_config import load_config
    from ..settings.loader import OverrideText, coerce, parse_overrides
    from ..errors import UsageError
    from ..runs.run_dir import check_run_dir

    resolve_run_dir(args, overrides=args.overrides)     # --run-dir vs run_dir=: one value
    data = parse_overrides(args.overrides)
    if args.run_dir is not None:
        data["run_dir"] = OverrideText(args.run_dir)
    resume = args.resume or coerce("resume", data.pop("resume", False), bool)
    if resume:
        if "run_dir" in data:
            run_dir = coerce("run_dir", data["run_dir"], str)
        else:   # the run_dir the same command line without --resume would use
            run_dir = load_config(args.config, data).run_dir
        check_run_dir(run_dir)        # a system or foreign folder: refused before reading it
        cfg = resume_config(run_dir, data, args.config)
    else:
        cfg = load_config(args.config, data)
        if not check:
            return cfg
        check_run_dir(cfg.run_dir)
        metrics = Path(cfg.run_dir) / "metrics.jsonl"
        if metrics.is_file() and metrics.stat().st_size > 0:
            raise UsageError(f"run_dir: {cfg.run_dir} already holds a run; pass --resume to "
                             f"continue it or choose another run_dir")
    if check:
        check_paths_and_device(cfg)
    return cfg


def check_paths_and_device(cfg) -> None:
    """What the config cannot know by itself: the folders it names exist, the device is
    there, the environment's data is where env.* says (EnvSpec.check_data: ALFWorld's games
    unless they are to be generated)."""
    from ..envs.registry import check_env_data
    from ..errors import UsageError
    from ..models.named import NAMED_MODELS
    from ..models.tiny import check_tiny_model_fits
    from ..models.weights import check_weights_dir

    for key, value in (("model.path", cfg.model.path), ("init_from", cfg.init_from),
                       ("model.tokenizer_path", cfg.model.tokenizer_path)):
        if value is not None and not Path(value).is_dir() and \
                not (key == "model.path" and value in NAMED_MODELS):   # models/named.py
            if Path(value).exists():
                raise UsageError(f"{key}: {value!r} is not a directory (a model or tokenizer "
                                 f"setting names a folder)")
            raise UsageError(f"{key}: no such directory {value!r}")
    # weights through safetensors only: a pickle-only directory is refused here, not loaded
    weights = cfg.init_from if cfg.init_from is not None else cfg.model.path
    key = "init_from" if cfg.init_from is not None else "model.path"
    if weights is not None and weights not in NAMED_MODELS:
        check_weights_dir(weights, key)
    if weights is None:       # the tiny model: its size must fit in the memory free now
        check_tiny_model_fits(cfg.model, with_reference=cfg.loss.use_kl)
    if cfg.model.device.startswith("cuda"):
        import torch
        index = int(cfg.model.device.partition(":")[2] or 0)
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise UsageError(f"model.device: {cfg.model.device!r} requested but "
                             f"{'CUDA is not available' if not torch.cuda.is_available() else 'there is no such GPU'}")
    check_env_data(cfg.env)      # e.g. ALFWorld's games folder


def run(args) -> int:
    if args.print_config:
        from ..loops.train_config import config_yaml
        print(config_yaml(plan(args, check=False)), end="")
        return 0
    cfg = plan(args)
    from ..loops.trainer import train
    run_dir = train(cfg)
    print(f"run directory: {run_dir}")
    return 0
