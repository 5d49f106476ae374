"""The tiny Qwen2 built in code (``model.path`` unset): its transformers config, its parameter
count and the check that it fits the device before anything is allocated."""
from __future__ import annotations

from typing import Any, Optional

import torch

from ..assets.build_tokenizer import VOCAB_SIZE
from ..errors import UsageError
from . import setting as _get
from .tokenizer import build_tokenizer


TORCH_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


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
    width = 4 if TORCH_DTYPES.get(dtype, torch.float32) == torch.float32 else 2
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
