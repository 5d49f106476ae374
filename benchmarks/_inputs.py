"""What every benchmark script does with its inputs (benchmarks/results/script_inputs.md, "Inputs of the
benchmark scripts"): refuse what it cannot read, in one line, exit status 2, before any work.

    Parser              argparse.ArgumentParser whose errors are one line ("error: ...")
    positive_int        argparse type: an int >= 1 (a one-line error naming the option)
    InputError          a ValueError: an input that cannot be read; its message names it
    guarded(main)       runs main(argv); input errors (InputError, UsageError, a path that
                        cannot be opened) -> one line, exit 2; a bug keeps its traceback
    read_json(path)     a regular file (never a FIFO: it would block), UTF-8, JSON,
                        not nested too deeply, at most 256 MiB
    finite_number(x)    a real number that is finite (not bool, not None, not NaN/inf)
    input_dir(path)     an existing folder
    check_output(path)  an output file a script may write: not a system path, link or
                        folder; its folder exists; an existing file only if the script made
                        it (``made_it(path)``): a script never replaces a file it did not make
    starts_with(h)      the ``made_it`` of a text report whose first line is the heading h
    gpu_report_args     the GPU scripts' --budget-s and --out: None, or the one-line error
"""
from __future__ import annotations

import argparse
import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Callable, Optional

MAX_JSON_BYTES = 256 << 20


class InputError(ValueError):
    """An input a benchmark script cannot read; the message names the file or option."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: <prog>: <message>``, exit status 2."""

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {message}\n")

    def check_report(self, path: Optional[str], key: str, heading: str) -> None:
        """An option naming a text report (``--out``): unset, or a file this script may
        write (``check_output``; an existing one must start with ``heading``); else a
        one-line usage error (exit 2)."""
        if path is None:
            return
        try:
            check_output(path, key, starts_with(heading))
        except ValueError as exc:
            self.error(str(exc))


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def guarded(main: Callable[[Optional[list]], int], argv=None, prog: str = "") -> int:
    """main(argv), with the errors of unreadable input printed as one line on stderr, exit
    2: InputError, sharpo's UsageError/ConfigError (a bad setting or file), and the OSErrors
    of opening a path (missing, a folder, no permission). Anything else is a bug of the
    script and keeps its traceback."""
    from sharpo_train.errors import UsageError

    try:
        return main(argv)
    except (InputError, UsageError, FileNotFoundError, IsADirectoryError,
            NotADirectoryError, PermissionError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"error: {prog + ': ' if prog else ''}{msg}", file=sys.stderr)
        return 2


def _regular(path: Path, what: str) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file ({what})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, " \
            "socket or device)"
        raise InputError(f"{path}: {kind}; expected {what}")


