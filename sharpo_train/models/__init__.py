"""The policy and its tokenizer: building (tiny, local, named GGUF models), LoRA adapters,
the fp32 master-weight optimizer, device and autocast.

    tokenizer.py  the shipped tokenizer            named.py    packaged models, their cache
    weights.py    safetensors-only loading         tiny.py     the tiny model built in code
    policy.py     build_policy, what trains        lora.py     LoRA adapters (peft)
    optimizer.py  AdamW with fp32 master weights   device.py   device and autocast

Inside: policy.py imports the others; lora.py imports only named.py and tiny.py (no
cycle).
"""
from typing import Any


def setting(cfg: Any, key: str, default=None):
    """``cfg.key`` of a settings dataclass, ``cfg[key]`` of a dict, ``default`` when absent."""
    if cfg is None:
        return default
    if isinstance(cfg, dict):
        return cfg.get(key, default)
    return getattr(cfg, key, default)
