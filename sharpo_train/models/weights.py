"""Loading a model directory's weights through safetensors only (docs/run_directory.md,
"Nothing executable is loaded"): the directory check and ``from_pretrained`` with errors
that name the setting."""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import UsageError
from ..inputs import file_problem
from ..io import loads_json


_SAFE_SHARD = re.compile(r"[A-Za-z0-9_.-]+\.safetensors")


_PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt",
                   "model.pth", "adapter_model.bin")


def check_weights_dir(path: str | Path, key: str) -> Path:
    """``path`` is a local model directory whose weights load through safetensors only
    (docs/run_directory.md, "Nothing executable is loaded"): ``model.safetensors``, or
    ``model.safetensors.index.json`` naming ``*.safetensors`` shards inside it; a
    ``config.json`` that points ``transformers_weights`` anywhere else is refused. A
    directory with only ``pytorch_model.bin`` (a pickle) is a UsageError naming ``key``
    (``init_from``, ``--model``, ``model.path``); nothing is read beyond two JSON files."""

    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{_where(key, path)} is not a local model directory")
    cfg = path / "config.json"
    if not cfg.is_file():
        raise UsageError(f"{_where(key, path)} has no config.json (not a Hugging Face model directory)")
    doc = loads_json(_read_small(cfg, key), f"{key}: {cfg}")
    if not isinstance(doc, dict):
        raise UsageError(f"{key}: {cfg} is not a JSON object")
    explicit = doc.get("transformers_weights")
    if explicit is not None:
        raise UsageError(f"{key}: {cfg} sets transformers_weights={explicit!r}; sharpo loads "
                         f"only model.safetensors or model.safetensors.index.json (remove the key)")
    if (path / "model.safetensors").is_file():
        _readable(path / "model.safetensors", key)
        check_float_tensors(path / "model.safetensors", key)
        return path
    index = path / "model.safetensors.index.json"
    if index.is_file():
        doc = loads_json(_read_small(index, key), f"{key}: {index}")
        shards = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(shards, dict) or not shards:
            raise UsageError(f"{key}: {index} has no weight_map")
        for name in sorted(set(map(str, shards.values()))):
            if not _SAFE_SHARD.fullmatch(name) or name.startswith("."):
                raise UsageError(f"{key}: {index} names shard {name!r}; only *.safetensors "
                                 f"files inside {path} are loaded (pickle never)")
            if not (path / name).is_file():
                raise UsageError(f"{key}: {index} names shard {name}, which is missing")
            _readable(path / name, key)
            check_float_tensors(path / name, key)
        return path
    pickled = [n for n in _PICKLE_WEIGHTS if (path / n).exists()]
    if pickled:
        raise UsageError(f"{_where(key, path)} holds only pickle-format weights ({pickled[0]}); sharpo "
                         f"never unpickles: save the model with safetensors "
                         f"(save_pretrained(..., safe_serialization=True)) and pass that directory")
    raise UsageError(f"{_where(key, path)} has no model.safetensors (nor a safetensors index)")


# safetensors dtype codes of floating tensors: a model's weights are one of these.
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")


def _readable(file: Path, key: str) -> None:
    """UsageError naming ``key`` when ``file`` cannot be read (EACCES said as such:
    safetensors' loader calls it "No such file or directory")."""
    why = file_problem(file)
    if why:
        raise UsageError(f"{key}: {file}: {why}")


