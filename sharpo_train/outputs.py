"""The rule for every output a command writes outside a run directory
(docs/run_directory.md, "Outputs of every command"):

The rule of them all: a command never deletes or replaces a file it did not make, and
this is checked before any work, ``--force`` included.

- an output *file* (``eval --out``, ``explain --out``, ``probe-teacher --json``,
  ``webshop|alfworld play --json``, ``webshop|alfworld demos --out``): refused when it
  names a folder, a file directly in ``/``, a system folder's contents or a symbolic link,
  or lies inside a sharpo run, sft output or pipeline folder anywhere but directly in it or
  in its ``report/``; an existing file needs ``--force``, and even then is replaced only
  when it is an earlier output of the same kind (``OutputKind``: an eval result, a credit
  page, ...) and, inside a sharpo folder, one of the names the command writes there
  (``RUN/eval-*.json``); written to a temporary file beside it and renamed over it, so a
  reader never sees half a file and a link is never followed;
- an output *folder* (``sharpo sft --out``): refused when it is a system folder, the home
  directory, a symbolic link or a file, a sharpo run, a demo/compare folder itself, or
  inside a run (a pipeline's own ``sft/`` is its output); a non-empty folder must be this command's own
  output (its marker, ``.sharpo-sft``, holding the format and the command) unless
  ``--force`` names it, and even with ``--force`` a file of the folder whose name the
  output uses (``config.json``, ``model.safetensors``, ...) is refused unless an earlier
  output's marker lists it; the result is built in a new temporary folder beside it and
  moved in file by file: nothing that the command did not write is ever deleted or
  replaced;
- never a system folder or a home directory (``system_folder``: also the first rule of a
  run directory, runs/run_dir.py);
- a new result beside others (``sharpo eval --run-dir``'s ``RUN/eval-<time>.json``) is
  created exclusively (``O_EXCL``), with a counter suffix when the name is taken, so that
  two evaluations always leave two files.
"""
from __future__ import annotations

import fnmatch
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .errors import UsageError
from .inputs import check_path
from .io import atomic_write_bytes, clean

# the markers of sharpo's own folders (a run's, written first by every run: runs/run_dir.py;
# a demo/compare pipeline's; the sft output's: SFT_MARKER below): outputs never go among
# their files
RUN_MARKER = ".sharpo-run"
PIPELINE_MARKER = "pipeline.json"

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


@dataclass(frozen=True)
class OutputKind:
    """What an output file is: ``what`` names it in messages, ``recognise(path)`` tells an
    earlier output of this kind (the only existing file ``--force`` replaces), and
    ``own_names`` are the names (fnmatch, relative to the folder) the command itself writes
    inside a sharpo run / sft output / pipeline folder (``eval-*.json``)."""
    what: str
    recognise: Callable[[Path], bool]
    own_names: tuple = ()


def _json_object(path: Path, limit: int = 256 << 20) -> Optional[dict]:
    try:
        if path.stat().st_size > limit:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _json_with(*keys: str) -> Callable[[Path], bool]:
    return lambda p: (lambda d: d is not None and all(k in d for k in keys))(_json_object(p))


def _starts_with(*heads: bytes, within: int = 4096) -> Callable[[Path], bool]:
    def recognise(p: Path) -> bool:
        try:
            with open(p, "rb") as f:
                data = f.read(within)
        except OSError:
            return False
        return all(h in data for h in heads)
    return recognise


def _demos_file(p: Path) -> bool:
    try:
        with open(p, "rb") as f:
            first = f.readline(1 << 20).decode("utf-8")
        row = json.loads(first)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(row, dict) and isinstance(row.get("messages"), list)


PNG_SOFTWARE = "sharpo explain"       # the PNG's Software text (explain_png.py)

EVAL_RESULT = OutputKind("a sharpo eval result", _json_with("success", "episodes"),
                         ("eval-*.json",))
