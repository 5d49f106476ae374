"""The one validator of what a user types: every path and string input is checked here,
once, at the edge (cli.py checks every argument before a command runs; the settings
loader every string setting; the run-directory and output rules every path they are
given), before anything is created (docs/run_directory.md, "Settings text" and "Outputs
of every command").

- ``check_text(key, value)``: a string setting or argument: no NUL, no control character
  (C0 other than tab / newline / carriage return, DEL, C1: an ESC would drive the
  terminal the message is printed on), valid UTF-8 (an undecodable byte of a command line
  arrives as a lone surrogate; sharpo writes its settings into UTF-8 files);
- ``check_path(key, value)``: a path: a non-empty string as above without tab, newline or
  carriage return either, without an invisible character (a bidi override, a zero-width
  space: Unicode's format characters and line separators), not starting with ``~`` (the
  shell expands it, sharpo does not:
  ``run_dir=~/x`` would make a folder named ``~``), each name at most 255 bytes and the
  whole at most 4095 (the limits of Linux file systems, so a too-long name is refused
  here, not an OSError later); a ``..`` that follows a folder that does not exist is
  refused (``up_through_missing``);
- ``file_problem(path)``: what keeps ``path`` from being read as a regular file, in words
  ("missing", "a folder, not a regular file", "Permission denied"), or None;
- ``check_input_file(key, value)``: a file to read (``--config``, ``--demos``): a path that
  exists and is a regular file (a folder, fifo, device or socket is named as such, never
  "no such file"; nothing is opened, so a fifo cannot block).

Errors are :class:`~sharpo_train.errors.ConfigError` (a UsageError: one line, exit 2)
naming ``key``.
"""
from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path
from typing import Any

from .errors import ConfigError

NAME_MAX = 255        # bytes of one path component (ext4, xfs, btrfs, tmpfs)
PATH_MAX = 4095       # bytes of a whole path (PATH_MAX 4096 with its NUL)

_TEXT_OK = "\t\n\r"   # control characters a text setting may hold (a multi-line template)
# Unicode categories a path may not hold: format characters (bidi overrides such as U+202E,
# which show "exe.txt" for "txt.exe"; zero-width spaces and joiners; U+FEFF) and the line
# and paragraph separators: a name that prints differently from what it is
_HIDDEN = ("Cf", "Zl", "Zp")


def _bad_char(value: str, allowed: str) -> str | None:
    """The first character of ``value`` that no input may hold (NUL, a control
    character other than ``allowed``), or None."""
    for ch in value:
        o = ord(ch)
        if (o < 0x20 and ch not in allowed) or 0x7F <= o <= 0x9F:
            return ch
    return None


def shown(value: str, limit: int = 60) -> str:
    """``value`` safe to print on one line: escapes instead of control characters."""
    text = value if len(value) <= limit else "..." + value[-limit:]
    return ascii(text) if _bad_char(text, "") or not text.isprintable() else repr(text)


def check_text(key: str, value: Any, allowed: str = _TEXT_OK) -> None:
    """ConfigError naming ``key`` when the string ``value`` (strings inside dicts and lists
    too) holds NUL, a control character (other than ``allowed``) or is not valid UTF-8."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ConfigError(f"{key}: contains a NUL character ({shown(value)})")
        bad = _bad_char(value, allowed)
        if bad is not None:
            raise ConfigError(f"{key}: contains the control character {bad!a} "
                              f"({shown(value)}); refused")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{key}: not valid UTF-8 ({shown(value)}); sharpo writes "
                              f"settings into UTF-8 files: choose a name in UTF-8") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            check_text(f"{key}.{k}", k, allowed)
            check_text(f"{key}.{k}", v, allowed)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_text(f"{key}[{i}]", v, allowed)


def check_path(key: str, value: Any) -> str:
    """``value`` as a path string, or ConfigError naming ``key``: empty, a NUL or any
    control character, not UTF-8, a name over 255 bytes or a path over 4095."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a path, got {type(value).__name__}")
    if not value.strip():
        raise ConfigError(f"{key}: empty path; name a file or folder")
    check_text(key, value, allowed="")
    hidden = next((ch for ch in value if unicodedata.category(ch) in _HIDDEN), None)
    if hidden is not None:
        raise ConfigError(f"{key}: {ascii(value)[:120]} contains the invisible character "
                          f"U+{ord(hidden):04X} ({unicodedata.name(hidden, 'unnamed')}); a "
                          f"name that shows differently from what it is is refused")
    if value.split("/", 1)[0].startswith("~"):
        raise ConfigError(f"{key}: {shown(value)} starts with '~', which sharpo does not "
                          f"expand (it would make a folder named '~'); write the full path, "
                          f"e.g. $HOME/...")
    data = value.encode("utf-8")
    if len(data) > PATH_MAX:
        raise ConfigError(f"{key}: path of {len(data)} bytes; the limit is {PATH_MAX}")
    for part in data.split(b"/"):
        if len(part) > NAME_MAX:
            raise ConfigError(f"{key}: a name of {len(part)} bytes in the path "
                              f"({shown(value)}); the limit is {NAME_MAX}")
    missing = up_through_missing(value)
    if missing is not None:
        raise ConfigError(f"{key}: {shown(value)} goes up ('..') out of {shown(missing)}, "
                          f"which is not an existing folder: the system cannot resolve it, "
                          f"and a writer that created the folder would land elsewhere than "
                          f"the rules checked; write the path without it "
                          f"({shown(os.path.normpath(value))})")
    return value


def up_through_missing(value: str) -> str | None:
    """The part of the path ``value`` before its first ``..`` that does not name an
    existing folder (``nodir`` of ``nodir/../proj``), or None. Such a path exists for no
    reader (the kernel resolves ``nodir`` first), yet ``mkdir(parents=True)`` would create
    ``nodir`` and write into ``proj``: every rule that asks ``exists()`` of it would have
    checked a path other than the one written, so it is refused here, once, for every
    command and setting (issue 47: ``run_dir=nodir/../proj`` overwrote ``proj``)."""
    parts = value.split("/")
    for i, part in enumerate(parts):
        if part == ".." and i > 0:
            prefix = "/".join(parts[:i]) or "/"
            if not os.path.isdir(prefix):
                return prefix
    return None


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a fifo (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """'a folder', 'a fifo (named pipe)', ... for a non-regular ``st_mode``."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def file_problem(path: str | Path) -> str | None:
    """None when ``path`` is a regular file (a link followed) this process may read, else
    what it is: "missing" (it does not exist), "a folder, not a regular file" (any other
    kind named), or the operating system's reason ("Permission denied": said as such,
    never "missing" as safetensors' loader says). Only a regular file is opened (and
    closed at once: nothing is read)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return f"{file_kind(st.st_mode)}, not a regular file"
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))   # may it be read? (EACCES)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def check_input_file(key: str, value: Any) -> Path:
    """The path of a file to read, checked without opening it: ConfigError/FileNotFoundError
    naming ``key`` when it is missing or not a regular file (says which kind it is)."""
    p = Path(check_path(key, value))
    try:
        st = os.stat(p)             # follows a link: what would be read
    except FileNotFoundError:
        raise FileNotFoundError(f"{key}: no such file {p}") from None
    except OSError as exc:
        raise ConfigError(f"{key}: {p}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{key}: {p} is {file_kind(st.st_mode)}, not a regular file")
    return p
