"""LoRA adapters for `sharpo train` (``model.lora.*``; extra ``[lora]``: peft 0.21.2).

``model.lora.rank`` > 0 puts LoRA adapters (peft's ``inject_adapter_in_model``) on the
Linear layers named by ``model.lora.targets``; only the adapters train (the base weights
are frozen). The model keeps its class, so the trainer's code paths (shared-prefix scoring
through ``split_lm``, generation, the teacher pass: the same policy, adapters active, no
gradient) are unchanged. Forward per target layer: W x + (alpha / rank) * B (A x), with
A [rank, in] and B [out, rank] (B starts at zero: the step-0 policy is the base model).

Checkpoints (``RUN/checkpoints/step_N/policy/``) hold the adapter, as TRL and verl save it:
``adapter_model.safetensors`` (peft's key names, loadable by ``PeftModel.from_pretrained``),
``adapter_config.json`` (``base_model_name_or_path``: a local directory, a named model's
cached copy included, so nothing looks the base up on the Hub), ``sharpo_lora.json`` (where
the base weights are: a named model by its name) and the
tokenizer; the optimizer state and step are beside it as for full training. Nothing is
unpickled: the adapter is read with safetensors. Evaluation (``sharpo eval --run``) and the
vLLM rollout engine get merged weights, W + (alpha / rank) * B A under the base model's own
parameter names (``merged_state_dict``), as TRL and verl give vLLM.

The base: a named model (``model.path=smollm2-135m-instruct``), a directory (``init_from``
or ``model.path``) or, for the tiny model built in code, ``RUN/lora_base/`` (saved once
when the run starts, so a resume from a checkpoint and ``sharpo eval`` rebuild the same
base; a resume with no checkpoint yet starts over and builds it in code as the first start
did, so it repeats the uninterrupted run).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ..errors import UsageError
from . import tiny
from .named import NAMED_MODELS, named_model_dir

# model.lora.targets (loops/train_config.py LoraSettings): the default, and the names refused
# there (the output head and the embeddings, across architectures; check_targets also
# refuses whatever module a model reports as its input/output embeddings or shares a weight with)
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA_REFUSED_TARGETS = ("lm_head", "embed_tokens", "embed_out", "wte", "word_embeddings",
                        "embed_in", "output_layer")
LORA_HEAD_REASON = ("sharpo's fused log-prob head reads the output head's (and the tied "
                    "embedding's) base weight directly, so an adapter there would never "
                    "train; adapt the decoder's Linear layers (e.g. [q_proj, v_proj])")

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
LORA_META = "sharpo_lora.json"
BASE_DIR = "lora_base"                  # RUN/lora_base: the tiny base built in code
_PEFT_PREFIX = "base_model.model."      # peft's PeftModel key prefix in saved adapters
INSTALL = "pip install -c constraints-cpu.txt '.[lora]' (peft==0.21.2)"


def _peft():
    try:
        import peft
    except ImportError:
        raise UsageError(f"model.lora.rank: LoRA needs peft; {INSTALL}") from None
    return peft


def lora_enabled(lora_cfg: Any) -> bool:
    return lora_cfg is not None and int(getattr(lora_cfg, "rank", 0) or 0) > 0


def is_lora_model(model) -> bool:
    return getattr(model, "sharpo_lora", None) is not None


def is_adapter_dir(path: str | Path | None) -> bool:
    return path is not None and (Path(path) / ADAPTER_CONFIG).is_file()


def apply_lora(model, lora_cfg: Any, base: str):
    """Inject LoRA adapters (in place; returns the model). ``base``: where the base weights
    come from (a named model or a directory), recorded in every saved adapter. UsageError
    naming ``model.lora.targets`` when a target names no Linear layer of the model."""
    peft = _peft()
    targets = check_targets(model, lora_cfg.targets)
    check_lora_fits(model, int(lora_cfg.rank), targets)     # before a single allocation
    config = peft.LoraConfig(r=int(lora_cfg.rank), lora_alpha=float(lora_cfg.alpha),
                             lora_dropout=float(lora_cfg.dropout), target_modules=targets, bias="none")
    dtype = next(model.parameters()).dtype
    peft.inject_adapter_in_model(config, model)
    for name, p in model.named_parameters():        # adapters in the base's dtype (bf16 runs:
        if "lora_" in name:                          # MasterWeightAdamW keeps fp32 masters)
            p.data = p.data.to(dtype)
            p.requires_grad_(True)
        else:
            p.requires_grad_(False)
    model.sharpo_lora = {"config": config, "base": str(base)}
    return model


def lora_parameters(model, rank: int, targets) -> int:
    """Parameter count of rank-``rank`` adapters on the layers named by ``targets``
    (A [r, in] + B [out, r] each), from the layers' shapes; nothing is allocated."""
    from transformers.pytorch_utils import Conv1D

    n, names = 0, set(targets)
    for name, m in model.named_modules():
        if name.rsplit(".", 1)[-1] in names and isinstance(m, (torch.nn.Linear, Conv1D)):
            fan_in, fan_out = (m.in_features, m.out_features) if isinstance(m, torch.nn.Linear) \
                else tuple(m.weight.shape)
            n += rank * (fan_in + fan_out)
    return n


