"""`sharpo probe-teacher (--model DIR | --run-dir RUN) [--env NAME] [--games DIR] [--split S]
[--per-family N] [--tasks N]`: does the teacher read its hint?

The environment (``--env``, else the ``--run-dir``'s env.name, else the default one) says how
(its EnvSpec.probe; sharpo_train/analysis/teacher_probe.py). ALFWorld: for each expert turn of
real ALFWorld games, the gap (log-prob of the action with the hint minus without) of the
expert's action vs a random admissible one, and their AUC (0.5: the hint tells the teacher
nothing). Corridor (a ``--run-dir`` of a corridor run: its env settings): on ``--tasks``
held-out corridor tasks, the mean gap on the action tokens of the door the hint supports vs
a door it contradicts at the lamp turns, their separation in nats (the warm start's check
before RL: docs/corridor.md), and the same at turns without a lamp."""
from __future__ import annotations

import sys
from pathlib import Path

from ..hint import HINT_DEFAULTS, HINT_PLACEMENTS, HINT_SCOPES
from ._run_dir_arg import add_run_dir


def register(subparsers) -> None:
    p = subparsers.add_parser("probe-teacher", help="measure whether the teacher reads its hint",
                              description=__doc__)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", help="a checkpoint directory (an SFT output, a policy dir) "
                                     "or a named model")
    add_run_dir(who, "--run", help="a training run directory (or a `sharpo demo` one): its "
                                   "newest checkpoint")
    p.add_argument("--games", default=None,
                   help="ALFWorld json_2.1.1 folder (default: ALFWORLD_DATA / ../shared/data/alfworld)")
    p.add_argument("--split", default="valid_seen")
    p.add_argument("--per-family", type=int, default=1, help="games per task family (6 families)")
    p.add_argument("--history-length", type=int, default=None,
                   help="turns of history in the prompt (default: alfworld 1; corridor "
                        "the --run-dir's rollout.history_length, else 0)")
    p.add_argument("--hint-placement", default=None, choices=list(HINT_PLACEMENTS),
                   help="where the hint goes (as the trainer's teacher.hint_placement; "
                        "default: alfworld after_task; corridor the --run-dir's, else "
                        "after_observation)")
    p.add_argument("--hint-scope", default=None, choices=list(HINT_SCOPES),
                   help="corridor: the hint as teacher.hint_scope makes it (default: the "
                        "--run's, else trajectory)")
    p.add_argument("--env", default=None,
                   help="environment to probe, one with a teacher probe (default: the "
                        "--run-dir's env.name, else the default environment)")
    p.add_argument("--tasks", type=int, default=50,
                   help="corridor: held-out tasks to probe (default 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the summary here")
    p.add_argument("--force", action="store_true", help="replace an existing --json file")
    p.set_defaults(func=run)


def _model_dir(args) -> str:
    if args.model:
        from sharpo_train.models.named import NAMED_MODELS, named_model_dir
        if args.model in NAMED_MODELS and not Path(args.model).is_dir():
            return str(named_model_dir(args.model))     # the trainer's named models
        return args.model
    from sharpo_train.recipes.phases import latest_policy
    from sharpo_train.analysis.report.records import find_run_dir
    return str(latest_policy(find_run_dir(args.run_dir, "--run-dir")))


def _load_policy(args):
    """(model_dir, model, tokenizer) of the checkpoint the probe reads (--model or --run-dir)."""
    import torch

    from sharpo_train.models.policy import build_policy

    model_dir = _model_dir(args)
    torch.manual_seed(0)
    model, tok = build_policy(None, weights_from=model_dir,
                              weights_key="--model" if args.model else "--run-dir")
    return model_dir, model, tok


def _run_config(args):
    """The --run-dir's trainer config (None without --run-dir or when it has none)."""
    if not args.run_dir:
        return None
    from sharpo_train.loops.train_config import Config
    from sharpo_train.settings.loader import load_settings
    from sharpo_train.analysis.report.records import find_run_dir
    from sharpo_train.errors import ConfigError, UsageError
    path = find_run_dir(args.run_dir, "--run-dir") / "config.yaml"
    if not path.is_file():
        return None
    try:
        return load_settings(Config, path)
    except ConfigError as exc:
        raise UsageError(f"--run-dir: {path} is not a sharpo training config ({exc}); "
                         f"name a run directory of `sharpo train`") from None


def run(args) -> int:
    from sharpo_train.envs.registry import DEFAULT_ENV, env_names, get_spec

    from sharpo_train.outputs import check_out_file
    try:
        if args.json:
            check_out_file(args.json, "--json", args.force)
        cfg = _run_config(args)
        env = args.env or (cfg.env.get("name") if cfg is not None else DEFAULT_ENV)
        spec = get_spec(env)
        if spec.probe is None:
            raise ValueError(f"--env: {env!r} has no teacher probe (environments with one: "
                             f"{', '.join(n for n in env_names() if get_spec(n).probe)})")
        hooks = spec.load("probe")
        from_run = hooks.run_defaults and cfg is not None
        if args.history_length is None:
            args.history_length = (cfg.rollout.history_length if from_run
                                   else hooks.history_length)
        if args.hint_placement is None:
            args.hint_placement = cfg.teacher.hint_placement if from_run else hooks.placement
        if args.hint_scope is None:
            args.hint_scope = cfg.teacher.hint_scope if from_run else HINT_DEFAULTS.scope
        env_config = (dict(cfg.env) if cfg is not None and cfg.env.get("name") == env
                      else {"name": env})
        tasks, info = hooks.tasks(args, env_config)
        if args.history_length < 0:
            raise ValueError(f"--history-length: expected >= 0, got {args.history_length}")
        model_dir, model, tok = _load_policy(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"sharpo probe-teacher: {exc}", file=sys.stderr)
        return 2
    from sharpo_train.analysis.teacher_probe import run_probe

    s, text = run_probe(spec, model, tok, tasks, args, model_dir,
                        progress=lambda t: print(f"  probed {t.id}", file=sys.stderr))
    s.update({"model": model_dir, **info})
    print(text)
    if args.json:
        from sharpo_train.outputs import write_out_json
        write_out_json(args.json, s)
    return 0
