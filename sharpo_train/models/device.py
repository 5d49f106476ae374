"""Where the policy runs and in what precision: ``resolve_device`` (``model.device``) and
``autocast`` (bf16 autocast on CUDA when ``model.autocast_bf16`` is on; a no-op elsewhere).
Used by the trainer, evaluation, generation, scoring and the update alike."""
from __future__ import annotations

import contextlib

import torch


def resolve_device(name: str) -> torch.device:
    """``model.device`` ("auto" | "cpu" | "cuda" | "cuda:N") -> a torch.device; a ValueError
    naming model.device when it is malformed or CUDA is missing."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"model.device: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"model.device: {name!r} requested but CUDA is not available")
    return dev


def autocast(device: torch.device, enabled: bool):
    """bf16 autocast on a CUDA ``device`` when ``enabled``, else a null context."""
    if enabled and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
