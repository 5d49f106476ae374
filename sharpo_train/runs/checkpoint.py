"""Checkpoints (layout and guarantees: docs/run_directory.md).

RUN/checkpoints/step_<S:06d>/
  policy/                  Hugging Face model (safetensors) + tokenizer, loadable by
                           ``build_policy(weights_from=...)`` and ``sharpo eval --model``
  optimizer.safetensors    every tensor of the optimizer state ("optimizer.<param>.<name>")
  state.json               everything else as plain JSON: trainer state (step, and the
                           run's identity: seed, method, config_sha256), scheduler state,
                           optimizer param groups, and the size and sha256 of every file above
RUN/checkpoints/latest     a text file naming the newest complete checkpoint ("step_000012")

Nothing is ever unpickled: tensors come from safetensors, the rest from JSON, and the
policy from safetensors through ``transformers`` (no remote code). A checkpoint is written
into a temp folder, fsynced and renamed, then ``latest`` is replaced atomically, so a crash
leaves ``latest`` naming a complete checkpoint. On resume, ``latest`` must be a bare
``step_<digits>`` name of a real directory inside the run; a checkpoint whose files are
truncated or changed (sizes or sha256 differ from state.json, unreadable safetensors) is
skipped with one line on stderr for the newest older complete one. A checkpoint of another
run (its identity differs: loops/resume.py ``identity_problem``) is never resumed.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Optional, TypeVar

import torch

from ..checks import is_int
from ..errors import UsageError
from ..inputs import file_problem
from ..io import atomic_write_text, file_sha256, loads_json
from .run_files import run_subdir

FORMAT = "sharpo-checkpoint/1"
STATE_FILE = "state.json"
OPTIMIZER_FILE = "optimizer.safetensors"
_STEP_NAME = re.compile(r"step_(\d{6,})")
# files a checkpoint never holds: formats whose loading can run code (pickle)
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
_MAX_STATE_BYTES = 256 << 20     # a state.json is kilobytes: parameters live in safetensors


T = TypeVar("T")


class CheckpointError(UsageError):
    """A checkpoint (or ``checkpoints/latest``) that cannot be used; the message names the
    file. `sharpo` prints it as one line and exits 2."""


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


# ------------------------------------------------------------------ writing
def _step_of(path: Path) -> int:
    return int(_STEP_NAME.fullmatch(path.name).group(1))


def _remove(path: Path) -> None:
    """Remove a checkpoint entry of the run: a symbolic link is unlinked (its target, which
    may lie outside the run, is never touched), a directory removed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    _fsync_dir(root)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _split_optimizer_state(sd: dict) -> tuple[dict, dict]:
    """optimizer.state_dict() -> (JSON part, {key: tensor}); tensors are replaced by
    {"tensor": key}. Param groups are plain numbers/bools/strings/lists already."""
    tensors, state = {}, {}
    for pid, entry in sd["state"].items():
        state[str(pid)] = {}
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                key = f"optimizer.{pid}.{name}"
                tensors[key] = value.detach().cpu().contiguous()
                state[str(pid)][name] = {"tensor": key}
            else:
                state[str(pid)][name] = value
    return {"state": state, "param_groups": sd["param_groups"]}, tensors


