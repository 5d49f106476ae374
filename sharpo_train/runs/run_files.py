"""What sharpo writes inside a run directory, and the rule that keeps every write inside it
(docs/run_directory.md, "Nothing outside the run is written").

Every file sharpo writes in RUN/ is either replaced by a rename (``io.atomic_write_*``:
a symbolic link in its place is replaced, never followed), appended through a descriptor
opened with ``O_NOFOLLOW`` (``metrics.jsonl``), or lies in one of the run's own folders
(``credit/``, ``checkpoints/``, ...). Those folders must be real directories of the run:
``run_subdir`` refuses one that is a symbolic link, and ``refuse_links`` checks them all
(and the files above) before a run writes anything.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..errors import UsageError

# folders of RUN/ that sharpo writes into (train, eval, explain)
RUN_SUBDIRS = ("checkpoints", "credit", "batches", "tensorboard", "report", "lora_base")
# files of RUN/ that sharpo writes (".sharpo-run": run_dir.RUN_MARKER)
RUN_FILES = ("config.yaml", "metrics.jsonl", "eval.json", ".lock", ".sharpo-run")
_CHECKPOINT_ENTRY = re.compile(r"(\.tmp_)?step_\d+|latest")


class RunDirLinkError(UsageError):
    """An entry of a run directory that sharpo writes is a symbolic link (writing through
    it would write outside the run). `sharpo` prints it as one line and exits 2."""


def _refused(path: Path) -> RunDirLinkError:
    return RunDirLinkError(f"{path}: is a symbolic link; sharpo writes only inside the run "
                           f"directory and never through a link (remove the link)")


class RunDirFileError(UsageError):
    """An entry of a run directory that sharpo reads or writes has the wrong kind: a run
    file that is a fifo, a device, a socket or a folder (opening it could hang or fail), or
    a run folder that is a file. One line, exit 2."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a fifo (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def check_entry(path: str | Path, folder: bool = False) -> None:
    """RunDirLinkError / RunDirFileError unless ``path`` is missing, or (not a link and) a
    regular file (``folder``: a folder). Never opens it."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise _refused(path)
    if folder and not stat.S_ISDIR(mode):
        raise RunDirFileError(f"{path}: is {_kind(mode)}, not a folder; sharpo keeps the "
                              f"run's {path.name} in a folder there (move it away)")
    if not folder and not stat.S_ISREG(mode):
        raise RunDirFileError(f"{path}: is {_kind(mode)}, not a regular file; sharpo reads "
                              f"and writes only regular files in a run (move it away)")


def refuse_links(run_dir: str | Path) -> None:
    """RunDirLinkError naming the first of RUN's written entries (``RUN_FILES``,
    ``RUN_SUBDIRS``, ``checkpoints/step_*``, ``checkpoints/latest``) that is a symbolic
    link; RunDirFileError for one of the wrong kind (a fifo, device or folder where a file
    belongs, a file where a folder belongs). Reads only; opens nothing."""
    run_dir = Path(run_dir)
    for name in RUN_FILES:
        check_entry(run_dir / name)
    for name in RUN_SUBDIRS:
        check_entry(run_dir / name, folder=True)
    ckpts = run_dir / "checkpoints"
    if ckpts.is_dir():
        for entry in sorted(ckpts.iterdir()):
            if _CHECKPOINT_ENTRY.fullmatch(entry.name):
                if entry.is_symlink():
                    raise _refused(entry)
                check_entry(entry, folder=entry.name != "latest")


def run_subdir(run_dir: str | Path, name: str) -> Path:
    """RUN/<name>, created when missing; RunDirLinkError when it is a symbolic link."""
    path = Path(run_dir) / name
    check_entry(path, folder=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


def refuse_special_files(run_dir: str | Path) -> None:
    """For commands that only read a run (eval, explain, probe-teacher, reports):
    RunDirFileError when a file they open (``config.yaml``, ``metrics.jsonl``,
    ``eval.json``, ``checkpoints/latest``) is a fifo, device or folder (reading a fifo
    would hang)."""
    run_dir = Path(run_dir)
    for rel in ("config.yaml", "metrics.jsonl", "eval.json", "checkpoints/latest"):
        p = run_dir / rel
        if p.exists() and not p.is_file():
            raise RunDirFileError(f"{p}: is {_kind(os.stat(p).st_mode)}, not a regular "
                                  f"file; sharpo reads only regular files in a run (move it away)")
