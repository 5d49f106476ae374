"""Expert demonstrations for a supervised warm start, in the trainer's per-turn format.

Output: JSONL, one record per agent turn of a successful expert episode (verl-agent's
per-turn layout: the prompt already carries the recent history)::

    {"task_id": "train/pick_and_place_simple-Mug-None-Cabinet-g0/trial_G0_00000",
     "family": "Pick", "step": 0, "num_steps": 4, "won": true, "expert": "planner",
     "messages": [
        {"role": "user", "content": <prompts.render_turn_prompt(...) for this turn>},
        {"role": "assistant", "content": "<think>...</think><action>go to countertop 1</action>"}]}

There is no system message: the user message holds the whole instruction. ``step``
counts from 0. Only episodes the expert wins are written; every action is the command the
expert sent to the engine, and the <think> text is made from the plan itself (the current
command and the next one), so it never states anything the plan does not contain.

Experts: "planner" (default) plays the planner's plan from the start -- the game's stored
walkthrough if it has one (generated games), else planner.solve_game; "handcoded"
plays alfworld's handcoded agent through experts.HandcodedExpert.
"""
from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from typing import Iterable, Optional

from ...hint import PLACEMENT_AFTER_TASK
from ..base import Task
from ..demo_files import check_out_path, open_out, write_records
from ..spec import ProbeHooks
from .games import FAMILIES, GAME_FILE, default_games_dir, discover_games, task_of
from .prompts import DEFAULT_HISTORY_LENGTH, format_response, render_turn_prompt, task_sentence

log = logging.getLogger(__name__)

_CMD_PATTERNS = [
    ("goto", re.compile(r"^go to (?P<r>.+)$")),
    ("open", re.compile(r"^open (?P<r>.+)$")),
    ("close", re.compile(r"^close (?P<r>.+)$")),
    ("take", re.compile(r"^take (?P<o>.+?) from (?P<r>.+)$")),
    ("put", re.compile(r"^(?:put (?P<o>.+?) in/on|move (?P<o2>.+?) to) (?P<r>.+)$")),
    ("heat", re.compile(r"^heat (?P<o>.+?) with (?P<r>.+)$")),
    ("cool", re.compile(r"^cool (?P<o>.+?) with (?P<r>.+)$")),
    ("clean", re.compile(r"^clean (?P<o>.+?) with (?P<r>.+)$")),
    ("use", re.compile(r"^use (?P<o>.+)$")),
    ("examine", re.compile(r"^examine (?P<o>.+)$")),
]
_STATE_WORD = {"heat": "hot", "cool": "cool", "clean": "clean"}


def parse_command(cmd: Optional[str]) -> tuple[str, dict]:
    """(kind, parts) for an ALFWorld command; kind "other" when unknown."""
    for kind, rx in _CMD_PATTERNS:
        m = rx.match(cmd or "")
        if m:
            parts = {k: v for k, v in m.groupdict().items() if v}
            if "o2" in parts:
                parts["o"] = parts.pop("o2")
            return kind, parts
    return "other", {}


def _cls(name: str) -> str:
    """'mug 1' -> 'mug'."""
    return re.sub(r"\s+\d+$", "", name)


def explain_step(command: str, next_command: Optional[str] = None, *, first: bool = False,
                 task_text: str = "", last: bool = False) -> str:
    """A short reasoning text for ``command`` built only from it and the next command."""
    kind, p = parse_command(command)
    nkind, np_ = parse_command(next_command) if next_command else ("none", {})
    if kind == "goto":
        r = p["r"]
        if nkind == "take":
            text = f"I need a {_cls(np_['o'])}. I will go to the {r} to get one."
        elif nkind == "open":
            text = f"I will go to the {r} and open it."
        elif nkind in _STATE_WORD:
            text = f"The {np_['o']} has to be {_STATE_WORD[nkind]}, so I take it to the {r}."
        elif nkind == "put":
            text = f"I am carrying the {np_['o']}; I will bring it to the {r}."
        elif nkind == "use":
            text = f"I will go to the {r}, where the {np_['o']} is."
        else:
            text = f"I will go to the {r}."
    elif kind == "open":
        if nkind == "take":
            text = f"The {p['r']} is closed. I open it to reach the {_cls(np_['o'])}."
        elif nkind == "put":
            text = f"The {p['r']} is closed. I open it so I can put the {np_['o']} inside."
        else:
            text = f"I open the {p['r']}."
    elif kind == "take":
        text = f"There is a {p['o']} on the {p['r']}. I pick it up."
    elif kind in _STATE_WORD:
        verb = kind
        text = f"I {verb} the {p['o']} with the {p['r']} so that it is {_STATE_WORD[kind]}."
    elif kind == "put":
        text = f"I put the {p['o']} in/on the {p['r']}."
    elif kind == "use":
        text = f"I turn on the {p['o']} to look at what I am holding under its light."
    elif kind == "close":
        text = f"I close the {p['r']}."
    elif kind == "examine":
        text = f"I examine the {p['o']}."
    else:
        text = f"I will {command}."
    if last:
        text += " That should complete the task."
    if first and task_text:
        goal = task_sentence(task_text)[len("Your task is to: "):].rstrip(".")
        text = f"My task is to {goal}. " + text
    return text


@dataclass
class DemoStats:
    games: int = 0
    won: int = 0
    turns: int = 0
    failed: int = 0


