"""`sharpo alfworld play|generate|demos`: the ALFWorld environment from the command line.

  sharpo alfworld play --games DIR --agent expert|random [--n N] [--json FILE]
  sharpo alfworld generate --out DIR --n N --seed S [--families Pick Heat ...] [--size small]
  sharpo alfworld demos --games DIR --out FILE.jsonl [--expert planner|handcoded]
"""
from __future__ import annotations

import os
import time

from ..command_args import int_in, non_negative, positive, run_logged
from .settings import MAX_GENERATED


def _pick_split(games: str, split: str | None) -> str:
    """--split, else the split folder --games names (json_2.1.1/<split>), else the first of
    valid_seen, valid_unseen, valid_train, train present."""
    from sharpo_train.envs.alfworld.games import list_splits, split_folder
    _, named = split_folder(games)
    if named and split and split != named:
        raise ValueError(f"--split {split}: --games names the split folder {named!r}")
    if split or named:
        return split or named
    splits = list_splits(games)
    for pref in ("valid_seen", "valid_unseen", "valid_train", "train"):
        if pref in splits:
            return pref
    if len(splits) == 1:
        return splits[0]
    raise ValueError(f"--split: choose one of {splits} under {games}")


def _set_data_env(games: str) -> None:
    from sharpo_train.envs.alfworld.games import resolve_release_dir
    os.environ.setdefault("ALFWORLD_DATA", str(resolve_release_dir(games).parent))


def cmd_play(args) -> int:
    from sharpo_train.envs.alfworld import make_pool
    from sharpo_train.envs.alfworld.play import (expert_agent, format_table, play,
                                                     random_agent, records_to_json, success_table)
    from sharpo_train.envs.alfworld.games import discover_games, task_of
    from sharpo_train.outputs import PLAY_RESULT, check_out_file, write_out_json
    if args.json:
        check_out_file(args.json, "--json", args.force, PLAY_RESULT)
    _set_data_env(args.games)
    split = _pick_split(args.games, args.split)
    tasks = [task_of(g) for g in discover_games(args.games, split, families=args.families)]
    if args.n:
        from sharpo_train.envs.base import balanced_tasks
        tasks = balanced_tasks(tasks, args.n, f"play/{args.seed}")   # spread over families
    expert = args.expert if args.agent == "expert" else None
    act = expert_agent if args.agent == "expert" else random_agent(args.seed)
    pool = make_pool(args.workers, max_steps=args.max_steps, expert=expert, seed=args.seed)
    t0 = time.perf_counter()
    try:
        records = play(pool, tasks, act, batch_size=args.batch_size, keep_actions=bool(args.json))
    finally:
        pool.close()
    elapsed = time.perf_counter() - t0
    table = success_table(records)
    print(f"{args.agent} agent on {len(tasks)} games of {split} ({args.games}), "
          f"max_steps={args.max_steps}, {elapsed:.1f} s")
    print(format_table(table))
    if args.json:
        write_out_json(args.json, {
            "games": os.path.abspath(args.games), "split": split, "agent": args.agent,
            "expert": expert, "max_steps": args.max_steps, "seconds": elapsed,
            "summary": table, "episodes": records_to_json(records)})
    return 0


def cmd_generate(args) -> int:
    from sharpo_train.envs.alfworld.generator import generate_games
    from sharpo_train.outputs import check_out_folder
    check_out_folder(args.out, "--out", args.force, lambda p: (p / "json_2.1.1").is_dir(),
                     "an ALFWorld games folder (no json_2.1.1/)")
    t0 = time.perf_counter()
    games = generate_games(args.out, args.n, args.seed, split=args.split, families=args.families,
                           size=args.size, grammar=args.grammar, workers=args.workers,
                           start_index=args.start_index)
    dt = time.perf_counter() - t0
    fams: dict[str, int] = {}
    for g in games:
        fams[g.family] = fams.get(g.family, 0) + 1
    steps = sum(len(g.plan) for g in games) / len(games)
    print(f"wrote {len(games)} games to {os.path.join(args.out, 'json_2.1.1', args.split)} "
          f"in {dt:.1f} s ({60 * len(games) / dt:.0f} games/min); families {fams}; "
          f"mean plan length {steps:.1f}")
    return 0


