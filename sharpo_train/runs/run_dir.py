"""Which folders may be a run directory (docs/run_directory.md, "Which folders may be a
run"), checked before anything is created or written:

- never a system folder or a home directory: ``/`` itself, ``/home``, ``/root``, ``/tmp``,
  ``/var``, ``/opt``, ``/mnt``, ``/media``, ``/srv``, ``/run``, the user's home, nor
  anything inside ``/bin /boot /dev /etc /lib /lib32 /lib64 /proc /sbin /sys /usr``
  (checked on the resolved path, so ``runs/../..`` or a link to ``/`` count too);
- a training run directory (``sharpo train run_dir=RUN``, the Python ``train(config)``)
  is a folder that does not exist yet (created), an empty folder (or one holding only a
  ``.lock``), or a sharpo run: it holds ``.sharpo-run`` (written first, by every run).
  Any other existing folder is refused, so that its files
  (a ``config.yaml``, an ``eval.json`` of something else) are never overwritten;
- a pipeline directory (``sharpo demo`` / ``sharpo compare``) likewise: new, empty, or one
  that holds ``pipeline.json`` (written first, by every pipeline).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import UsageError
from ..io import atomic_write_text
from ..outputs import system_folder
from .run_files import check_entry
from .run_lock import LOCK_NAME

RUN_MARKER = ".sharpo-run"   # RUN/.sharpo-run: {"format": "sharpo-run/1", "command": ...}
RUN_FORMAT = "sharpo-run/1"
PIPELINE_MARKER = "pipeline.json"    # written first by recipes/demo.py open_pipeline

def is_sharpo_run(path: str | Path) -> bool:
    """``path`` is a folder a sharpo run wrote: it holds the run marker (a regular file)."""
    marker = Path(path) / RUN_MARKER
    return marker.is_file() and not marker.is_symlink() and marker_format(marker) == RUN_FORMAT


def marker_format(path: Path) -> str | None:
    """The ``format`` a marker file holds (its first 4 KiB, JSON), else None."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(4096).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data.get("format") if isinstance(data, dict) else None


def _non_empty(p: Path) -> bool:
    """``p`` holds something besides a run lock (RUN/.lock: what a run that stopped right
    after taking it leaves)."""
    with os.scandir(p) as it:
        return any(e.name != LOCK_NAME for e in it)


def _check_folder(path: str | Path, key: str, is_ours, what: str, marker: str) -> None:
    """UsageError (naming ``key``) if ``path`` is a system folder, a file, or a non-empty
    folder that ``is_ours`` does not accept (``what``: the kind of folder, ``marker``: the
    file that marks it). Creates nothing."""
    p = Path(path)
    why = system_folder(p)
    if why:
        raise UsageError(f"{key}: refusing {str(p)!r} as a run directory: {why}")
    if p.exists() and not p.is_dir():
        raise UsageError(f"{key}: {p} exists and is not a directory")
    if p.is_dir() and marker == RUN_MARKER:   # a fifo or folder where a run file belongs
        check_entry(p / RUN_MARKER)
    if p.is_dir() and _non_empty(p) and not is_ours(p):
        why = (f"its {marker} is not a sharpo marker" if (p / marker).exists()
               else f"no {marker}")
        raise UsageError(f"{key}: {p} is a non-empty folder that is not {what} ({why}); "
                         f"choose a new or empty one")


def check_run_dir(path: str | Path, key: str = "run_dir") -> None:
    """UsageError (naming ``key``) unless ``path`` may be a training run directory (see
    the module doc). Creates nothing."""
    _check_folder(path, key, is_sharpo_run, "a sharpo run", RUN_MARKER)


def mark_run_dir(path: str | Path) -> None:
    """Create ``path`` (parents too) and write its ``.sharpo-run`` marker if it has none."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    if not (p / RUN_MARKER).is_file():
        atomic_write_text(p / RUN_MARKER, json.dumps({"format": RUN_FORMAT,
                                                      "command": "sharpo train"}) + "\n")


def check_pipeline_dir(path: str | Path, key: str = "--run-dir") -> None:
    """UsageError (naming ``key``) unless ``path`` may hold a `sharpo demo` / `sharpo
    compare` pipeline: not a system folder; new, empty, or holding pipeline.json."""
    _check_folder(path, key, lambda p: (p / PIPELINE_MARKER).is_file(),
                  "a sharpo demo/compare directory", PIPELINE_MARKER)