def _planner_plan(task: Task) -> Optional[list[str]]:
    with open(os.path.join(task.source, GAME_FILE), encoding="utf-8") as f:
        game = json.load(f)
    plan = game.get("walkthrough")
    if isinstance(plan, list) and plan and all(isinstance(c, str) for c in plan):
        return plan
    from .planner import solve_game
    return solve_game(game, verify=False)


def demo_episode(task: Task, *, expert: str = "planner", max_steps: int = 50,
                 history_length: int = DEFAULT_HISTORY_LENGTH, seed: Optional[int] = 0) -> list[dict]:
    """The per-turn records of one expert episode ([] when the expert does not win)."""
    from .engine import AlfWorldEnv
    if expert == "planner":
        plan = _planner_plan(task)
        if not plan:
            return []
        env = AlfWorldEnv(max_steps=max_steps)
    elif expert == "handcoded":
        plan = None
        env = AlfWorldEnv(max_steps=max_steps, expert="handcoded", seed=seed)
    else:
        raise ValueError(f"expert: expected 'planner' or 'handcoded', got {expert!r}")
    try:
        obs = env.reset(task)
        history: list[tuple[str, str]] = []
        turns = []
        current, admissible, won, k = obs.text, obs.admissible_actions, False, 0
        while k < max_steps:
            action = plan[k] if plan is not None else env.expert_action()
            if action is None or (plan is not None and k >= len(plan)):
                break
            nxt = plan[k + 1] if plan is not None and k + 1 < len(plan) else None
            think = explain_step(action, nxt, first=(k == 0), task_text=obs.task_text,
                                 last=(plan is not None and k == len(plan) - 1))
            prompt = render_turn_prompt(obs.task_text, history, current, admissible, history_length)
            turns.append({"prompt": prompt, "response": format_response(think, action),
                          "action": action, "admissible": list(admissible)})
            res = env.step(action)
            turns[-1]["observation_after"] = res.observation.text
            history.append((current, action))
            current, admissible = res.observation.text, res.observation.admissible_actions
            k += 1
            if res.done:
                won = bool(res.info.get("won"))
                break
            if plan is not None and k >= len(plan):
                break
    finally:
        env.close()
    if not won:
        return []
    n = len(turns)
    return [{"task_id": task.id, "family": task.family, "step": i, "num_steps": n, "won": True,
             "expert": expert, "action": t["action"], "admissible": t["admissible"],
             "observation_after": t["observation_after"],
             "messages": [{"role": "user", "content": t["prompt"]},
                          {"role": "assistant", "content": t["response"]}]}
            for i, t in enumerate(turns)]


def _episode_job(args):
    task, kwargs = args
    try:
        return task, demo_episode(task, **kwargs), None
    except Exception as exc:  # one bad game must not stop the others
        return task, [], repr(exc)


def write_demos(games_dir, split: str, out_path: str, *, families: Optional[Iterable[str]] = None,
                limit: Optional[int] = None, expert: str = "planner", max_steps: int = 50,
                history_length: int = DEFAULT_HISTORY_LENGTH, workers: int = 1,
                seed: Optional[int] = 0) -> DemoStats:
    """Write the demonstrations of every game of ``split`` (optionally filtered/capped) to
    ``out_path`` (JSONL). Games the expert fails are counted and skipped."""
    check_out_path(out_path)
    tasks = [task_of(g) for g in discover_games(games_dir, split, families=families, limit=limit)]
    kwargs = {"expert": expert, "max_steps": max_steps, "history_length": history_length,
              "seed": seed}
    jobs = [(t, kwargs) for t in tasks]
    stats = DemoStats()
    if workers > 1 and len(jobs) > 1:
        import multiprocessing as mp
        with mp.get_context("spawn").Pool(min(workers, len(jobs))) as p:
            results = p.map(_episode_job, jobs, chunksize=1)
    else:
        results = [_episode_job(j) for j in jobs]
    with open_out(out_path) as f:
        for task, records, err in results:
            stats.games += 1
            if err:
                log.warning("demos: %s failed: %s", task.id, err)
                stats.failed += 1
                continue
            if records:
                stats.won += 1
                stats.turns += write_records(f, records)
    return stats


def _probe_tasks(options, env_config: dict) -> tuple[list, dict]:
    """`sharpo probe-teacher` on ALFWorld: ``--per-family`` games of each family of ``--split``
    in ``--games`` (default: $ALFWORLD_DATA, else ../shared/data/alfworld)."""
    if options.per_family < 1:
        raise ValueError(f"--per-family: expected >= 1, got {options.per_family}")
    games_dir = options.games or default_games_dir()
    tasks = []
    for fam in FAMILIES:
        try:
            tasks += [task_of(g) for g in discover_games(games_dir, options.split, families=[fam],
                                                         limit=options.per_family)]
        except ValueError:
            continue        # this split has no game of that family
    return tasks, {"games_dir": str(games_dir), "split": options.split}


def _probe_records(task: Task, *, max_steps: int = 50,
                   history_length: int = DEFAULT_HISTORY_LENGTH) -> list[dict]:
    return demo_episode(task, expert="planner", max_steps=max_steps,
                        history_length=history_length)


def _probe_reply(action: str, k: int) -> str:
    return format_response(explain_step(action, None, first=(k == 0)), action)


# the teacher probe's hooks (analysis/teacher_probe.py; EnvSpec.probe): real games, the
# planner's episode of each, and a reply for any action in the expert's style
PROBE = ProbeHooks(tasks=_probe_tasks, expert_records=_probe_records, reply=_probe_reply,
                   history_length=1, placement=PLACEMENT_AFTER_TASK)
