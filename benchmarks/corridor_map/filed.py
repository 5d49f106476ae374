"""The filed results of the map, read and checked before a number of them is reported
(RESULTS/<cell>/warm.json and per RL run <slug>-seed<k>/{unit.json, eval.json,
metrics.jsonl}; runner.py writes them, stats.py reads them only through here).

Every file goes through benchmarks/_inputs.py (a regular UTF-8 file of at most 256 MiB,
JSON nested no deeper than sharpo reads: a folder, a fifo or a missing file is one line,
never a traceback or a hang). A file that belongs elsewhere is refused, never reported:

- ``unit.json`` names the cell, arm and seed of its folder (``<cell>/<slug>-seed<k>``),
  and holds its own copy of the evaluation, which must equal the ``eval.json`` beside it
  (an ``eval.json`` copied in from another cell or seed differs from it);
- ``warm.json`` names the cell of its folder;
- every success rate (the overall one and each task's) is a finite number in [0, 1], and
  ``per_task`` holds at least one task; seconds are finite and >= 0.

Errors are ``InputError`` (a ValueError) naming the file and the field: map.py prints
them as one line, exit 2.
"""
from __future__ import annotations

from pathlib import Path

from _inputs import InputError, finite_number, read_json

from .grid import UNIT_FILE, WARM_FILE, Cell, arm_slug, parse_cell


def rate(x, where: str) -> float:
    """``x`` as a success rate: a finite number in [0, 1] (InputError naming ``where``)."""
    x = finite_number(x, where)
    if not 0.0 <= x <= 1.0:
        raise InputError(f"{where}: a success rate must lie in [0, 1], got {x!r}")
    return x


def _object(path: Path, what: str) -> dict:
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object ({what}), got {type(data).__name__}")
    return data


def _same_cell(value, cell: Cell, where: str) -> None:
    try:
        named = parse_cell(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {value!r:.80} is not a cell") from None
    if named != cell:
        raise InputError(f"{where}: names the cell {named.name}, but lies in {cell.name}'s "
                         f"folder (a file of another cell; refused)")


def check_eval(ev, where: str) -> dict:
    """An evaluation result (eval.json): ``success`` a rate, ``per_task`` a non-empty
    {task: rate}. Returns {"held", "per_task"}."""
    if not isinstance(ev, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(ev).__name__}")
    held = rate(ev.get("success"), f"{where}: success")
    tasks = ev.get("per_task")
    if not isinstance(tasks, dict) or not tasks:
        raise InputError(f"{where}: per_task must hold each task's rate, got {tasks!r:.60}")
    return {"held": held,
            "per_task": {str(t): rate(x, f"{where}: per_task[{t!r:.40}]") for t, x in tasks.items()}}


def read_warm(folder: Path, cell: Cell) -> dict:
    """The checked warm.json of ``cell``'s results folder."""
    path = Path(folder) / WARM_FILE
    warm = _object(path, "a warm start's record")
    _same_cell(warm.get("cell"), cell, f"{path}: cell")
    ev = warm.get("eval")
    if not isinstance(ev, dict):
        raise InputError(f"{path}: eval must be the warm start's evaluation, got {ev!r:.60}")
    rate(ev.get("success"), f"{path}: eval.success")
    rate(warm.get("random_agent"), f"{path}: random_agent")
    return warm


def read_unit(folder: Path, cell: Cell, arm: str, seed: int) -> dict:
    """The checked record of one RL run (``folder``: RESULTS/<cell>/<slug>-seed<k>):
    {"held", "per_task", "seconds"} (its metrics.jsonl: stats.run_rows)."""
    folder = Path(folder)
    path = folder / UNIT_FILE
    unit = _object(path, "an RL run's record")
    _same_cell(unit.get("cell"), cell, f"{path}: cell")
    if unit.get("arm") != arm:
        raise InputError(f"{path}: arm is {unit.get('arm')!r:.40}, but lies in the folder of "
                         f"{arm} ({folder.name}; refused)")
    if "slug" in unit and unit["slug"] != arm_slug(arm):
        raise InputError(f"{path}: slug is {unit['slug']!r:.40}, the folder's is {arm_slug(arm)}")
    if type(unit.get("seed")) is not int or unit["seed"] != seed:
        raise InputError(f"{path}: seed is {unit.get('seed')!r:.40}, but lies in the folder of "
                         f"seed {seed} ({folder.name}; refused)")
    ev_path = folder / "eval.json"
    ev = read_json(ev_path, "an RL run's evaluation")
    if unit.get("eval") != ev:
        raise InputError(f"{ev_path}: differs from the evaluation its {UNIT_FILE} holds (an "
                         f"eval.json of another run; refused)")
    out = check_eval(ev, str(ev_path))
    secs = unit.get("seconds")
    out["seconds"] = None if secs is None else finite_number(secs, f"{path}: seconds")
    if out["seconds"] is not None and out["seconds"] < 0:
        raise InputError(f"{path}: seconds is {secs!r}, below 0")
    return out


def metric_rows(text: str, where: str) -> list:
    """The JSON objects of a metrics.jsonl text (sharpo's own rule, ``io.jsonl_rows``: a
    torn last line, as a killed run leaves it, is dropped; any other line that is not a
    JSON object is an InputError)."""
    from sharpo_train.errors import UsageError
    from sharpo_train.io import jsonl_rows
    try:
        return jsonl_rows(text, where)
    except UsageError as exc:
        raise InputError(str(exc)) from None
