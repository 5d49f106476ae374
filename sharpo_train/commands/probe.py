"""`sharpo probe-teacher (--model DIR | --run-dir RUN) [--games DIR] [--split S] [--per-family N]`:
does the teacher read its hint? For each expert turn of real ALFWorld games, the gap
(log-prob of the action with the hint minus without) of the expert's action vs a random
admissible one, and their AUC (0.5: the hint tells the teacher nothing). See
sharpo_train/probe.py."""
from __future__ import annotations

import json
import sys
from pathlib import Path

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
    p.add_argument("--history-length", type=int, default=1)
    p.add_argument("--hint-placement", default="after_task",
                   choices=["after_task", "after_observation"],
                   help="where the hint goes (as the trainer's teacher.hint_placement)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the summary here")
    p.set_defaults(func=run)


def _model_dir(args) -> str:
    if args.model:
        return args.model
    from sharpo_train.recipes.phases import latest_policy
    from sharpo_train.report.records import find_run_dir
    return str(latest_policy(find_run_dir(args.run_dir, "--run-dir")))


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


def run(args) -> int:
    import torch

    from sharpo_train.envs.alfworld.games import FAMILIES, discover_games, task_of
    from sharpo_train.model import build_policy
    from sharpo_train.probe import probe_teacher

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
        model_dir = _model_dir(args)
        torch.manual_seed(0)
        model, tok = build_policy(None, weights_from=model_dir,
                                 weights_key="--model" if args.model else "--run")
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
        Path(args.json).write_text(json.dumps(s, indent=1))
    return 0
