"""Procedural ALFWorld games in the official layout, for machines without the download.

Everything a game is made of comes from the alfworld package itself:
  * the PDDL domain ``alfworld/data/alfred.pddl`` and text grammar ``alfred.twl2``
    (alfworld.info ALFRED_PDDL_PATH / ALFRED_TWL2_PATH);
  * what each receptacle can hold (``VAL_RECEPTACLE_OBJECTS``), which objects can be
    heated / cooled / cleaned / toggled (``VAL_ACTION_OBJECTS``), which receptacles open
    (``OPENABLE_CLASS_LIST``), the movable receptacles and the room types suited to each
    task (``GOALS_VALID``) from ``alfworld/gen/constants.py``;
  * the goal of each task type and its task sentences from ``alfworld/gen/goal_library.py``.
The project adds only what the package does not say: which receptacle classes make up
each room type (``ROOM_RECEPTACLES``, after the AI2-THOR scenes ALFRED uses) and where a
desk lamp stands (``LAMP_HOLDERS``).

Each game is checked with the bundled planner (planner.solve_game: plan from the start,
replay, goal reached) and stored with ``"solvable": true`` and the plan as walkthrough.
A game depends only on (seed, index, family list, size, grammar): the same arguments give
the same files.

Grammar: ``grammar="release"`` (default) rewrites the package grammar's placement command
"move {o} to {r}" to the wording of the json_2.1.1 release games, "put {o} in/on {r}", and
drops the "help" action the release games do not have (from grammar and domain), so a
policy trained on generated games sees the same commands as on the real ones;
``grammar="package"`` keeps alfworld 0.4.2's domain and grammar as they are.

Output: ``<out>/json_2.1.1/<split>/<task_type>-<Object>-None-<Parent>-g<seed>/trial_G<seed>_<index>/``
with ``game.tw-pddl`` and ``traj_data.json`` (task_type, task_id, pddl_params,
task_desc, the planner walkthrough, and the generator arguments).
"""
from __future__ import annotations

import json
import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Union

from ...checks import check_int
from .games import GAME_FILE, RELEASE_DIR, TASK_TYPE_BY_FAMILY, TRAJ_FILE, normalize_families

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1
# Game i of a generation gets family GENERATION_ORDER[i % 6] by default. This is not a
# display order (that is games.FAMILIES): it fixes which games a seed makes, so it stays as
# it was when the shipped game sets were generated.
GENERATION_ORDER = ("Pick", "Clean", "Heat", "Cool", "Look", "Pick2")

# receptacle classes per ALFRED room type (project data; each must be a key of
# constants.VAL_RECEPTACLE_OBJECTS, checked in _constants())
ROOM_RECEPTACLES: dict[str, list[str]] = {
    "Kitchen": ["CounterTop", "Cabinet", "Drawer", "Fridge", "Microwave", "SinkBasin",
                "StoveBurner", "DiningTable", "CoffeeMachine", "Toaster", "GarbageCan", "Shelf"],
    "Bathroom": ["CounterTop", "Cabinet", "Drawer", "SinkBasin", "BathtubBasin", "Toilet",
                 "ToiletPaperHanger", "TowelHolder", "HandTowelHolder", "GarbageCan", "Shelf"],
    "Bedroom": ["Bed", "Desk", "Drawer", "Dresser", "SideTable", "Shelf", "GarbageCan",
                "Safe", "LaundryHamper", "ArmChair"],
    "LivingRoom": ["Sofa", "ArmChair", "CoffeeTable", "SideTable", "TVStand", "Drawer",
                   "Dresser", "Cabinet", "Shelf", "GarbageCan", "Ottoman", "DiningTable"],
}
# receptacles that come in several instances in a room
MULTI_INSTANCE = {"Cabinet": 3, "Drawer": 3, "Shelf": 2, "StoveBurner": 2, "SideTable": 2,
                  "CounterTop": 2}
LAMP_HOLDERS = ["Desk", "SideTable", "Dresser"]
LAMP = "DeskLamp"
# the receptacle each state-changing task needs (alfred.pddl CleanObject/HeatObject/CoolObject)
TOOL_BY_FAMILY = {"Clean": "SinkBasin", "Heat": "Microwave", "Cool": "Fridge"}
ACTION_KEY_BY_FAMILY = {"Clean": "Cleanable", "Heat": "Heatable", "Cool": "Coolable"}
# objects the generator never places (odd as loose objects in the text game)
EXCLUDED_OBJECTS = {"Box", "DeskLamp", "FloorLamp"}
# room size knob: (receptacle instances, loose objects besides the targets)
SIZES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "tiny": ((4, 5), (3, 5)),
    "small": ((6, 8), (6, 9)),
    "medium": ((10, 13), (12, 18)),
    "large": ((16, 22), (25, 35)),
}
GRAMMARS = ("release", "package")
# grammar rewrites for "release": (package text, release text, expected count)
_RELEASE_REWRITES = [
    ('template :: "move {o} to {r}";', 'template :: "put {o} in/on {r}";', 2),
    ('"rhs": "You move the {o.name} to the {r.name}."',
     '"rhs": "You put the {o.name} in/on the {r.name}."', 1),
]


