"""`sharpo probe-teacher (--model DIR | --run-dir RUN) [--env alfworld|corridor] [--games DIR]
[--split S] [--per-family N] [--tasks N]`: does the teacher read its hint?

ALFWorld (default): for each expert turn of real ALFWorld games, the gap (log-prob of the
action with the hint minus without) of the expert's action vs a random admissible one, and
their AUC (0.5: the hint tells the teacher nothing).
Corridor (``--env corridor``, or a ``--run-dir`` of env.name corridor: its env settings): on
``--tasks`` held-out corridor tasks, the mean gap on the action tokens of the door the
hint supports vs a door it contradicts at the lamp turns, their separation in nats (the
warm start's check before RL: docs/corridor.md), and the same at turns without a lamp.
See sharpo_train/analysis/teacher_probe.py."""
from __future__ import annotations

import sys
from pathlib import Path

from ..hint import HINT_DEFAULTS, HINT_PLACEMENTS, HINT_SCOPES, PLACEMENT_AFTER_OBSERVATION
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
    p.add_argument("--hint-placement", default=None,
                   choices=list(HINT_PLACEMENTS),
                   help="where the hint goes (as the trainer's teacher.hint_placement; "
                        "default: alfworld after_task; corridor the --run-dir's, else "
                        "after_observation)")
    p.add_argument("--hint-scope", default=None, choices=list(HINT_SCOPES),
                   help="corridor: the hint as teacher.hint_scope makes it (default: the "
                        "--run's, else trajectory)")
    p.add_argument("--env", default=None, choices=["alfworld", "corridor"],
                   help="environment to probe (default: the --run-dir's env.name, else alfworld)")
    p.add_argument("--tasks", type=int, default=50,
                   help="corridor: held-out tasks to probe (default 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the summary here")
    p.add_argument("--force", action="store_true", help="replace an existing --json file")
    p.set_defaults(func=run)


def _model_dir(args) -> str:
    if args.model:
        from sharpo_train.models.model import NAMED_MODELS, named_model_dir
        if args.model in NAMED_MODELS and not Path(args.model).is_dir():
            return str(named_model_dir(args.model))     # the trainer's named models
        return args.model
    from sharpo_train.recipes.phases import latest_policy
    from sharpo_train.analysis.report.records import find_run_dir
    return str(latest_policy(find_run_dir(args.run_dir, "--run-dir")))


def _load_policy(args):
    """(model_dir, model, tokenizer) of the checkpoint the probe reads (--model or --run-dir)."""
    import torch

    from sharpo_train.models.model import build_policy

    model_dir = _model_dir(args)
    torch.manual_seed(0)
    model, tok = build_policy(None, weights_from=model_dir,
                              weights_key="--model" if args.model else "--run-dir")
    return model_dir, model, tok


def default_games_dir() -> str:
    import os
    env = os.environ.get("ALFWORLD_DATA")
    if env:
        return env
    for cand in (Path.cwd().parent / "shared" / "data" / "alfworld",
                 Path(__file__).resolve().parents[2].parent / "shared" / "data" / "alfworld"):
        if cand.is_dir():
            return str(cand)
    raise FileNotFoundError("--games: no ALFWorld folder given and none found "
                            "(set ALFWORLD_DATA or pass --games)")