def read_text(path: str | Path, what: str) -> str:
    """A regular UTF-8 text file of at most 256 MiB."""
    path = Path(path)
    _regular(path, what)
    if path.stat().st_size > MAX_JSON_BYTES:
        raise InputError(f"{path}: larger than 256 MiB; expected {what}")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); expected {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None


def loads(text: str, where: str):
    """sharpo's own JSON reading (not JSON, nested too deeply: one line naming ``where``)."""
    from sharpo_train.errors import UsageError
    from sharpo_train.io import loads_json
    try:
        return loads_json(text, where)
    except UsageError as exc:
        raise InputError(str(exc)) from None


def read_json(path: str | Path, what: str):
    return loads(read_text(path, what), str(path))


def finite_number(x, where: str) -> float:
    """``x`` as a float when it is a finite real number (JSON null, a bool, a string, NaN
    and Infinity are refused, naming ``where``)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        shown = "null" if x is None else f"{type(x).__name__} {x!r}"[:80]
        raise InputError(f"{where}: expected a finite number, got {shown}")
    x = float(x)
    if not math.isfinite(x):
        raise InputError(f"{where}: expected a finite number, got {x}")
    return x


def input_dir(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such folder; expected {what}")
    if not path.is_dir():
        raise InputError(f"{path}: not a folder; expected {what}")
    return path


def check_output(path: str | Path, key: str, made_it: Callable[[Path], bool]) -> Path:
    """``path`` may be written as an output file: not a system path (the rule of sharpo's
    run directories), not a symbolic link, not a folder; its folder exists; an existing
    file only when ``made_it(path)`` (this script wrote it). Creates nothing."""
    from sharpo_train.outputs import system_folder

    p = Path(path)
    if str(path) == "" or p.name in ("", ".", ".."):
        raise InputError(f"{key}: expected a file name, got {str(path)!r}")
    if p.is_symlink():
        raise InputError(f"{key}: {p} is a symbolic link; a benchmark never writes through one")
    why = system_folder(p)
    if not why and os.path.realpath(p.parent) == "/":
        why = "it is in the root folder /"
    if why:
        raise InputError(f"{key}: refusing to write {str(p)!r}: {why}")
    if p.exists() and not p.is_file():
        raise InputError(f"{key}: {p} exists and is not a regular file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{key}: {parent} is not an existing folder")
    if p.exists() and not made_it(p):
        raise InputError(f"{key}: {p} exists and was not written by this script; remove it "
                         f"or choose another name")
    return p


def gpu_report_args(budget_s: float, out: Optional[str]) -> Optional[str]:
    """The GPU scripts' shared options (gpu.py, gpu_linear_fwd.py): --budget-s a positive
    finite number of seconds, --out a report they may write (check_output, their reports
    start with "device: "). None when both hold, else the error line (without the prog)."""
    if not (budget_s > 0 and math.isfinite(budget_s)):
        return f"--budget-s: expected a positive number of seconds, got {budget_s}"
    if out is not None:
        try:
            check_output(out, "--out", starts_with("device: "))
        except ValueError as exc:
            return str(exc)
    return None


def starts_with(heading: str) -> Callable[[Path], bool]:
    """A ``made_it`` test for text reports: the file starts with the script's own heading
    (what the script writes first), read from its first 4 KiB."""
    def made_it(path: Path) -> bool:
        try:
            with open(path, "rb") as f:
                return f.read(4096).startswith(heading.encode("utf-8"))
        except OSError:
            return False
    return made_it


def check_output_folder(path: str | Path, key: str, marker: str) -> Path:
    """``path`` may be a script's output folder: not a system folder, the home directory, a
    link or a file; new, empty, or one this script made (it holds ``marker``, written
    first by ``claim_output_folder``). Creates nothing."""
    from sharpo_train.outputs import system_folder

    p = Path(path)
    if str(path) == "":
        raise InputError(f"{key}: expected a folder name, got ''")
    if p.is_symlink():
        raise InputError(f"{key}: {p} is a symbolic link; a benchmark never writes through one")
    why = system_folder(p)
    if why:
        raise InputError(f"{key}: refusing to write into {str(p)!r}: {why}")
    if p.exists() and not p.is_dir():
        raise InputError(f"{key}: {p} exists and is not a folder")
    if p.is_dir() and any(p.iterdir()) and not (p / marker).is_file():
        raise InputError(f"{key}: {p} is a non-empty folder this script did not make (no "
                         f"{marker}); choose a new or empty folder")
    return p


def claim_output_folder(path: Path, marker: str, command: str) -> None:
    """Create ``path`` (and parents) and write its marker first."""
    path.mkdir(parents=True, exist_ok=True)
    (path / marker).write_text(json.dumps({"command": command}) + "\n")


def env_ints(name: str, default: str, count: int) -> tuple[int, ...]:
    """Environment variable ``name`` (``default`` when unset) as ``count`` comma-separated
    positive integers; an InputError naming it otherwise."""
    text = os.environ.get(name, default)
    parts = text.split(",")
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != count or min(values, default=0) < 1:
        raise InputError(f"{name}: expected {count} positive integer(s)"
                         f"{' separated by commas' if count > 1 else ''}, got {text!r}")
    return values