def check_lora_fits(model, rank: int, targets) -> None:
    """UsageError naming ``model.lora.rank`` when the adapters, their gradients and AdamW
    states (16 bytes a parameter; 20 for 16-bit bases with fp32 masters) do not fit in the
    memory free now on the device the model is on (model.check_tiny_model_fits' rule)."""
    n = lora_parameters(model, rank, targets)
    p = next(model.parameters())
    need = n * (16 if p.dtype == torch.float32 else 2 * 2 + 4 + 8)
    device = "cuda" if p.device.type == "cuda" else "cpu"
    free = tiny.available_memory_bytes(f"cuda:{p.device.index or 0}" if device == "cuda" else "cpu")
    if free is not None and need > free:
        raise UsageError(f"model.lora.rank: rank-{rank} adapters on {list(targets)} have "
                         f"{n:,} parameters and need about {need / 2**30:.1f} GiB for weights, "
                         f"gradients and optimizer states; {device} has {free / 2**30:.1f} GiB "
                         f"free (lower model.lora.rank)")


def saved_rank(adapter_dir: str | Path) -> int:
    """The rank of the adapter tensors saved in ``adapter_dir`` (from the safetensors
    header; nothing is loaded): UsageError when the file is unreadable, holds no LoRA
    tensor, or its tensors disagree."""
    from safetensors import safe_open

    path = Path(adapter_dir) / ADAPTER_WEIGHTS
    ranks = set()
    try:
        with safe_open(str(path), framework="pt") as f:
            for k in f.keys():
                shape = f.get_slice(k).get_shape()
                if ".lora_A." in k and len(shape) == 2:
                    ranks.add(int(shape[0]))
                elif ".lora_B." in k and len(shape) == 2:
                    ranks.add(int(shape[1]))
    except Exception as exc:            # missing or corrupt file (SafetensorError, OSError)
        raise UsageError(f"{path}: unreadable adapter ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None
    if len(ranks) != 1:
        raise UsageError(f"{path}: expected LoRA tensors of one rank, found ranks "
                         f"{sorted(ranks)}")
    return ranks.pop()


def check_targets(model, targets) -> list[str]:
    """``targets`` when each names a Linear layer of ``model``, else a UsageError naming
    ``model.lora.targets`` and the model's Linear layer names."""
    targets = list(targets)
    head = _head_names(model)
    refused = [t for t in targets if t in head]
    if refused:
        raise UsageError(f"model.lora.targets: {refused} cannot carry a LoRA adapter in "
                         f"{type(model).__name__}: {LORA_HEAD_REASON}")
    from transformers.pytorch_utils import Conv1D        # GPT-2's linear layers (peft adapts them)

    linear = {name.rsplit(".", 1)[-1] for name, m in model.named_modules()
              if isinstance(m, (torch.nn.Linear, Conv1D))} - head
    missing = [t for t in targets if t not in linear]
    if missing:
        raise UsageError(f"model.lora.targets: {missing} name no Linear layer of {type(model).__name__} "
                         f"(its Linear layers: {sorted(linear)})")
    return targets


def _head_names(model) -> set[str]:
    """Last name parts of the modules LoRA may not target: the output head, the input
    embeddings, and any module holding a weight another module shares (tied weights)."""
    names: set[str] = set()
    special = [m for m in (getattr(model, "get_output_embeddings", lambda: None)(),
                           getattr(model, "get_input_embeddings", lambda: None)()) if m is not None]
    owners: dict[int, list[str]] = {}
    for name, m in model.named_modules(remove_duplicate=False):
        if any(m is s for s in special):
            names.add(name.rsplit(".", 1)[-1])
        w = getattr(m, "weight", None)
        if isinstance(w, torch.Tensor) and name:
            owners.setdefault(id(w), []).append(name.rsplit(".", 1)[-1])
    for parts in owners.values():
        if len(set(parts)) > 1:
            names.update(parts)
    return names


def adapter_state_dict(model) -> dict[str, torch.Tensor]:
    """The adapter tensors under peft's saved names (``base_model.model.<module>.lora_A.weight``)."""
    peft = _peft()
    sd = peft.get_peft_model_state_dict(model)
    return {_PEFT_PREFIX + k: v.detach().cpu().contiguous() for k, v in sd.items()}


def save_adapter(model, tokenizer, out: str | Path) -> None:
    """``out``/adapter_model.safetensors + adapter_config.json + sharpo_lora.json + tokenizer.
    A base directory inside the run is recorded relative to ``out`` (the run can move)."""
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    info = model.sharpo_lora
    config = info["config"]
    base = info["base"]
    # a local directory, never a bare name: peft would look a name up on the Hub
    config.base_model_name_or_path = local_base(base)
    save_file(adapter_state_dict(model), str(out / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    config.save_pretrained(str(out))
    rel = base
    if Path(base).is_absolute():
        try:
            rel = str(Path(base).relative_to(out.resolve().parents[2]))   # RUN/<base>
            rel = str(Path("..", "..", "..", rel))                         # from RUN/checkpoints/step_N/policy
        except (ValueError, IndexError):
            rel = base
    (out / LORA_META).write_text(json.dumps({"base": rel, "rank": config.r, "alpha": config.lora_alpha,
                                             "targets": sorted(config.target_modules)}, indent=1) + "\n")
    tokenizer.save_pretrained(str(out))


def local_base(base: str) -> str:
    """The directory holding the base weights: a named model's cached copy
    (named.named_model_dir), else ``base`` itself."""
    return str(named_model_dir(base)) if base in NAMED_MODELS else str(base)


def adapter_base(adapter_dir: str | Path) -> str:
    """The base an adapter directory applies to: a named model, or a directory (a relative
    one is resolved from ``adapter_dir``)."""
    adapter_dir = Path(adapter_dir)
    meta = adapter_dir / LORA_META
    try:
        base = json.loads(meta.read_text())["base"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{meta}: unreadable LoRA record ({exc})") from None
    if base in NAMED_MODELS or Path(base).is_absolute():
        return base
    return str((adapter_dir / base).resolve())


def load_adapter(model, adapter_dir: str | Path) -> None:
    """Load ``adapter_dir``'s adapter tensors (safetensors) into a model with adapters of the
    same shape (``apply_lora``); every adapter tensor must be present and match."""
    from safetensors.torch import load_file

    peft = _peft()
    path = Path(adapter_dir) / ADAPTER_WEIGHTS
    try:
        saved = load_file(str(path))
    except Exception as exc:            # missing or corrupt file
        raise UsageError(f"{path}: unreadable adapter ({exc})") from None
    saved = {k[len(_PEFT_PREFIX):] if k.startswith(_PEFT_PREFIX) else k: v for k, v in saved.items()}
    expected = peft.get_peft_model_state_dict(model)
    missing, extra = sorted(set(expected) - set(saved)), sorted(set(saved) - set(expected))
    wrong = [f"{k}: shape {list(saved[k].shape)} saved, {list(expected[k].shape)} expected"
             for k in sorted(expected) if k in saved and saved[k].shape != expected[k].shape]
    if missing or extra or wrong:
        what = "; ".join(wrong[:2] + [f"missing {missing[:2]}"] * bool(missing)
                         + [f"not in this model {extra[:2]}"] * bool(extra))
        raise UsageError(f"{path}: adapter tensors do not match model.lora.* of this run "
                         f"({what})")
    result = peft.set_peft_model_state_dict(model, saved)
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise UsageError(f"{path}: unexpected adapter tensors {unexpected[:3]}")


def _lora_layers(model):
    from peft.tuners.lora import LoraLayer

    return [(name, m) for name, m in model.named_modules() if isinstance(m, LoraLayer)]


@torch.no_grad()
def merged_state_dict(model) -> dict[str, torch.Tensor]:
    """The base model's state dict with every adapter merged in: for each LoRA layer
    ``<name>.weight = W + (alpha / rank) * B @ A`` under the base's own names (no
    ``base_layer`` / ``lora_`` entries). A model without adapters: its state dict."""
    if not is_lora_model(model):
        return dict(model.state_dict())
    layers = dict(_lora_layers(model))
    out = {}
    for key, value in model.state_dict().items():
        if ".lora_" in key:
            continue
        if ".base_layer." in key:
            owner, leaf = key.split(".base_layer.", 1)
            name = f"{owner}.{leaf}"
            layer = layers.get(owner)
            if layer is not None and leaf == "weight":
                delta = sum(layer.get_delta_weight(a) for a in layer.active_adapters)
                value = (value.float() + delta.float()).to(value.dtype)
            out[name] = value
        else:
            out[key] = value
    return out


def merged_copy(model):
    """A plain model of the base's class holding the merged weights (for saving or
    evaluation); the LoRA model is untouched."""
    import copy

    config = copy.deepcopy(model.config)
    plain = type(model)(config).to(next(model.parameters()).dtype)
    missing, unexpected = plain.load_state_dict(merged_state_dict(model), strict=False)
    missing = [k for k in missing if k not in _tied_keys(plain)]
    if missing or unexpected:
        raise RuntimeError(f"merged LoRA weights do not fit {type(plain).__name__}: missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]}")
    plain.generation_config = copy.deepcopy(model.generation_config)
    return plain.eval()


def _tied_keys(model) -> set:
    tied = getattr(model, "_tied_weights_keys", None) or {}
    return set(tied) if not isinstance(tied, dict) else set(tied.keys())


def save_lora_base(model, tokenizer, run_dir: str | Path) -> Path:
    """Write the (tiny, built-in-code) base model once to ``RUN/lora_base`` (atomic rename)."""
    import shutil
    import tempfile

    out = Path(run_dir) / BASE_DIR
    if (out / "config.json").is_file():
        return out
    tmp = Path(tempfile.mkdtemp(prefix=".lora_base.", dir=run_dir))
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