def cmd_demos(args) -> int:
    from sharpo_train.envs.alfworld.demos import write_demos
    from sharpo_train.outputs import DEMOS_FILE, check_out_file
    check_out_file(args.out, "--out", args.force, DEMOS_FILE)
    _set_data_env(args.games)
    split = _pick_split(args.games, args.split)
    t0 = time.perf_counter()
    stats = write_demos(args.games, split, args.out, families=args.families, limit=args.n,
                        expert=args.expert, max_steps=args.max_steps,
                        history_length=args.history_length, workers=args.workers, seed=args.seed)
    print(f"{args.out}: {stats.turns} turns from {stats.won}/{stats.games} games won by the "
          f"{args.expert} expert ({stats.failed} failed to run) in {time.perf_counter() - t0:.1f} s")
    return 0 if stats.won else 1


def register(subparsers) -> None:
    p = subparsers.add_parser("alfworld", help="ALFWorld games: play, generate, demonstrations")
    sub = p.add_subparsers(dest="alfworld_command", required=True)
    families_help = "task families to keep (Pick Clean Heat Cool Look Pick2); default all"

    play = sub.add_parser("play", help="play games with the expert or a random agent")
    play.add_argument("--games", required=True, help="folder holding json_2.1.1/ (or that folder)")
    play.add_argument("--split", default=None, help="default: valid_seen if present")
    play.add_argument("--agent", choices=["expert", "random"], required=True)
    play.add_argument("--expert", choices=["planner", "handcoded"], default="planner")
    play.add_argument("--n", type=non_negative, default=0, help="games to play (0 = all), "
                      "spread over families")
    play.add_argument("--families", nargs="+", default=None, help=families_help)
    play.add_argument("--max-steps", type=positive, default=50)
    play.add_argument("--workers", type=non_negative, default=2)
    play.add_argument("--batch-size", type=positive, default=16)
    play.add_argument("--seed", type=int, default=0)
    play.add_argument("--json", default=None, help="write the summary and episodes here")
    play.add_argument("--force", action="store_true", help="replace an existing --json file")
    play.add_argument("-v", "--verbose", action="store_true")
    play.set_defaults(func=run_logged(cmd_play))

    gen = sub.add_parser("generate", help="write planner-checked games in the official layout")
    gen.add_argument("--out", required=True, help="games folder: new, empty, or one holding "
                     "json_2.1.1/ (another folder needs --force)")
    gen.add_argument("--force", action="store_true", help="write into a non-empty --out that "
                     "holds no json_2.1.1/")
    gen.add_argument("--n", type=int_in(1, MAX_GENERATED), required=True,
                     help=f"games to generate (at most {MAX_GENERATED:,}, as env.generate.n_train)")
    gen.add_argument("--seed", type=non_negative, default=0)
    gen.add_argument("--split", default="train")
    gen.add_argument("--families", nargs="+", default=None, help=families_help)
    gen.add_argument("--size", choices=["tiny", "small", "medium", "large"], default="small")
    gen.add_argument("--grammar", choices=["release", "package"], default="release",
                     help="release: 'put X in/on Y' like json_2.1.1; package: alfworld 0.4.2's 'move X to Y'")
    gen.add_argument("--workers", type=positive, default=1)
    gen.add_argument("--start-index", type=non_negative, default=0)
    gen.add_argument("-v", "--verbose", action="store_true")
    gen.set_defaults(func=run_logged(cmd_generate))

    demos = sub.add_parser("demos", help="write expert demonstrations (JSONL, per turn)")
    demos.add_argument("--games", required=True)
    demos.add_argument("--split", default=None)
    demos.add_argument("--out", required=True)
    demos.add_argument("--force", action="store_true", help="replace an existing --out file")
    demos.add_argument("--expert", choices=["planner", "handcoded"], default="planner")
    demos.add_argument("--n", type=non_negative, default=None, help="first N games (default all)")
    demos.add_argument("--families", nargs="+", default=None, help=families_help)
    demos.add_argument("--max-steps", type=positive, default=50)
    demos.add_argument("--history-length", type=non_negative, default=2)
    demos.add_argument("--workers", type=positive, default=1)
    demos.add_argument("--seed", type=int, default=0)
    demos.add_argument("-v", "--verbose", action="store_true")
    demos.set_defaults(func=run_logged(cmd_demos))
