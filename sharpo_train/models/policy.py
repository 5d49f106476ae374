"""The policy, built without any download: ``build_policy(model_cfg) -> (model, tokenizer)``.

``model.path`` unset -> the tiny ``Qwen2ForCausalLM`` built in code (tiny.py; random weights
from the current torch seed); a local Hugging Face checkpoint directory (e.g.
Qwen2.5-7B-Instruct) -> loaded with its own tokenizer through safetensors (weights.py); a
named model (named.py, e.g. ``smollm2-135m-instruct``) -> its cached dequantised copy; a LoRA
checkpoint -> base + adapter, merged (``load_merged``; adapters: lora.py). Then
``model.trainable_layers`` chooses what trains (``configure_trainable``). ``split_lm`` gives
the decoder body and the lm_head weight/bias, so the trainer runs the body and scores only
generated positions with ``sharpo_kernels.linear_logprobs`` (no [T, V] logits).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import torch

from ..errors import UsageError
from . import setting as _get
from .lora import (BASE_DIR, LORA_META, _peft, adapter_base, apply_lora, check_adapter_scale,
                   check_targets,
                   is_adapter_dir, is_lora_model, load_adapter, merged_copy, save_adapter,
                   save_lora_base, saved_rank)
from .named import NAMED_MODELS, resolve_model_path
from .tiny import TORCH_DTYPES, _allocation_error, check_tiny_model_fits, tiny_qwen2_config
from .tokenizer import build_tokenizer
from .weights import _attn_error, check_finite, load_pretrained


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

    if is_adapter_dir(weights_from):      # a LoRA checkpoint: base + adapter, merged (lora.py)
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
    dtype = TORCH_DTYPES.get(str(_get(model_cfg, "dtype", "float32")))
    if dtype is None:
        raise ValueError(f"model.dtype: unknown dtype {_get(model_cfg, 'dtype')!r}; "
                         f"choose one of {sorted(TORCH_DTYPES)}")
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
    out = Path(out)
    if is_lora_model(model):
        save_adapter(model, tokenizer, out)
        return
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def load_merged(adapter_dir: str | Path, model_cfg: Any = None):
    """-> (plain model with the adapter merged, tokenizer) from a LoRA checkpoint's policy/
    directory: the base rebuilt from ``sharpo_lora.json``, the adapter loaded, then merged
    (``sharpo eval --run`` on a LoRA run)."""
    from types import SimpleNamespace

    peft = _peft()
    adapter_dir = Path(adapter_dir)
    base = adapter_base(adapter_dir)
    cfg = peft.LoraConfig.from_pretrained(str(adapter_dir))
    rank = saved_rank(adapter_dir)      # before adapters of the config's rank are allocated
    if cfg.r != rank:
        raise UsageError(f"{adapter_dir / 'adapter_config.json'}: says r={cfg.r!r} but the "
                         f"saved adapter tensors have rank {rank} (edited or mixed up?)")
    check_adapter_scale(adapter_dir, cfg.lora_alpha, cfg.r)   # NaN, inf, 1e308: refused
    settings = SimpleNamespace(rank=cfg.r, alpha=cfg.lora_alpha, dropout=0.0,
                               targets=sorted(cfg.target_modules))
    fields = {k: getattr(model_cfg, k) for k in ("dtype", "attn_implementation", "tokenizer_path")
              if model_cfg is not None and hasattr(model_cfg, k)}
    if base in NAMED_MODELS:
        model, _ = build_policy(dict(fields, path=base))
    else:
        if not Path(base).is_dir():
            raise UsageError(f"{adapter_dir / LORA_META}: the LoRA base {base} is not a directory "
                             f"(moved or deleted?)")
        model, _ = build_policy(dict(fields, path=None), weights_from=base)
    tokenizer = build_tokenizer(adapter_dir, str(adapter_dir))
    apply_lora(model, settings, base)
    load_adapter(model, adapter_dir)
    merged = merged_copy(model)
    check_finite(merged.state_dict(), str(adapter_dir),       # alpha/r * B A overflowed
                 lambda name: f"{adapter_dir / 'adapter_config.json'} (lora_alpha="
                              f"{cfg.lora_alpha!r}) with {adapter_dir / 'adapter_model.safetensors'}"
                              f", merged into")
    return merged, tokenizer


def build_lora_policy(cfg, run_dir: str | Path, ckpt: Optional[Path]):
    """The policy of a LoRA run -> (model, tokenizer): the base (``init_from``, else
    ``model.path``, else the tiny model saved once to RUN/lora_base), adapters from
    ``model.lora``, and on resume the checkpoint's adapter."""
    run_dir = Path(run_dir)
    if cfg.init_from:
        model, tokenizer = build_policy(cfg.model, weights_from=cfg.init_from)
        base = str(Path(cfg.init_from).resolve())
    elif cfg.model.path:
        model, tokenizer = build_policy(cfg.model)
        base = cfg.model.path if cfg.model.path in NAMED_MODELS else str(Path(cfg.model.path).resolve())
    else:
        saved = run_dir / BASE_DIR
        if ckpt is not None:             # the checkpoint's adapter applies to the saved base
            model, tokenizer = build_policy(cfg.model, weights_from=saved)
        else:   # a start, or a resume with no checkpoint yet: built as the first start did,
            # so the RNG reaches the adapters' initialisation in the same state
            model, tokenizer = build_policy(cfg.model)
            check_targets(model, cfg.model.lora.targets)   # refused before anything is written
            save_lora_base(model, tokenizer, run_dir)      # kept when already there
        base = str(saved.resolve())
    apply_lora(model, cfg.model.lora, base)
    if ckpt is not None:
        load_adapter(model, ckpt / "policy")
    return model, tokenizer
