"""The demonstration files both environments' ``write_demos`` write: JSONL, one record per
turn of each episode the expert won (record keys: docs/training.md)."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import IO, Iterable, Iterator


def check_out_path(out_path: str) -> None:
    """out_path must be non-empty and its folder must exist (checked before any episode runs)."""
    if not out_path:
        raise ValueError("out_path: empty")
    parent = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"out_path: folder {parent} does not exist")


@contextlib.contextmanager
def open_out(out_path: str) -> Iterator[IO[str]]:
    """A text file for ``out_path``, written to a temporary file beside it and renamed over
    it when the block ends without an error (a link at ``out_path`` is replaced, never
    followed; a failed run leaves no half file)."""
    folder = os.path.dirname(os.path.abspath(out_path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out_path)}.", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)        # as open(out_path, "w") would (mkstemp: 0600)
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_records(f: IO[str], records: Iterable[dict]) -> int:
    """Write records to the open text file f, one JSON line each; returns how many."""
    n = 0
    for r in records:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
        n += 1
    return n