PROBE_SUMMARY = OutputKind("a sharpo probe-teacher summary", _json_with("model"))
PLAY_RESULT = OutputKind("a sharpo play result", _json_with("agent", "summary", "episodes"))
DEMOS_FILE = OutputKind("a demonstrations file (JSONL of messages)", _demos_file)
CREDIT_PAGE = OutputKind("a sharpo credit page", _starts_with(b"<title>Credit report"),
                         ("report/credit_step*.html",))
CREDIT_PLOT = OutputKind("a sharpo credit plot", _starts_with(
    b"\x89PNG", PNG_SOFTWARE.encode(), within=1 << 16), ("report/credit_step*.png",))
CREDIT_QUALITY = OutputKind("a sharpo credit-quality table", _starts_with(b"# Credit quality of "),
                            ("report/credit_quality*.md",))

def sharpo_folder(path: Path) -> Optional[Path]:
    """The nearest folder at or above ``path``'s folder that sharpo made (a run, an sft
    output, a demo/compare pipeline: its marker; a run of an earlier version: config.yaml
    beside metrics.jsonl), or None."""
    here = Path(os.path.realpath(path.parent if str(path.parent) else "."))
    for d in (here, *here.parents):
        if any((d / m).is_file() for m in (RUN_MARKER, SFT_MARKER, PIPELINE_MARKER)) or \
                ((d / "config.yaml").is_file() and (d / "metrics.jsonl").is_file()):
            return d
    return None


def check_out_file(path: str | Path, key: str, force: bool = False,
                   kind: Optional[OutputKind] = None) -> Path:
    """UsageError/FileExistsError (naming ``key``) unless ``path`` may be written as an
    output file of ``kind`` (the module doc's rule). Creates nothing."""
    p = Path(check_path(key, path))
    _refuse_link_or_system(p, key, "sharpo never writes through a link", "refusing to write {path}")
    if Path(os.path.realpath(p)).parent == Path("/"):
        raise UsageError(f"{key}: refusing to write {str(p)!r}: a file directly in / (the "
                         f"root folder); name a file inside a folder of yours")
    if p.exists() and not p.is_file():
        from .inputs import file_kind
        raise UsageError(f"{key}: {p} exists and is {file_kind(os.stat(p).st_mode)}, not a "
                         f"regular file" + ("; name a file" if p.is_dir() else ""))
    if p.parent.exists() and not p.parent.is_dir():
        raise UsageError(f"{key}: {p.parent} is not a directory")
    home = sharpo_folder(p)
    if home is not None:
        rel = Path(os.path.realpath(p)).relative_to(home)
        if len(rel.parts) > 2 or (len(rel.parts) == 2 and rel.parts[0] != "report"):
            raise UsageError(f"{key}: {p} lies inside {home}'s own files (a sharpo run or "
                             f"output); write directly in it, in its report/, or elsewhere")
        if p.exists() and not any(fnmatch.fnmatchcase(str(rel), pat)
                                  for pat in (kind.own_names if kind else ())):
            raise UsageError(f"{key}: {p} is a file of the sharpo folder {home}, not one this "
                             f"command wrote; sharpo never replaces it (choose another name)")
    if p.exists() and not force:
        raise FileExistsError(f"{key}: {p} exists (pass --force to overwrite it)")
    if p.exists() and kind is not None and not kind.recognise(p):
        raise UsageError(f"{key}: {p} exists and is not {kind.what}; sharpo never replaces a "
                         f"file it did not make, even with --force (choose another name or "
                         f"move it away)")
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
    p = Path(check_path(key, path))
    _refuse_link_or_system(p, key, "sharpo writes into a real folder, never through a link",
                           "refusing {path} as an output folder")
    if p.exists() and not p.is_dir():
        raise UsageError(f"{key}: {p} exists and is not a directory")
    home = sharpo_folder(p / "_")        # a run (or a pipeline) is never another output
    if home is not None and not (home / SFT_MARKER).is_file():
        pipeline = (home / PIPELINE_MARKER).is_file()
        if not pipeline or home == Path(os.path.realpath(p)):
            where = "is" if home == Path(os.path.realpath(p)) else f"lies inside"
            raise UsageError(f"{key}: {p} {where} the sharpo "
                             f"{'demo/compare folder' if pipeline else 'run'} {home}; an "
                             f"output folder is never a run's (choose a folder outside it)")
    for parent in p.absolute().parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{key}: {parent} is a file, not a folder")
    if p.is_dir() and any(os.scandir(p)) and not is_ours(p) and not force:
        raise UsageError(f"{key}: {p} is a non-empty folder that is not {what}; choose a new "
                         f"or empty one, or pass --force to write into it (nothing else in "
                         f"it is touched)")
    return p