def _cut_block(text: str, start_marker: str, open_ch: str, close_ch: str, where: str) -> str:
    """``text`` without the balanced block that starts at ``start_marker`` (the release
    games have no "help" action; the 0.4.2 domain and grammar end with one)."""
    if text.count(start_marker) != 1:
        raise RuntimeError(f"{where}: expected one {start_marker!r}")
    i = text.index(start_marker)
    j = text.index(open_ch, i)
    depth = 0
    for k in range(j, len(text)):
        if text[k] == open_ch:
            depth += 1
        elif text[k] == close_ch:
            depth -= 1
            if depth == 0:
                return text[:i].rstrip() + "\n" + text[k + 1:].lstrip("\n")
    raise RuntimeError(f"{where}: unbalanced block after {start_marker!r}")

_CONST: Optional[dict] = None


def _constants() -> dict:
    """The package data the generator uses (imported lazily; checked once)."""
    global _CONST
    if _CONST is None:
        from .engine import ensure_alfworld_data
        ensure_alfworld_data()
        import alfworld.info as info
        import alfworld.gen.constants as C
        import alfworld.gen.goal_library as glib
        val = {r: set(objs) for r, objs in C.VAL_RECEPTACLE_OBJECTS.items()}
        for room, receps in ROOM_RECEPTACLES.items():
            missing = [r for r in receps if r not in val]
            if missing:
                raise RuntimeError(f"alfworld constants lack receptacles {missing} ({room})")
        with open(info.ALFRED_PDDL_PATH, encoding="utf-8") as f:
            domain = f.read()
        with open(info.ALFRED_TWL2_PATH, encoding="utf-8") as f:
            grammar = f.read()
        if "UNKNOWN GOAL" not in grammar:
            raise RuntimeError(f"{info.ALFRED_TWL2_PATH}: no 'UNKNOWN GOAL' placeholder")
        release = grammar
        for old, new, count in _RELEASE_REWRITES:
            if release.count(old) != count:
                raise RuntimeError(f"{info.ALFRED_TWL2_PATH}: expected {count} x {old!r}")
            release = release.replace(old, new)
        release = _cut_block(release, "action help {", "{", "}", info.ALFRED_TWL2_PATH)
        release_domain = _cut_block(domain, "(:action help", "(", ")", info.ALFRED_PDDL_PATH)
        _CONST = {
            "val": val,
            "actions": {k: set(v) for k, v in C.VAL_ACTION_OBJECTS.items()},
            "openable": set(C.OPENABLE_CLASS_LIST),
            "movable": set(C.MOVABLE_RECEPTACLES),
            "goals_valid": {k: sorted(v) for k, v in C.GOALS_VALID.items()},
            "objects": list(C.OBJECTS),
            "receptacles": sorted(C.RECEPTACLES),
            "gdict": glib.gdict,
            "domain": {"package": domain, "release": release_domain},
            "grammar": {"package": grammar, "release": release},
        }
    return _CONST


# -- ids in ALFRED's mangled form (decoded by alfworld's Demangler) -------------------------
def _num(x: float) -> str:
    sign = "_minus_" if x < 0 else "_plus_"
    whole, frac = f"{abs(x):05.2f}".split(".")
    return f"{sign}{whole}_dot_{frac}"


def _int(i: int) -> str:
    return f"_minus_{-i}" if i < 0 else str(i)