def _run_config(args):
    """The --run-dir's trainer config (None without --run-dir or when it has none)."""
    if not args.run_dir:
        return None
    from sharpo_train.settings.config import Config, load_settings
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
    from sharpo_train.runs.outputs import check_out_file
    try:
        if args.json:
            check_out_file(args.json, "--json", args.force)
        cfg = _run_config(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"sharpo probe-teacher: {exc}", file=sys.stderr)
        return 2
    env = args.env or (cfg.env.get("name") if cfg is not None else "alfworld")
    corridor_run = env == "corridor" and cfg is not None
    if args.history_length is None:
        args.history_length = (cfg.rollout.history_length if corridor_run
                               else 0 if env == "corridor" else 1)
    if args.hint_placement is None:
        args.hint_placement = (cfg.teacher.hint_placement if corridor_run
                               else PLACEMENT_AFTER_OBSERVATION if env == "corridor"
                               else HINT_DEFAULTS.placement)
    if args.hint_scope is None:
        args.hint_scope = cfg.teacher.hint_scope if corridor_run else HINT_DEFAULTS.scope
    if env == "corridor":
        return run_corridor(args, dict(cfg.env) if cfg is not None and
                            cfg.env.get("name") == "corridor" else {"name": "corridor"})
    if env != "alfworld":
        print(f"sharpo probe-teacher: --env: the probe knows alfworld and corridor, the run "
              f"is {env!r}", file=sys.stderr)
        return 2

    from sharpo_train.envs.alfworld.games import FAMILIES, discover_games, task_of
    from sharpo_train.analysis.teacher_probe import probe_teacher

    try:
        if args.per_family < 1:
            raise ValueError(f"--per-family: expected >= 1, got {args.per_family}")
        if args.history_length < 0:
            raise ValueError(f"--history-length: expected >= 0, got {args.history_length}")
        games_dir = args.games or default_games_dir()
        tasks = []
        for fam in FAMILIES:
            try:
                tasks += [task_of(g) for g in discover_games(games_dir, args.split, families=[fam],
                                                             limit=args.per_family)]
            except ValueError:
                continue        # this split has no game of that family
        model_dir, model, tok = _load_policy(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"sharpo probe-teacher: {exc}", file=sys.stderr)
        return 2
    res = probe_teacher(model, tok, tasks, history_length=args.history_length, seed=args.seed,
                        placement=args.hint_placement,
                        progress=lambda t: print(f"  probed {t.id}", file=sys.stderr))
    s = res.summary(seed=args.seed)
    s.update({"model": model_dir, "games_dir": str(games_dir), "split": args.split})
    ci = s.get("auc_ci95")
    fmt = lambda x: "n/a" if x is None else f"{x:+.3f}"
    print(f"teacher probe of {model_dir}: {s['turns']} expert turns, {s['games']} games "
          f"({', '.join(f'{k} {v}' for k, v in s['families'].items())})")
    print(f"  gap expert action {fmt(s['gap_expert_mean'])}, random admissible action "
          f"{fmt(s['gap_random_mean'])}, AUC {s['auc'] if s['auc'] is None else round(s['auc'], 3)}"
          + (f" (95% bootstrap over games {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""))
    if args.json:
        from sharpo_train.runs.outputs import write_out_json
        write_out_json(args.json, s)
    return 0


def run_corridor(args, env_config: dict) -> int:
    """`--env corridor`: the gap on supported vs contradicted doors (probe.probe_corridor)."""
    from sharpo_train.envs import make_suite
    from sharpo_train.envs.corridor.probe import probe_corridor

    try:
        if args.tasks < 1:
            raise ValueError(f"--tasks: expected >= 1, got {args.tasks}")
        if args.history_length < 0:
            raise ValueError(f"--history-length: expected >= 0, got {args.history_length}")
        tasks = make_suite(env_config).eval_tasks[:args.tasks]
        if not tasks:
            raise ValueError("env.num_eval: the corridor settings hold no held-out task")
        model_dir, model, tok = _load_policy(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"sharpo probe-teacher: {exc}", file=sys.stderr)
        return 2
    s = probe_corridor(model, tok, tasks, history_length=args.history_length, seed=args.seed,
                       placement=args.hint_placement, scope=args.hint_scope).summary()
    s.update({"model": model_dir, "env": env_config, "placement": args.hint_placement,
              "scope": args.hint_scope})
    print(corridor_probe_text(s, model_dir))
    if args.json:
        from sharpo_train.runs.outputs import write_out_json
        write_out_json(args.json, s)
    return 0


def corridor_probe_text(s: dict, model_dir: str) -> str:
    fmt = lambda x: "n/a" if x is None else f"{x:+.3f}"     # noqa: E731
    pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"     # noqa: E731
    return (f"teacher probe of {model_dir}: {s['tasks']} held-out corridor tasks, "
            f"{s['lamp_turns']} lamp turns\n"
            f"  lamp turns: gap on the door the hint supports {fmt(s['gap_supported'])}, on a "
            f"door it contradicts {fmt(s['gap_contradicted'])} nats/token; separation "
            f"{fmt(s['separation'])}, AUC {fmt(s['auc'])}\n"
            f"  the same summed over the action span (the door's whole log-prob ratio): "
            f"supported {fmt(s['gap_sum_supported'])}, contradicted "
            f"{fmt(s['gap_sum_contradicted'])} nats; separation {fmt(s['separation_sum'])} "
            f"(goal >= 0.5)\n"
            f"  p(right door) at a lamp: student {pct(s['student_p_right'])}, teacher "
            f"{pct(s['teacher_p_right'])}\n"
            f"  turns without a lamp (the hint's door is arbitrary there): agree "
            f"{fmt(s['gap_plain_agree'])}, disagree {fmt(s['gap_plain_disagree'])}, "
            f"separation {fmt(s['plain_separation'])}")
