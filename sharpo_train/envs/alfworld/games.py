"""Finding and validating ALFWorld games on disk (no alfworld import needed).

Layout (the official json_2.1.1 release, and what ``generator.py`` writes)::

    <root>/json_2.1.1/<split>/<task_name>/<trial>/{game.tw-pddl, traj_data.json}

``traj_data.json`` must hold ``task_type`` (one of the six ALFRED task types, see
alfworld/agents/environment/alfred_tw_env.py TASK_TYPES); ``game.tw-pddl`` is JSON with
``pddl_domain``, ``grammar``, ``pddl_problem`` and ``solvable``. Like AlfredTWEnv we skip
games marked ``"solvable": false`` and folders whose path holds "movable" or "Sliced"
(alfred_tw_env.py collect_game_files); anything malformed is an error naming its path.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from ..base import Task

log = logging.getLogger(__name__)

# ALFRED task_type -> the family name used for per-family success (paper tables)
FAMILY_BY_TASK_TYPE: dict[str, str] = {
    "pick_and_place_simple": "Pick",
    "look_at_obj_in_light": "Look",
    "pick_clean_then_place_in_recep": "Clean",
    "pick_heat_then_place_in_recep": "Heat",
    "pick_cool_then_place_in_recep": "Cool",
    "pick_two_obj_and_place": "Pick2",
}
TASK_TYPE_BY_FAMILY: dict[str, str] = {f: t for t, f in FAMILY_BY_TASK_TYPE.items()}
# The six families in the order of the paper's results tables (Pick, Look, Clean, Heat,
# Cool, Pick2): per-family tables, eval results and reports list them in this order.
FAMILIES: list[str] = ["Pick", "Look", "Clean", "Heat", "Cool", "Pick2"]

GAME_FILE = "game.tw-pddl"

# real games beside the checkout: ../shared/data/alfworld from where the command runs (the
# repo root for `make demo`), else beside the source tree (an editable install)
SHARED_CANDIDATES = [Path.cwd().parent / "shared" / "data" / "alfworld",
                     Path(__file__).resolve().parents[3].parent / "shared" / "data" / "alfworld"]


def default_games_dir(option: str = "--games") -> str:
    """$ALFWORLD_DATA, else the first of SHARED_CANDIDATES that exists; FileNotFoundError
    naming ``option`` when neither is there."""
    if os.environ.get("ALFWORLD_DATA"):
        return os.environ["ALFWORLD_DATA"]
    for cand in SHARED_CANDIDATES:
        if cand.is_dir():
            return str(cand)
    raise FileNotFoundError(f"{option}: no ALFWorld folder given and none found "
                            "(set ALFWORLD_DATA or pass --games)")
TRAJ_FILE = "traj_data.json"
RELEASE_DIR = "json_2.1.1"
_GAME_KEYS = ("pddl_domain", "grammar", "pddl_problem")


@dataclass(frozen=True)
class GameInfo:
    """What a game folder says about itself (read from traj_data.json)."""

    path: str          # the trial folder
    split: str
    task_type: str
    family: str
    pddl_params: dict


def normalize_families(families: Optional[Iterable[str]]) -> Optional[list[str]]:
    """Accept family names (any case) or ALFRED task_type names; None means all."""
    if families is None:
        return None
    if isinstance(families, str):
        families = [f for f in families.replace(",", " ").split() if f]
    out = []
    lower = {f.lower(): f for f in FAMILIES}
    for f in families:
        if not isinstance(f, str):
            raise TypeError(f"task_families: expected names, got {f!r}")
        name = lower.get(f.lower()) or FAMILY_BY_TASK_TYPE.get(f)
        if name is None:
            raise ValueError(f"task_families: unknown family {f!r}; known: {FAMILIES} "
                             f"(or task types {sorted(FAMILY_BY_TASK_TYPE)})")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError("task_families: empty list")
    return out


def _read_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{what}: missing file {path}")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what}: {path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what}: {path} must hold a JSON object")
    return data


def read_game(trial_dir: str | os.PathLike, split: str = "") -> tuple[GameInfo, bool]:
    """Validate one game folder. Returns (info, solvable). Raises FileNotFoundError or
    ValueError naming the path when the folder or its files are missing or malformed."""
    trial = Path(trial_dir)
    if not trial.is_dir():
        raise FileNotFoundError(f"game folder not found: {trial}")
    traj = _read_json(trial / TRAJ_FILE, "traj_data")
    task_type = traj.get("task_type")
    if not isinstance(task_type, str):
        raise ValueError(f"traj_data: {trial / TRAJ_FILE} has no string 'task_type'")
    if task_type not in FAMILY_BY_TASK_TYPE:
        raise ValueError(f"traj_data: {trial / TRAJ_FILE}: unknown task_type {task_type!r}; "
                         f"known: {sorted(FAMILY_BY_TASK_TYPE)}")
    params = traj.get("pddl_params", {})
    if not isinstance(params, dict):
        raise ValueError(f"traj_data: {trial / TRAJ_FILE}: 'pddl_params' must be an object")
    game = _read_json(trial / GAME_FILE, "game")
    for key in _GAME_KEYS:
        if not isinstance(game.get(key), str) or not game[key].strip():
            raise ValueError(f"game: {trial / GAME_FILE} lacks a non-empty {key!r}")
    solvable = bool(game.get("solvable", False))
    info = GameInfo(str(trial), split, task_type, FAMILY_BY_TASK_TYPE[task_type], params)
    return info, solvable


def resolve_release_dir(games_dir: str | os.PathLike | None) -> Path:
    """The json_2.1.1 folder for ``games_dir``: the folder itself, its json_2.1.1 child, its
    parent when ``games_dir`` is a split folder (json_2.1.1/<split>), or (relative paths, and
    None) the same under $ALFWORLD_DATA."""
    candidates: list[Path] = []
    if games_dir is None or str(games_dir) == "":
        data = os.environ.get("ALFWORLD_DATA")
        if not data:
            raise ValueError("games_dir: not given and ALFWORLD_DATA is not set")
        candidates.append(Path(data))
    else:
        p = Path(os.path.expandvars(os.path.expanduser(str(games_dir))))
        candidates.append(p)
        if not p.is_absolute() and os.environ.get("ALFWORLD_DATA"):
            candidates.append(Path(os.environ["ALFWORLD_DATA"]) / p)
    for c in candidates:
        if (c / RELEASE_DIR).is_dir():
            return c / RELEASE_DIR
        if c.is_dir() and c.name == RELEASE_DIR:
            return c
        if c.is_dir() and c.parent.name == RELEASE_DIR:
            return c.parent            # a split folder: json_2.1.1/<split>
    for c in candidates:
        if c.is_dir():
            raise FileNotFoundError(f"games_dir: {c} holds no {RELEASE_DIR}/ folder "
                                    f"(expected {c}/{RELEASE_DIR}/<split>/<task>/<trial>/)")
    raise FileNotFoundError(f"games_dir: folder not found: {candidates[0]}")


def split_folder(games_dir: str | os.PathLike | None) -> tuple[str | os.PathLike | None, Optional[str]]:
    """(games folder, split) for what a user passed as --games: a split folder
    ``.../json_2.1.1/valid_seen`` gives (``.../json_2.1.1``, "valid_seen"); anything else is
    returned unchanged with split None (the caller's default split applies)."""
    if games_dir is None or str(games_dir) == "":
        return games_dir, None
    p = Path(os.path.expandvars(os.path.expanduser(str(games_dir))))
    if p.is_dir() and p.parent.name == RELEASE_DIR and p.name != RELEASE_DIR:
        return str(p.parent), p.name
    return games_dir, None


def list_splits(games_dir: str | os.PathLike | None) -> list[str]:
    root = resolve_release_dir(games_dir)
    return sorted(d.name for d in root.iterdir() if d.is_dir())


def discover_games(games_dir: str | os.PathLike | None, split: str, *,
                   families: Optional[Iterable[str]] = None,
                   limit: Optional[int] = None) -> list[GameInfo]:
    """All solvable games of ``split`` under ``games_dir``, sorted by path (stable order).

    Raises FileNotFoundError when the split folder is missing, ValueError when it holds no
    game or a game folder is malformed (naming the path)."""
    if not isinstance(split, str) or not split or "/" in split or split.startswith("."):
        raise ValueError(f"split: expected a folder name, got {split!r}")
    root = resolve_release_dir(games_dir)
    split_dir = root / split
    if not split_dir.is_dir():
        have = sorted(d.name for d in root.iterdir() if d.is_dir())
        raise FileNotFoundError(f"split {split!r}: no folder {split_dir} (have: {have})")
    fams = normalize_families(families)
    games: list[GameInfo] = []
    skipped_unsolvable = 0
    for dirpath, dirnames, filenames in os.walk(split_dir):
        dirnames.sort()
        if TRAJ_FILE not in filenames and GAME_FILE not in filenames:
            continue
        if "movable" in dirpath or "Sliced" in dirpath:
            continue  # not supported by the text engine (alfred_tw_env.py)
        info, solvable = read_game(dirpath, split)
        if not solvable:
            skipped_unsolvable += 1
            continue
        if fams is not None and info.family not in fams:
            continue
        games.append(info)
    if skipped_unsolvable:
        log.info("%s: skipped %d games marked unsolvable", split_dir, skipped_unsolvable)
    if not games:
        what = f" of families {fams}" if fams else ""
        raise ValueError(f"split {split!r}: no solvable game{what} under {split_dir}")
    games.sort(key=lambda g: g.path)
    if limit is not None:
        if not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit: expected a non-negative int, got {limit!r}")
        if limit:
            games = games[:limit]
    return games


def task_of(info: GameInfo) -> Task:
    """Task id: '<split>/<task_name>/<trial>' (unique within a release)."""
    p = Path(info.path)
    tid = "/".join(x for x in (info.split, p.parent.name, p.name) if x)
    return Task(id=tid, family=info.family, source=info.path)


def task_from_folder(trial_dir: str | os.PathLike) -> Task:
    """A Task for one game folder (validated; unsolvable games are refused)."""
    info, solvable = read_game(trial_dir)
    if not solvable:
        raise ValueError(f"game: {Path(trial_dir) / GAME_FILE} is marked unsolvable")
    return task_of(info)