@dataclass
class _Scene:
    rng: random.Random
    used_ids: set = field(default_factory=set)
    used_locs: set = field(default_factory=set)

    def coords(self) -> tuple[float, float, float]:
        r = self.rng
        return (round(r.uniform(-3, 3), 2), round(r.uniform(0, 2), 2), round(r.uniform(-3, 3), 2))

    def obj_id(self, cls: str, suffix: str = "") -> str:
        while True:
            x, y, z = self.coords()
            oid = f"{cls}_bar_{_num(x)}_bar_{_num(y)}_bar_{_num(z)}{suffix}"
            if oid not in self.used_ids:
                self.used_ids.add(oid)
                return oid

    def recep_id(self, cls: str) -> str:
        # basins are named after their sink/bathtub in ALFRED ids ("Sink|...|SinkBasin");
        # the Demangler turns "Sink..._bar_SinkBasin" into "sinkbasin N"
        if cls.endswith("Basin"):
            return self.obj_id(cls[:-len("Basin")], f"_bar_{cls}")
        return self.obj_id(cls)

    def loc(self) -> str:
        r = self.rng
        while True:
            key = (r.randint(-9, 9), r.randint(-9, 9), r.choice([0, 1, 2, 3]), r.choice([0, 30, 45, 60]))
            if key not in self.used_locs:
                self.used_locs.add(key)
                return "loc_bar_" + "_bar_".join(_int(k) for k in key)


@dataclass
class GameSpec:
    """What was generated (also written to traj_data.json)."""

    task_type: str
    family: str
    room: str
    object_target: str
    parent_target: str
    toggle_target: str
    task_desc: str
    problem: str
    grammar: str
    receptacles: list[str]


def _pick_target(c: dict, family: str, rooms_receps: list[str], rng: random.Random):
    """(object class, parent class) for a family given the room's receptacle classes."""
    val = c["val"]
    tool = TOOL_BY_FAMILY.get(family)
    candidates = []
    for parent in rooms_receps:
        if parent == tool or (family == "Look"):
            continue
        for obj in sorted(val[parent]):
            if "Sliced" in obj or obj in EXCLUDED_OBJECTS:
                continue
            if family in ACTION_KEY_BY_FAMILY and obj not in c["actions"][ACTION_KEY_BY_FAMILY[family]]:
                continue
            # somewhere else in the room must hold it at the start
            if not any(obj in val[r] for r in rooms_receps if r != parent and r != tool):
                continue
            candidates.append((obj, parent))
    if family == "Look":
        for r in rooms_receps:
            for obj in sorted(val[r]):
                if "Sliced" not in obj and obj not in EXCLUDED_OBJECTS and obj not in c["movable"]:
                    candidates.append((obj, ""))
        candidates = sorted(set(candidates))
    if not candidates:
        return None
    return rng.choice(candidates)


def build_game(seed: int, index: int, family: str, size: str = "small",
               grammar: str = "release", attempt: int = 0) -> Optional[GameSpec]:
    """One candidate game (not yet checked for solvability); None when the sampled room
    cannot host the family."""
    c = _constants()
    task_type = TASK_TYPE_BY_FAMILY[family]
    rng = random.Random(f"sharpo-alfworld-gen/{GENERATOR_VERSION}/{seed}/{index}/{family}/{size}/{attempt}")
    scene = _Scene(rng)
    (rmin, rmax), (omin, omax) = SIZES[size]
    n_receps = rng.randint(rmin, rmax)
    n_objects = rng.randint(omin, omax)
    room = rng.choice(c["goals_valid"][task_type])
    pool = list(ROOM_RECEPTACLES[room])
    required = []
    if family in TOOL_BY_FAMILY:
        if TOOL_BY_FAMILY[family] not in pool:
            return None
        required.append(TOOL_BY_FAMILY[family])
    if family == "Look":
        holders = [h for h in LAMP_HOLDERS if h in pool]
        if not holders:
            return None
        required.append(rng.choice(holders))
    rest = [r for r in pool if r not in required]
    rng.shuffle(rest)
    classes = required + rest[:max(0, min(len(rest), n_receps - len(required)))]
    # the target: pick among the room's classes, then make sure its parent is present
    target = _pick_target(c, family, classes, rng)
    if target is None:
        return None
    obj_cls, parent_cls = target
    # receptacle instances
    counts = {cls: 1 for cls in classes}
    spare = n_receps - len(classes)
    multi = [cls for cls in classes if cls in MULTI_INSTANCE]
    while spare > 0 and multi:
        cls = rng.choice(multi)
        if counts[cls] < MULTI_INSTANCE[cls]:
            counts[cls] += 1
            spare -= 1
        else:
            multi.remove(cls)
    receps = []   # (id, class, location)
    for cls in classes:
        for _ in range(counts[cls]):
            receps.append((scene.recep_id(cls), cls, scene.loc()))
    start_loc = scene.loc()
    val = c["val"]
    tool = TOOL_BY_FAMILY.get(family)

    objects = []  # (id, class, receptacle id)

    def place(cls: str, forbid: set) -> bool:
        options = [r for r in receps if cls in val[r[1]] and r[1] not in forbid]
        if not options:
            return False
        r = rng.choice(options)
        objects.append((scene.obj_id(cls), cls, r[0]))
        return True

    forbid = {parent_cls, tool} - {None, ""}
    n_targets = {"Pick2": rng.randint(2, 3)}.get(family, rng.randint(1, 2))
    for _ in range(n_targets):
        if not place(obj_cls, forbid):
            return None
    toggle = ""
    if family == "Look":
        toggle = LAMP
        holder = [r for r in receps if r[1] in LAMP_HOLDERS][0]
        objects.append((scene.obj_id(LAMP), LAMP, holder[0]))
    placeable = sorted({o for r in classes for o in val[r]
                        if "Sliced" not in o and o not in EXCLUDED_OBJECTS and o != obj_cls})
    for _ in range(n_objects):
        place(rng.choice(placeable), set())

    # task sentence from the package's goal library (alfworld/agents/utils/misc.py
    # get_templated_task_desc does the same with the traj_data pddl_params)
    entry = c["gdict"][task_type]
    desc = rng.choice(entry["templates"]).format(obj=obj_cls.lower(), recep=parent_cls.lower(),
                                                 toggle=toggle.lower(), mrecep="")
    goal = entry["pddl"].format(obj=obj_cls, recep=parent_cls, toggle=toggle, mrecep="")
    goal = goal.replace("#", "-")
    problem = _problem_text(f"gen_{seed}_{index}", c, receps, objects, start_loc, goal)
    grammar_text = c["grammar"][grammar].replace("UNKNOWN GOAL", desc)
    return GameSpec(task_type, family, room, obj_cls, parent_cls, toggle, desc, problem,
                    grammar_text, [r[1] for r in receps])