def check_float_tensors(file: Path, key: str) -> None:
    """Every tensor of the safetensors ``file`` is floating point (its header's dtypes: the
    first 8 bytes give the JSON header's length): an int32 or bool tensor where weights
    are expected would be cast silently to the model's dtype. A UsageError naming the
    tensor and the file. A header that cannot be read is left to the loader, whose error
    names the file."""
    import struct

    try:
        with open(file, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return
            (n,) = struct.unpack("<Q", head)
            if n > 100 << 20:
                return
            doc = loads_json(f.read(n).decode("utf-8"), file)
    except (OSError, ValueError, UnicodeDecodeError):
        return
    if not isinstance(doc, dict):
        return
    for name, info in doc.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        dtype = info.get("dtype")
        if isinstance(dtype, str) and dtype not in FLOAT_DTYPES:
            raise UsageError(f"{key}: {file}: tensor {name!r} has dtype {dtype}; weights must "
                             f"be floating point ({', '.join(FLOAT_DTYPES[:4])}), not cast "
                             f"silently")


def _read_small(path: Path, key: str, limit: int = 64 << 20) -> str:
    if path.stat().st_size > limit:
        raise UsageError(f"{_where(key, path)} is over {limit >> 20} MiB (not a model config/index)")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{_where(key, path)} is not UTF-8 text ({exc.reason})") from None


def load_pretrained(path: str | Path, key: str, **kwargs):
    """``AutoModelForCausalLM.from_pretrained`` of a checked directory (``check_weights_dir``)
    with ``use_safetensors=True`` (no pickle, no remote code). A weight of the wrong shape,
    or one the model needs that the files lack, is a UsageError naming ``key`` and the
    directory, not a traceback nor a silently re-initialised tensor."""
    from transformers import AutoModelForCausalLM

    path = check_weights_dir(path, key)
    try:   # mismatched shapes come back in ``info`` (named below) instead of a RuntimeError
        model, info = AutoModelForCausalLM.from_pretrained(
            str(path), use_safetensors=True, trust_remote_code=False,
            output_loading_info=True, ignore_mismatched_sizes=True, **kwargs)
    except Exception as exc:     # RuntimeError, OSError, ValueError, KeyError, SafetensorError
        _attn_error(exc, kwargs.get("attn_implementation"))
        if not isinstance(exc, (RuntimeError, OSError, ValueError, KeyError)) and \
                type(exc).__name__ != "SafetensorError":
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"{_where(key, path)} cannot be loaded ({type(exc).__name__}: "
                         f"{first[:300]})") from None
    problems = [f"{name}: shape {list(saved)} in the files, {list(want)} in the model"
                for name, saved, want in sorted(info.get("mismatched_keys") or ())]
    problems += [f"{name}: missing from the files" for name in sorted(info.get("missing_keys") or ())]
    # a tensor the model has no place for: another model's file, or one edited in (loading
    # would drop it silently); transformers leaves out the ones a family may carry
    problems += [f"{name}: in the files, not in this model"
                 for name in sorted(info.get("unexpected_keys") or ())]
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        raise UsageError(f"{_where(key, path)} does not hold this model's weights "
                         f"({'; '.join(problems[:3])}{more})")
    check_finite(model.state_dict(), key, lambda name: _weights_file(path, name))
    return model


def check_finite(tensors, key: str, file_of) -> None:
    """UsageError naming ``key``, the file (``file_of(tensor name)``) and the tensor when a
    floating-point tensor of ``tensors`` (a name -> tensor mapping) holds NaN or inf:
    weights like that are an error, never a model that trains or is evaluated
    (docs/run_directory.md, "Non-finite weights")."""
    import torch

    for name, t in tensors.items():
        if torch.is_floating_point(t) and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            raise UsageError(f"{key}: {file_of(name)}: tensor {name} holds {bad} non-finite "
                             f"value(s) (NaN or inf); sharpo neither trains nor evaluates "
                             f"such weights")


def _weights_file(path: Path, name: str) -> Path:
    """The safetensors file of ``path`` that holds tensor ``name`` (its shard)."""
    index = path / "model.safetensors.index.json"
    if not (path / "model.safetensors").is_file() and index.is_file():
        try:
            shards = loads_json(_read_small(index, str(index)), index).get("weight_map", {})
        except (UsageError, AttributeError, OSError):
            shards = {}
        for candidate in (name, name.split(".", 1)[-1], f"model.{name}"):
            if isinstance(shards.get(candidate), str):
                return path / shards[candidate]
        return index
    return path / "model.safetensors"


def _attn_error(exc: BaseException, attn) -> None:
    """A UsageError naming ``model.attn_implementation`` when ``exc`` is transformers
    refusing it (unknown, or its package, e.g. flash-attn, not installed)."""
    text = str(exc)
    if attn and isinstance(exc, (ImportError, ValueError)) and (
            "attn_implementation" in text or "Attention" in text):
        first = (text.strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"model.attn_implementation: {attn!r} cannot be used here "
                         f"({first[:200]}); sdpa and eager always work") from None


def _where(key: str, path: Path) -> str:
    """``key: path`` for an error message (just the path when the key is the path)."""
    return str(path) if key == str(path) else f"{key}: {path}"
