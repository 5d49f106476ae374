"""Crash-safe file writes: temp file in the same folder, fsync, then rename (atomic on
POSIX), so a reader never sees half a file and a crash never loses the previous one. The
new file keeps the mode of the one it replaces, else gets the umask's (``new_file_mode``),
as a plain write would."""
from __future__ import annotations

import errno
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from .errors import UsageError


def current_umask() -> int:
    """The process's umask (/proc/self/status on Linux; else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(path: str | Path) -> int:
    """The permission bits a rewrite of ``path`` gets: those of the regular file it
    replaces (a resumed run keeps what the user set), else 0666 less the umask, as
    ``open(path, "w")`` would give (mkstemp alone gives 0600)."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    return 0o666 & ~current_umask()


class umask_modes:
    """``with umask_modes(folder): save_pretrained(folder)``: the files the block creates or
    rewrites in ``folder`` (and its new subfolders) get 0666 (0777) less the umask, as a
    plain write would; libraries that write through mkstemp leave 0600 (transformers'
    model.safetensors). Files that were there before and are not rewritten keep theirs."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def _scan(self) -> dict[str, int]:
        if not self.folder.is_dir():
            return {}
        return {os.path.join(d, n): os.lstat(os.path.join(d, n)).st_mtime_ns
                for d, dirs, files in os.walk(self.folder) for n in [*dirs, *files]}

    def __enter__(self):
        self.before = self._scan()
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            return False
        mask = current_umask()
        for path, mtime in self._scan().items():
            if self.before.get(path) == mtime:
                continue
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                os.chmod(path, 0o666 & ~mask)
            elif stat.S_ISDIR(st.st_mode) and path not in self.before:
                os.chmod(path, 0o777 & ~mask)
        return False


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(clean(obj), indent=1, allow_nan=False, default=_json_default) + "\n")


def clean(obj: Any) -> Any:
    """NaN/inf -> None (JSON has neither), tensors/numpy scalars -> Python numbers."""
    if hasattr(obj, "item") and not isinstance(obj, (list, dict, str)):
        try:
            obj = obj.item()
        except (ValueError, RuntimeError):
            obj = obj.tolist()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj


def _json_default(obj: Any):
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def append_jsonl(path: str | Path, record: dict) -> None:
    """One line, flushed and fsynced before returning (a finished step is never lost).
    The file is opened with ``O_NOFOLLOW``: a symbolic link in its place is a UsageError,
    never written through."""
    line = json.dumps(clean(record), allow_nan=False, default=_json_default) + "\n"
    flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
             | os.O_NONBLOCK)        # a fifo in its place must not block the run
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if Path(path).is_symlink():
            raise UsageError(f"{path}: is a symbolic link; sharpo appends only to a plain "
                             f"file inside the run (remove the link)") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):    # a fifo without reader, a folder
            raise UsageError(f"{path}: not a regular file; sharpo appends only to a plain "
                             f"file inside the run (move it away)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{path}: not a regular file; sharpo appends only to a plain file "
                         f"inside the run (move it away)")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def loads_json(text: str, where: str | Path):
    """``json.loads`` for files sharpo reads (state.json, metrics lines, records): a
    document that is not JSON or is nested deeper than Python's recursion limit (a
    200k-deep ``[[[...``) or holds an integer of more than 4,300 digits is a UsageError
    naming ``where``, never a RecursionError or ValueError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not JSON ({exc})") from None
    except ValueError as exc:   # an integer past sys.get_int_max_str_digits() (4300 digits)
        raise UsageError(f"{where}: refused: {' '.join(str(exc).split())[:120]}") from None
    except RecursionError:
        raise UsageError(f"{where}: JSON nested too deeply (refused)") from None


def read_jsonl(path: str | Path, *, torn_tail_ok: bool = True) -> list[dict]:
    """The records of a JSON-lines file ([] when it does not exist). A torn last line (a
    process killed while appending) is dropped when ``torn_tail_ok``; any other line that
    is not a JSON object is a UsageError (a ValueError) naming the file and line."""
    path = Path(path)
    if not path.exists():
        return []
    if not path.is_file():              # a fifo would block the reader, a folder fail
        raise UsageError(f"{path}: not a regular file (move it away)")
    return jsonl_rows(path.read_text(encoding="utf-8", errors="replace"), path,
                      torn_tail_ok=torn_tail_ok)


def jsonl_rows(text: str, where: str | Path, *, torn_tail_ok: bool = True) -> list[dict]:
    """The records of JSON-lines ``text`` (``read_jsonl``'s rule: a torn last line dropped
    when ``torn_tail_ok``, any other line that is not a JSON object a UsageError naming
    ``where`` and the line)."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = loads_json(line, f"{where}:{n}")
        except UsageError:                  # not JSON, or nested too deeply
            if torn_tail_ok and n == len(lines):
                break
            raise
        if not isinstance(row, dict):
            raise UsageError(f"{where}:{n}: expected a JSON object, got {type(row).__name__}")
        out.append(row)
    return out


def file_sha256(path: str | Path) -> str:
    """The hex sha256 of the file ``path`` (read in 1 MiB blocks)."""
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