def _problem_text(name: str, c: dict, receps, objects, start_loc: str, goal: str) -> str:
    val, actions = c["val"], c["actions"]
    # as in the release problems: static receptacle classes are rtypes, every other class
    # (movable receptacles included) an otype; alfred.pddl names SinkBasin/Microwave/Fridge
    # rtypes and Knife/ButterKnife otypes, so all are declared
    rtypes = sorted((set(c["receptacles"]) - c["movable"]) | {r[1] for r in receps})
    otypes = sorted((set(c["objects"]) - set(rtypes)) | {o[1] for o in objects})
    locs = sorted({r[2] for r in receps} | {start_loc})
    decl = ["agent1 - agent"]
    decl += [f"{t}Type - otype" for t in otypes]
    decl += [f"{t}Type - rtype" for t in rtypes]
    decl += [f"{o[0]} - object" for o in objects]
    decl += [f"{r[0]} - receptacle" for r in receps]
    decl += [f"{loc} - location" for loc in locs]
    loc_of = {r[0]: r[2] for r in receps}
    init = [f"(atLocation agent1 {start_loc})"]
    for rid, cls, loc in receps:
        init.append(f"(receptacleType {rid} {cls}Type)")
        init.append(f"(receptacleAtLocation {rid} {loc})")
        if cls in c["openable"]:
            init.append(f"(openable {rid})")
    for oid, cls, rid in objects:
        init.append(f"(objectType {oid} {cls}Type)")
        init.append(f"(inReceptacle {oid} {rid})")
        init.append(f"(objectAtLocation {oid} {loc_of[rid]})")
        if cls == LAMP:
            init.append(f"(toggleable {oid})")
            continue
        init.append(f"(pickupable {oid})")
        for key, pred in (("Cleanable", "cleanable"), ("Heatable", "heatable"),
                          ("Coolable", "coolable"), ("Sliceable", "sliceable")):
            if cls in actions[key]:
                init.append(f"({pred} {oid})")
        if cls in c["movable"]:
            init.append(f"(isReceptacleObject {oid})")
    present_r = sorted({r[1] for r in receps})
    present_o = sorted({o[1] for o in objects})
    for rt in present_r:
        for ot in present_o:
            if ot in val[rt]:
                init.append(f"(canContain {rt}Type {ot}Type)")
    body = "\n        ".join(decl)
    facts = "\n        ".join(init)
    # the goal library's goal text ends with the closing parenthesis of the problem
    return (f"(define (problem {name})\n(:domain alfred)\n(:objects\n        {body}\n        )\n"
            f"(:init\n        {facts}\n        )\n{goal}\n")


@dataclass
class GeneratedGame:
    path: str
    family: str
    plan: list[str]
    attempts: int


def _task_dir_name(spec: GameSpec, seed: int) -> str:
    return f"{spec.task_type}-{spec.object_target}-None-{spec.parent_target or spec.toggle_target}-g{seed}"


