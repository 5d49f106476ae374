"""The rule for every output a command writes outside a run directory
(docs/run_directory.md, "Outputs of every command"):

- an output *file* (``eval --out``, ``explain --out``, ``probe-teacher --json``,
  ``webshop|alfworld play --json``, ``webshop|alfworld demos --out``): refused when it
  names a folder, a system folder's contents or a symbolic link; an existing file needs
  ``--force``; written to a temporary file beside it and renamed over it, so a reader never
  sees half a file and a link is never followed;
- an output *folder* (``sharpo sft --out``): refused when it is a system folder, the home
  directory, a symbolic link or a file; a non-empty folder must be this command's own
  output (its marker, ``.sharpo-sft``, holding the format and the command) unless
  ``--force`` names it; the result is built in a new temporary folder beside it and moved
  in file by file: nothing that the command did not write is ever deleted;
- never a system folder or a home directory (``system_folder``: also the first rule of a
  run directory, runs/run_dir.py);
- a new result beside others (``sharpo eval --run-dir``'s ``RUN/eval-<time>.json``) is
  created exclusively (``O_EXCL``), with a counter suffix when the name is taken, so that
  two evaluations always leave two files.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .errors import UsageError
from .io import atomic_write_bytes, clean

_SYSTEM_ROOTS = ("/", "/home", "/root", "/tmp", "/var", "/opt", "/mnt", "/media", "/srv",
                 "/run")
_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc",
                 "/sbin", "/sys", "/usr")


def system_folder(path: str | Path) -> str | None:
    """Why ``path`` may not hold a run (a system folder or a home directory), or None."""
    real = Path(os.path.realpath(os.path.expanduser(str(path))))
    home = Path(os.path.realpath(os.path.expanduser("~")))
    if real == home:
        return f"it is the home directory {home}"
    for root in _SYSTEM_ROOTS:
        if real == Path(root):
            return f"it is the system folder {root}"
    for tree in _SYSTEM_TREES:
        if real == Path(tree):
            return f"it is the system folder {tree}"
        if Path(tree) in real.parents:
            return f"it is inside the system folder {tree}"
    return None


SFT_MARKER = ".sharpo-sft"       # written into every `sharpo sft --out` folder
SFT_FORMAT = "sharpo-sft/1"


def _refuse_link_or_system(p: Path, key: str, link_what: str, refusal: str) -> None:
    """UsageError (naming ``key``) when ``p`` is a symbolic link or a system folder / the
    home directory (``system_folder``)."""
    if p.is_symlink():
        raise UsageError(f"{key}: {p} is a symbolic link; {link_what} "
                         f"(remove it or choose another path)")
    why = system_folder(p)
    if why:
        raise UsageError(f"{key}: {refusal.format(path=repr(str(p)))}: {why}")


def check_out_file(path: str | Path, key: str, force: bool = False) -> Path:
    """UsageError/FileExistsError (naming ``key``) unless ``path`` may be written as an
    output file. Creates nothing."""
    p = Path(path)
    _refuse_link_or_system(p, key, "sharpo never writes through a link", "refusing to write {path}")
    if p.exists() and not p.is_file():
        raise UsageError(f"{key}: {p} exists and is not a regular file")
    if p.exists() and not force:
        raise FileExistsError(f"{key}: {p} exists (pass --force to overwrite it)")
    if p.parent.exists() and not p.parent.is_dir():
        raise UsageError(f"{key}: {p.parent} is not a directory")
    return p


def write_out_text(path: str | Path, text: str) -> None:
    """An output file, written whole (temp file, fsync, rename; a link in its place is
    replaced, never followed)."""
    atomic_write_bytes(path, text.encode("utf-8"))
    os.chmod(path, 0o666 & ~_umask())       # as open(path, "w") would (mkstemp: 0600)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_out_json(path: str | Path, obj) -> None:
    write_out_text(path, json.dumps(clean(obj), indent=1, allow_nan=False, default=str) + "\n")


def create_exclusive(folder: str | Path, stem: str, suffix: str, data: bytes) -> Path:
    """``folder/stem+suffix`` (else ``stem-1``, ``stem-2``, ...) created with ``O_EXCL`` and
    holding ``data``: a name another process took in between is never overwritten."""
    folder = Path(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for k in range(100000):
        path = folder / (f"{stem}{suffix}" if k == 0 else f"{stem}-{k}{suffix}")
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return path
    raise UsageError(f"{folder}: no free name {stem}-<k>{suffix}")


def _marker(path: Path) -> dict | None:
    """The parsed marker of an sft output folder, or None (missing, not ours)."""
    m = path / SFT_MARKER
    if not m.is_file() or m.is_symlink() or m.stat().st_size > 1 << 20:
        return None
    try:
        data = json.loads(m.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != SFT_FORMAT:
        return None
    return data


def check_out_folder(path: str | Path, key: str, force: bool, is_ours, what: str) -> Path:
    """UsageError (naming ``key``) unless ``path`` may be an output folder: not a system
    folder, the home directory, a symbolic link, a file, or below a file; new, empty,
    accepted by ``is_ours`` (``what``: what such a folder is), or any folder with
    ``force``. Creates nothing."""
    p = Path(path)
    _refuse_link_or_system(p, key, "sharpo writes into a real folder, never through a link",
                           "refusing {path} as an output folder")
    if p.exists() and not p.is_dir():
        raise UsageError(f"{key}: {p} exists and is not a directory")
    for parent in p.absolute().parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{key}: {parent} is a file, not a folder")
    if p.is_dir() and any(os.scandir(p)) and not is_ours(p) and not force:
        raise UsageError(f"{key}: {p} is a non-empty folder that is not {what}; choose a new "
                         f"or empty one, or pass --force to write into it (nothing else in "
                         f"it is touched)")
    return p


def check_out_dir(path: str | Path, key: str, force: bool = False) -> Path:
    """UsageError (naming ``key``) unless ``path`` may receive `sharpo sft`'s checkpoint
    (``check_out_folder``): new, empty, an earlier `sharpo sft` output (its marker), or any
    folder with ``force``. Creates nothing."""
    return check_out_folder(path, key, force,
                            lambda p: _marker(p) is not None,
                            f"a sharpo sft output (no valid {SFT_MARKER})")


def new_build_dir(out: str | Path) -> Path:
    """A new, empty temporary folder beside ``out`` (created here, so it is ours)."""
    out = Path(out)
    parent = out.parent if str(out.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))


def install_dir(build: Path, out: str | Path, command: str) -> None:
    """Move the files of ``build`` (a folder ``new_build_dir`` made) into ``out`` and write
    its marker. A missing ``out`` is the renamed ``build``; an existing one receives the
    files one by one (replacing same-named files; the files an earlier output's marker
    lists are removed first, so no stale shard stays); nothing else of ``out`` is touched."""
    out = Path(out)
    names = sorted(e.name for e in os.scandir(build))
    marker = json.dumps({"format": SFT_FORMAT, "command": command, "files": names}) + "\n"
    (build / SFT_MARKER).write_text(marker, encoding="utf-8")
    if not out.exists() and not out.is_symlink():
        os.rename(build, out)
        return
    check_out_dir(out, "--out", force=True)       # still a real folder (not swapped meanwhile)
    old = _marker(out)
    for name in (old or {}).get("files", []):
        f = out / str(name)
        if isinstance(name, str) and "/" not in name and name not in (".", "..") \
                and f.is_file() and not f.is_symlink():
            f.unlink()
    for name in names + [SFT_MARKER]:
        src, dst = build / name, out / name
        if dst.is_dir() and not dst.is_symlink():
            raise UsageError(f"--out: {dst} is a folder; sharpo sft writes a file there")
        os.replace(src, dst)
    shutil.rmtree(build)          # empty now; created by new_build_dir
