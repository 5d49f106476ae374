"""`sharpo webshop play|demos`: the WebShop environment from the command line.

  sharpo webshop play --agent expert|random [--n N] [--split test] [--json FILE]
  sharpo webshop demos --out FILE.jsonl [--n N] [--split train]

Data: --data DIR, else $WEBSHOP_DATA, else ../shared/data/webshop.
"""
from __future__ import annotations

import time

from ..command_args import non_negative, positive, run_logged


def cmd_play(args) -> int:
    from sharpo_train.outputs import check_out_file, write_out_json
    if args.json:
        check_out_file(args.json, "--json", args.force)
    from sharpo_train.envs.webshop.agents import play, records_to_json, summary
    from sharpo_train.envs.webshop.engine import WebShopEnv, get_world
    world = get_world(args.data)
    tasks = world.tasks(args.split, args.n or None)
    env = WebShopEnv(world, max_steps=args.max_steps)
    t0 = time.perf_counter()
    records = play(env, tasks, args.agent, seed=args.seed, keep_actions=bool(args.json))
    elapsed = time.perf_counter() - t0
    table = summary(records)
    print(f"{args.agent} agent on {len(tasks)} goals of {args.split} ({world.catalogue.data_dir}), "
          f"max_steps={args.max_steps}, {elapsed:.1f} s")
    print(f"{'family':<12} {'success':>8} {'reward':>7} {'episodes':>9}")
    for fam, row in table["per_family"].items():
        print(f"{fam:<12} {100 * row['success']:>7.1f}% {row['mean_reward']:>7.3f} {row['episodes']:>9}")
    print(f"{'All':<12} {100 * table['success']:>7.1f}% {table['mean_reward']:>7.3f} {table['episodes']:>9}")
    print(f"success rate {table['success']:.3f}, mean reward {table['mean_reward']:.3f}")
    if args.json:
        write_out_json(args.json, {
            "data": str(world.catalogue.data_dir), "split": args.split, "agent": args.agent,
            "max_steps": args.max_steps, "seconds": elapsed, "summary": table,
            "episodes": records_to_json(records)})
    return 0


def cmd_demos(args) -> int:
    from sharpo_train.envs.webshop.demos import write_demos
    from sharpo_train.outputs import check_out_file
    check_out_file(args.out, "--out", args.force)
    t0 = time.perf_counter()
    stats = write_demos(args.out, split=args.split, limit=args.n or None, data_dir=args.data,
                        max_steps=args.max_steps, history_length=args.history_length)
    print(f"{args.out}: {stats.turns} turns from {stats.won}/{stats.episodes} goals won by the "
          f"expert in {time.perf_counter() - t0:.1f} s")
    return 0 if stats.won else 1


def register(subparsers) -> None:
    p = subparsers.add_parser("webshop", help="WebShop: play with the expert or a random agent, demonstrations")
    sub = p.add_subparsers(dest="webshop_command", required=True)
    splits = ["test", "eval", "train", "all", "human"]

    play = sub.add_parser("play", help="play goals with the expert or a random agent")
    play.add_argument("--agent", choices=["expert", "random"], required=True)
    play.add_argument("--split", choices=splits, default="test")
    play.add_argument("--n", type=non_negative, default=0, help="first N goals (0 = all)")
    play.add_argument("--data", default=None, help="WebShop data folder")
    play.add_argument("--max-steps", type=positive, default=15)
    play.add_argument("--seed", type=int, default=0)
    play.add_argument("--json", default=None, help="write the summary and episodes here")
    play.add_argument("--force", action="store_true", help="replace an existing --json file")
    play.add_argument("-v", "--verbose", action="store_true")
    play.set_defaults(func=run_logged(cmd_play))

    demos = sub.add_parser("demos", help="write expert demonstrations (JSONL, per turn)")
    demos.add_argument("--out", required=True)
    demos.add_argument("--force", action="store_true", help="replace an existing --out file")
    demos.add_argument("--n", type=non_negative, default=0, help="first N goals (0 = all)")
    demos.add_argument("--split", choices=splits, default="train")
    demos.add_argument("--data", default=None)
    demos.add_argument("--max-steps", type=positive, default=15)
    demos.add_argument("--history-length", type=non_negative, default=2)
    demos.add_argument("-v", "--verbose", action="store_true")
    demos.set_defaults(func=run_logged(cmd_demos))