def save_checkpoint(run_dir: str | Path, step: int, model, tokenizer, optimizer, scheduler,
                    state: dict, keep: int = 2) -> Path:
    """Write checkpoint ``step`` (``state``: the trainer's JSON-able dict) and point
    ``latest`` at it; keep the newest ``keep`` checkpoints."""
    from safetensors.torch import save_file

    from ..models.policy import save_policy

    root = run_subdir(run_dir, "checkpoints")          # refuses a symbolic link
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    _remove(tmp)
    tmp.mkdir()
    try:     # a full disk or a signal meanwhile: the half-written folder goes (it is ours)
        save_policy(model, tokenizer, tmp / "policy")   # safetensors; LoRA: its adapter
        opt_json, tensors = _split_optimizer_state(optimizer.state_dict())
        save_file(tensors, str(tmp / OPTIMIZER_FILE), metadata={"format": FORMAT})
        written = [p for p in sorted(tmp.rglob("*")) if p.is_file()]
        files = {p.relative_to(tmp).as_posix(): p.stat().st_size for p in written}
        sha256 = {p.relative_to(tmp).as_posix(): file_sha256(p) for p in written}
        doc = {"format": FORMAT, "step": step, "trainer": state,
               "scheduler": scheduler.state_dict(), "optimizer": opt_json, "files": files,
               "sha256": sha256}
        (tmp / STATE_FILE).write_text(json.dumps(doc, indent=1) + "\n")   # TypeError: not JSON
        _fsync_tree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _remove(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    atomic_write_text(root / "latest", final.name + "\n")
    # the newest `keep` by step number (text order would put step_1000000 before step_999999)
    steps = sorted((p for p in root.iterdir()
                    if _STEP_NAME.fullmatch(p.name) and p.is_dir() and not p.is_symlink()),
                   key=_step_of)
    for old in steps[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


# ------------------------------------------------------------------ finding / checking
def _warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def latest_checkpoint(run_dir: str | Path,
                      warn: Callable[[str], None] = _warn) -> Optional[Path]:
    """The checkpoint to resume from: the one ``checkpoints/latest`` names, or, when that
    one is incomplete, the newest complete older one (said in one ``warn`` line). None when
    there is no ``latest`` (nothing was checkpointed). CheckpointError (naming the file)
    when ``latest`` is not a bare step name inside the run, names a missing directory, or
    no complete checkpoint is left."""
    found = load_checkpoint(run_dir, lambda path: path, warn)
    return None if found is None else found[0]


def load_checkpoint(run_dir: str | Path, load: Callable[[Path], T],
                    warn: Callable[[str], None] = _warn) -> Optional[tuple[Path, T]]:
    """(path, ``load(path)``) of the newest usable checkpoint: the one ``latest`` names,
    else the newest older one that is complete (``checkpoint_problem``) and that ``load``
    accepts; ``load`` raising CheckpointError (a tensor of the wrong shape, a state that
    does not fit the model) makes it skip to the next older one. Each skip is one ``warn``
    line. None when nothing was checkpointed; CheckpointError as ``latest_checkpoint``."""
    root = checkpoint_dir(run_dir)
    marker = root / "latest"
    if not marker.exists() and not marker.is_symlink():
        return None
    if marker.is_symlink() or not marker.is_file():
        raise CheckpointError(f"{marker}: not a plain file (refused)")
    try:
        name = marker.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{marker}: unreadable ({exc})") from None
    m = _STEP_NAME.fullmatch(name)
    if m is None:
        raise CheckpointError(f"{marker}: names {name[:80]!r}, not a checkpoint of this run "
                              f"(expected step_<6+ digits>; paths are refused)")
    path = root / name
    if not path.exists() and not path.is_symlink():
        raise CheckpointError(f"{marker}: names {name}, which does not exist in {root}")
    older = sorted((p for p in root.iterdir()
                    if _STEP_NAME.fullmatch(p.name) and _step_of(p) < int(m.group(1))),
                   key=_step_of, reverse=True)
    skipped: list[tuple[str, str]] = []          # (name, problem) newest first
    for candidate in [path] + older:
        problem = checkpoint_problem(run_dir, candidate)
        if problem is None:
            try:
                loaded = load(candidate)
            except CheckpointError as exc:
                problem = str(exc)
            else:
                if skipped:
                    also = f" ({len(skipped) - 1} more skipped)" if len(skipped) > 1 else ""
                    warn(f"sharpo: checkpoint {skipped[0][0]} is unusable ({skipped[0][1]}); "
                         f"falling back to {candidate.name}, the newest complete checkpoint{also}")
                return candidate, loaded
        skipped.append((candidate.name, problem))
    first_problem = skipped[0][1]
    raise CheckpointError(f"{first_problem}; no older complete checkpoint in {root}")


_DIGESTS: dict = {}      # (device, inode, size, mtime_ns) -> sha256, this process's reads


def _digest(path: Path) -> str:
    """``file_sha256(path)``, read once per process for the same file content: the same
    inode, size and modification time (a pinned hard link, a checkpoint checked again by
    `sharpo eval` after its plan) reuse it; any write changes the modification time."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = file_sha256(path)
    return _DIGESTS[key]


PIN_PREFIX = ".pin-"        # RUN/checkpoints/.pin-<pid>-<random>/: a reader's pinned copy


def _link_tree(src: Path, dst: Path) -> None:
    """Hard links of every file of ``src`` under ``dst`` (a copy where the file system
    has no hard links); FileNotFoundError when ``src`` goes away meanwhile."""
    for path in sorted(src.rglob("*")):
        target = dst / path.relative_to(src)
        if path.is_dir() and not path.is_symlink():
            target.mkdir()
        else:
            try:
                os.link(path, target, follow_symlinks=False)
            except FileNotFoundError:
                raise
            except OSError:              # no hard links here (EPERM, EXDEV): a copy
                shutil.copy2(path, target, follow_symlinks=False)


def _remove_stale_pins(root: Path) -> None:
    """Remove the pinned copies (``PIN_PREFIX``) of readers that no longer run (a `sharpo
    eval` killed while reading): their hard links would keep a rotated checkpoint's space."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for e in entries:
        pid = e.name[len(PIN_PREFIX):].split("-", 1)[0]
        if not (e.name.startswith(PIN_PREFIX) and pid.isdigit()) or e.is_symlink():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(e.path, ignore_errors=True)
        except (PermissionError, OverflowError):     # another user's process is running
            pass


@contextmanager
def pinned_checkpoint(run_dir: str | Path, warn: Callable[[str], None] = _warn,
                      tries: int = 5):
    """``with pinned_checkpoint(run) as (ckpt, files):`` the newest usable checkpoint
    (``latest_checkpoint``) and a folder ``files`` that holds its files as hard links
    (``RUN/checkpoints/.pin-<pid>-<random>``, removed on leaving), so that a training run
    that rotates ``ckpt`` out meanwhile (``checkpoint.keep``) cannot take its files from
    under a reader (`sharpo eval --run-dir` while training runs). The pinned copy is
    checked complete (sizes and sha256) before it is used; a checkpoint rotated out while
    it was being pinned is pinned again from the new ``latest``; the pins of readers that
    no longer run are removed first. Where the run is not writable, ``files`` is ``ckpt``
    itself. (None, None) when nothing was checkpointed."""
    root = checkpoint_dir(run_dir)
    _remove_stale_pins(root)
    problem = None
    for _ in range(tries):
        ckpt = latest_checkpoint(run_dir, warn)
        if ckpt is None:
            yield None, None
            return
        try:
            pin = Path(tempfile.mkdtemp(prefix=f"{PIN_PREFIX}{os.getpid()}-", dir=root))
        except OSError:                  # a run this user may read, not write
            yield ckpt, ckpt
            return
        try:
            _link_tree(ckpt, pin)
            problem = checkpoint_problem(run_dir, pin)
        except FileNotFoundError as exc:     # rotated out while being linked
            problem = f"{ckpt}: removed while being read ({exc.filename})"
        if problem is None:
            break
        shutil.rmtree(pin, ignore_errors=True)
    else:
        raise CheckpointError(f"{problem}; the run's checkpoints changed {tries} times while "
                              f"being read")
    try:
        yield ckpt, pin
    finally:
        shutil.rmtree(pin, ignore_errors=True)


def checkpoint_problem(run_dir: str | Path, path: str | Path) -> Optional[str]:
    """None when ``path`` is a complete checkpoint of this run, else what is wrong (names
    the file). Cheap: file sizes and safetensors headers, no tensor data read."""
    from safetensors import safe_open

    run_dir, path = Path(run_dir), Path(path)
    if path.is_symlink() or not path.is_dir():
        return f"{path}: not a directory (symbolic links are refused)"
    if not path.resolve().is_relative_to(run_dir.resolve()):
        return f"{path}: resolves outside the run directory {run_dir} (refused)"
    state_file = path / STATE_FILE
    why = file_problem(state_file)      # EACCES is said as such, never "missing"
    if why:
        return f"{state_file}: {why}"
    try:
        doc = _read_state(state_file)
    except CheckpointError as exc:
        return str(exc)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("files"), dict):
        return f"{state_file}: not a {FORMAT} checkpoint state"
    for sub in sorted(path.rglob("*")):
        if sub.is_symlink():
            return f"{sub}: symbolic link in a checkpoint (refused)"
        if sub.suffix in _PICKLE_SUFFIXES:
            return f"{sub}: pickle-format file in a checkpoint (never loaded; refused)"
    sums = doc.get("sha256")     # absent only in a checkpoint of an earlier sharpo
    if sums is not None and (not isinstance(sums, dict) or set(sums) != set(doc["files"])
                             or not all(isinstance(v, str) for v in sums.values())):
        return f"{state_file}: sha256 must give a digest for each of its files"
    if not any(Path(rel).suffix == ".safetensors" and rel.startswith("policy/") for rel in doc["files"]):
        return f"{path / 'policy'}: no safetensors weights listed in {state_file}"
    for rel, size in doc["files"].items():
        f = path / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            return f"{state_file}: lists {rel!r} outside the checkpoint"
        why = file_problem(f)
        if why:
            return f"{f}: {why}"
        if f.stat().st_size != size:
            return f"{f}: {f.stat().st_size} bytes, {size} written (truncated or changed)"
        if sums is not None and _digest(f) != sums[rel]:
            return (f"{f}: its sha256 is not the one written in {state_file} (changed, or "
                    f"a file of another checkpoint)")
        if f.suffix == ".safetensors":
            try:
                with safe_open(str(f), framework="pt"):
                    pass
            except Exception as exc:    # SafetensorError: header / size mismatch
                return f"{f}: unreadable safetensors ({exc})"
    why = file_problem(path / OPTIMIZER_FILE)
    if why:
        return f"{path / OPTIMIZER_FILE}: {why}"
    try:
        with safe_open(str(path / OPTIMIZER_FILE), framework="pt") as f:
            tensor_keys = set(f.keys())
    except Exception as exc:
        return f"{path / OPTIMIZER_FILE}: unreadable safetensors ({exc})"
    return _state_problem(doc, state_file, _step_of(path) if _STEP_NAME.fullmatch(path.name)
                          else None, tensor_keys)


def _read_state(state_file: Path) -> dict:
    try:
        if state_file.stat().st_size > _MAX_STATE_BYTES:
            raise CheckpointError(f"{state_file}: over {_MAX_STATE_BYTES >> 20} MiB (refused)")
        text = state_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{state_file}: not readable JSON ({exc})") from None
    try:
        return loads_json(text, state_file)      # bounded depth: never a RecursionError
    except UsageError as exc:
        raise CheckpointError(str(exc)) from None


def _is_number(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _state_problem(doc: dict, state_file: Path, dir_step: Optional[int],
                   tensor_keys: set) -> Optional[str]:
    """What is wrong with the fields of a state.json (an edited or foreign file), naming
    the field; None when it has every field resume reads, of the right type."""
    step = doc.get("step")
    if not is_int(step) or step < 0:
        return f"{state_file}: step is {step!r}, not a step number"
    if dir_step is not None and step != dir_step:
        return f"{state_file}: step {step} in the checkpoint of step {dir_step}"
    trainer = doc.get("trainer")
    if not isinstance(trainer, dict) or trainer.get("step") != step or not is_int(trainer.get("step")):
        return f"{state_file}: trainer.step must be {step} (got {trainer!r:.80})"
    if "seed" in trainer and not is_int(trainer["seed"]):
        return f"{state_file}: trainer.seed is {trainer['seed']!r:.40}, not an integer"
    if not isinstance(doc.get("scheduler"), dict):
        return f"{state_file}: scheduler is not a JSON object"
    opt = doc.get("optimizer")
    if not isinstance(opt, dict) or not isinstance(opt.get("state"), dict) \
            or not isinstance(opt.get("param_groups"), list) or not opt["param_groups"]:
        return f"{state_file}: optimizer must hold a state object and a param_groups list"
    for k, group in enumerate(opt["param_groups"]):
        if not isinstance(group, dict) or not isinstance(group.get("params"), list) \
                or not all(is_int(i) for i in group["params"]):
            return f"{state_file}: optimizer.param_groups[{k}] is not a param group"
        for name in ("lr", "weight_decay", "eps"):
            if name in group and not _is_number(group[name]):
                return f"{state_file}: optimizer.param_groups[{k}].{name} is {group[name]!r:.40}"
    for pid, entry in opt["state"].items():
        if not pid.isdigit() or not isinstance(entry, dict):
            return f"{state_file}: optimizer.state[{pid!r:.40}] is not a parameter's state"
        for name, v in entry.items():
            if isinstance(v, dict):
                if v.get("tensor") not in tensor_keys:
                    return (f"{state_file}: optimizer.state.{pid}.{name} names tensor "
                            f"{v.get('tensor')!r:.60}, which {OPTIMIZER_FILE} does not hold")
            elif not _is_number(v):
                return f"{state_file}: optimizer.state.{pid}.{name} is {v!r:.40}, not a number"
    return None


def load_state(path: str | Path) -> dict:
    """{"trainer", "scheduler", "optimizer", "step"} of a checkpoint; optimizer is a
    ``state_dict`` (tensors on CPU) for ``optimizer.load_state_dict``. Param-group values
    come back as JSON gives them (lists for tuples): use ``restore_optimizer``."""
    from safetensors.torch import load_file

    path = Path(path)
    state_file, opt_file = path / STATE_FILE, path / OPTIMIZER_FILE
    doc = _read_state(state_file)
    try:
        tensors = load_file(str(opt_file))
    except Exception as exc:
        raise CheckpointError(f"{opt_file}: unreadable safetensors ({exc})") from None
    problem = (f"{state_file}: not a JSON object" if not isinstance(doc, dict) else
               _state_problem(doc, state_file, _step_of(path) if _STEP_NAME.fullmatch(path.name)
                              else None, set(tensors)))
    if problem:
        raise CheckpointError(problem)
    for key, t in tensors.items():       # non-finite statistics: an error, never a state
        if torch.is_floating_point(t) and not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"{opt_file}: tensor {key} holds non-finite values (NaN "
                                  f"or inf); the optimizer state is unusable")
    try:
        opt = doc["optimizer"]
        state = {int(pid): {name: tensors[v["tensor"]] if isinstance(v, dict) else v
                            for name, v in entry.items()}
                 for pid, entry in opt["state"].items()}
        return {"step": int(doc["step"]), "trainer": doc["trainer"], "scheduler": doc["scheduler"],
                "optimizer": {"state": state, "param_groups": opt["param_groups"]}}
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{state_file}: malformed checkpoint state ({exc!r})") from None


def restore_optimizer(optimizer: torch.optim.Optimizer, saved: dict) -> None:
    """``optimizer.load_state_dict`` with each param-group value given back the type the
    fresh optimizer has for it (JSON turns tuples such as AdamW's betas into lists).
    CheckpointError (naming the field) when the saved state does not fit this optimizer:
    other groups or settings, a state tensor whose shape is not its parameter's."""
    fresh_groups = optimizer.state_dict()["param_groups"]
    if len(fresh_groups) != len(saved["param_groups"]):
        raise CheckpointError(f"optimizer: checkpoint has {len(saved['param_groups'])} param "
                              f"groups, the optimizer {len(optimizer.param_groups)}")
    groups = []
    for k, (fresh, old) in enumerate(zip(fresh_groups, saved["param_groups"])):
        # a saved group may hold more keys than a fresh one (a scheduler's initial_lr), not fewer
        if set(fresh) - set(old) or len(fresh["params"]) != len(old["params"]):
            raise CheckpointError(f"optimizer.param_groups[{k}]: keys {sorted(old)} and "
                                  f"{len(old['params'])} parameters; this optimizer has "
                                  f"{sorted(fresh)} and {len(fresh['params'])}")
        group = {}
        for name, v in old.items():
            if name not in fresh:
                if isinstance(v, float) and not math.isfinite(v):
                    raise CheckpointError(f"optimizer.param_groups[{k}].{name}: {v!r}")
                group[name] = v
                continue
            want = fresh[name]
            if isinstance(want, tuple) and isinstance(v, list):
                v = tuple(v)
            if not _same_kind(want, v):
                raise CheckpointError(f"optimizer.param_groups[{k}].{name}: {v!r:.60} where "
                                      f"this optimizer has {type(want).__name__} {want!r:.60}")
            group[name] = v
        groups.append(group)
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for pid, entry in saved["state"].items():
        if not 0 <= pid < len(params):
            raise CheckpointError(f"optimizer.state.{pid}: no such parameter "
                                  f"(the optimizer has {len(params)})")
        for name, v in entry.items():
            if not isinstance(v, torch.Tensor):
                continue
            if v.dim() and v.shape != params[pid].shape:
                raise CheckpointError(f"optimizer.state.{pid}.{name}: shape {list(v.shape)}, "
                                      f"its parameter {list(params[pid].shape)}")
            # load_state_dict would cast it to the parameter's dtype silently: refused
            if not torch.is_floating_point(v) or (v.dim() and v.dtype != params[pid].dtype):
                raise CheckpointError(f"optimizer.state.{pid}.{name}: dtype "
                                      f"{str(v.dtype).replace('torch.', '')}, its parameter "
                                      f"{str(params[pid].dtype).replace('torch.', '')} (an "
                                      f"optimizer state is never cast)")
    optimizer.load_state_dict({"state": saved["state"], "param_groups": groups})


def restore_scheduler(scheduler, saved: dict) -> None:
    """``scheduler.load_state_dict`` of a checkpoint's scheduler state, after checking it
    has the fresh scheduler's keys and value kinds (CheckpointError naming the field)."""
    fresh = scheduler.state_dict()
    if set(fresh) != set(saved):
        raise CheckpointError(f"scheduler: keys {sorted(saved)}; this scheduler has {sorted(fresh)}")
    for name, want in fresh.items():
        if not _same_kind(want, saved[name]):
            raise CheckpointError(f"scheduler.{name}: {saved[name]!r:.60} where this scheduler "
                                  f"has {type(want).__name__} {want!r:.60}")
    scheduler.load_state_dict(saved)


def _same_kind(want, got) -> bool:
    """``got`` (from JSON) can stand for ``want`` (from a fresh object): same kind of value,
    finite numbers, same length for sequences."""
    if want is None or isinstance(want, bool) or isinstance(want, str):
        return type(got) is type(want) if want is not None else got is None
    if isinstance(want, (int, float)):
        return _is_number(got) and (isinstance(want, float) or is_int(got))
    if isinstance(want, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(want) and \
            all(_same_kind(w, g) for w, g in zip(want, got))
    if isinstance(want, dict):
        return isinstance(got, dict) and set(got) == set(want) and \
            all(_same_kind(want[k], got[k]) for k in want)
    return True     # other objects (callables) are not in a JSON state