def generate_one(out_dir: Union[str, os.PathLike], split: str, seed: int, index: int, family: str,
                 size: str = "small", grammar: str = "release", max_attempts: int = 30,
                 max_plan_steps: int = 40) -> GeneratedGame:
    """Build candidates for (seed, index, family) until the planner solves one; write it."""
    from .planner import solve_game
    c = _constants()
    for attempt in range(max_attempts):
        spec = build_game(seed, index, family, size, grammar, attempt)
        if spec is None:
            continue
        game = {"pddl_domain": c["domain"][grammar], "grammar": spec.grammar,
                "pddl_problem": spec.problem, "solvable": True}
        plan = solve_game(game, verify=True, max_plan_steps=max_plan_steps)
        if plan is None:
            continue
        game["walkthrough"] = plan
        trial = (Path(out_dir) / RELEASE_DIR / split / _task_dir_name(spec, seed)
                 / f"trial_G{seed}_{index:05d}")
        trial.mkdir(parents=True, exist_ok=True)
        traj = {
            "task_type": spec.task_type,
            "task_id": trial.name,
            "pddl_params": {"object_target": spec.object_target, "parent_target": spec.parent_target,
                            "toggle_target": spec.toggle_target, "mrecep_target": "",
                            "object_sliced": False},
            "task_desc": spec.task_desc,
            "turk_annotations": {"anns": []},
            "plan": {"walkthrough": plan},
            "scene": {"room": spec.room, "receptacles": spec.receptacles},
            "generator": {"name": "sharpo_train.envs.alfworld.generator",
                          "version": GENERATOR_VERSION, "seed": seed, "index": index,
                          "family": family, "size": size, "grammar": grammar, "attempt": attempt},
        }
        _write_json(trial / GAME_FILE, game)
        _write_json(trial / TRAJ_FILE, traj)
        return GeneratedGame(str(trial), family, plan, attempt + 1)
    raise RuntimeError(f"generator: no solvable {family} game for seed={seed} index={index} "
                       f"size={size} after {max_attempts} attempts")


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _job(args) -> GeneratedGame:
    return generate_one(*args)


def generate_games(out_dir: Union[str, os.PathLike], n: int, seed: int = 0, *,
                   split: str = "train", families: Optional[Iterable[str]] = None,
                   size: str = "small", grammar: str = "release", workers: int = 1,
                   start_index: int = 0) -> list[GeneratedGame]:
    """Generate ``n`` solvable games into ``out_dir/json_2.1.1/<split>/``.

    Game i (i = start_index..start_index+n-1) has family ``families[i % len(families)]``
    (all six by default, in GENERATION_ORDER), so every family appears once n >= 6.
    ``workers`` > 1 builds games in that many processes (same output)."""
    check_int(n, "n", 1)
    check_int(seed, "seed", 0)
    if size not in SIZES:
        raise ValueError(f"size: expected one of {sorted(SIZES)}, got {size!r}")
    if grammar not in GRAMMARS:
        raise ValueError(f"grammar: expected one of {GRAMMARS}, got {grammar!r}")
    if not isinstance(split, str) or not split or "/" in split or split.startswith("."):
        raise ValueError(f"split: expected a folder name, got {split!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected an int >= 1, got {workers!r}")
    fams = normalize_families(families) or list(GENERATION_ORDER)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir: {out} exists and is not a folder")
    jobs = [(str(out), split, seed, i, fams[i % len(fams)], size, grammar)
            for i in range(start_index, start_index + n)]
    _constants()
    if workers == 1 or n == 1:
        return [_job(j) for j in jobs]
    import multiprocessing as mp
    with mp.get_context("spawn").Pool(min(workers, n)) as p:
        return p.map(_job, jobs, chunksize=1)


def generate_splits(out_dir: Union[str, os.PathLike], *, n_train: int = 32, n_eval: int = 12,
                    seed: int = 0, size: str = "small", grammar: str = "release",
                    families: Optional[Iterable[str]] = None, workers: int = 1,
                    train_split: str = "train", eval_split: str = "valid_seen") -> dict:
    """A train split and an eval split (different games: eval uses seed + 1)."""
    t0 = time.perf_counter()
    train = generate_games(out_dir, n_train, seed, split=train_split, families=families,
                           size=size, grammar=grammar, workers=workers)
    evals = []
    if eval_split and n_eval:
        evals = generate_games(out_dir, n_eval, seed + 1, split=eval_split, families=families,
                               size=size, grammar=grammar, workers=workers)
    log.info("generated %d+%d games in %.1f s", len(train), len(evals), time.perf_counter() - t0)
    return {"train": train, "eval": evals}