# names a `sharpo sft` output may hold (save_pretrained's model and tokenizer files, the
# summary, the marker): a file of --out with such a name that no earlier output's marker
# lists is never replaced, --force or not
SFT_NAMES = ("config.json", "generation_config.json", "model.safetensors",
             "model.safetensors.index.json", "model-*.safetensors", "sft.json", "tokenizer*",
             "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt",
             "chat_template.*", "*.jinja", SFT_MARKER)


def sft_name(name) -> bool:
    """``name`` is one a `sharpo sft` output writes (``SFT_NAMES``): a plain name, no path."""
    return isinstance(name, str) and "/" not in name and name not in ("", ".", "..") and \
        any(fnmatch.fnmatchcase(name, pat) for pat in SFT_NAMES)


def _marker_files(out: Path) -> set:
    """The names an earlier `sharpo sft` output's marker in ``out`` lists, kept only where
    they are names the command writes (``sft_name``): a marker is a file anyone can write,
    so it never leads to replacing or deleting anything else (``thesis.md``)."""
    old = _marker(out)
    if old is None:
        return set()
    files = old.get("files", [])
    return {n for n in (files if isinstance(files, list) else []) if sft_name(n)} | {SFT_MARKER}


def _sft_owned(out: Path) -> Callable[[str], bool]:
    """name -> True when an earlier `sharpo sft` output in ``out`` wrote it (its marker
    lists it, and it is one of the names the command writes)."""
    return _marker_files(out).__contains__


def _refuse_replacing(out: Path, names, key: str) -> None:
    """UsageError when writing ``names`` into ``out`` would replace a file sharpo did not
    make there, or a folder or link stands where a file goes."""
    owned = _sft_owned(out)
    for name in sorted(names):
        dst = out / name
        if not (dst.exists() or dst.is_symlink()):
            continue
        if dst.is_symlink() or not dst.is_file():
            kind = "a symbolic link" if dst.is_symlink() else \
                ("a folder" if dst.is_dir() else "not a regular file")
            raise UsageError(f"{key}: {dst} is {kind}; sharpo sft writes a file of that name "
                             f"there (move it away)")
        if not owned(name):
            raise UsageError(f"{key}: {dst} is not a file of an earlier sharpo sft output; "
                             f"sharpo never replaces a file it did not make, even with --force "
                             f"(move it away or choose another --out)")


def check_out_dir(path: str | Path, key: str, force: bool = False) -> Path:
    """UsageError (naming ``key``) unless ``path`` may receive `sharpo sft`'s checkpoint
    (``check_out_folder``): new, empty, an earlier `sharpo sft` output (its marker), or any
    folder with ``force``; in every case no file the output would replace (``SFT_NAMES``)
    may be one that sharpo did not make. Creates nothing."""
    p = check_out_folder(path, key, force,
                         lambda p: _marker(p) is not None,
                         f"a sharpo sft output (no valid {SFT_MARKER})")
    if p.is_dir():
        with os.scandir(p) as it:
            names = [e.name for e in it if sft_name(e.name)]
        _refuse_replacing(p, names, key)
    return p


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
    try:    # still a real folder (not swapped meanwhile), and nothing foreign in the way
        check_out_dir(out, "--out", force=True)
        _refuse_replacing(out, names + [SFT_MARKER], "--out")
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)      # ours: new_build_dir made it
        raise
    for name in sorted(_marker_files(out) - {SFT_MARKER}):    # the command's own names only
        f = out / name
        if f.is_file() and not f.is_symlink():
            f.unlink()
    for name in names + [SFT_MARKER]:
        os.replace(build / name, out / name)
    shutil.rmtree(build)          # empty now; created by new_build_dir
