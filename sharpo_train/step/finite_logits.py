"""Non-finite logits are an error, never a sampled token (docs/run_directory.md,
"Non-finite weights"): finite weights can still give NaN or inf logits (a norm weight of
3e38 overflows in the forward pass). Greedy decoding would take the argmax of NaN (token 0)
and score the episode as a plain failure; sampling would stop in torch.multinomial with a
traceback. ``guarded_generate`` runs ``model.generate`` with ``FiniteLogitsGuard``, a
logits processor that marks a row whose scores hold NaN or +inf, or are -inf everywhere
(no token left), replaces that row by zeros so that generation goes on, and raises
``NonFiniteLogitsError`` after ``generate`` returns: one flag on the device, one host read
per call, nothing per token. Callers name the checkpoint (loops/evaluate.py, the trainer).
"""
from __future__ import annotations

import torch

from ..errors import UsageError


class NonFiniteLogitsError(UsageError):
    """The policy's logits held NaN or inf while generating; the caller's message names
    the weights (a checkpoint, a model folder). One line, exit 2."""


class FiniteLogitsGuard:
    """A transformers logits processor (``__call__(input_ids, scores) -> scores``) that
    records, on the scores' device, whether any row [b, V] was non-finite."""

    def __init__(self):
        self.bad = None          # bool tensor, True once a row was non-finite

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        row_bad = (torch.isnan(scores) | torch.isposinf(scores)).any(-1) | \
            torch.isneginf(scores).all(-1)                               # [b]
        seen = row_bad.any()
        self.bad = seen if self.bad is None else (self.bad | seen)
        return torch.where(row_bad[:, None], torch.zeros_like(scores), scores)

    def check(self, what: str = "the policy") -> None:
        """NonFiniteLogitsError when a non-finite row was seen (one host read)."""
        if self.bad is not None and bool(self.bad):
            raise NonFiniteLogitsError(f"{what}: the logits hold NaN or inf (finite weights "
                                       f"that overflow in the forward pass); nothing generated "
                                       f"from them is used")


def guarded_generate(model, **kwargs):
    """``model.generate(**kwargs)`` with ``FiniteLogitsGuard`` last among its logits
    processors; NonFiniteLogitsError (instead of a result) when a step's logits were not
    finite."""
    from transformers import LogitsProcessorList

    guard = FiniteLogitsGuard()
    procs = LogitsProcessorList(list(kwargs.pop("logits_processor", None) or []) + [guard])
    out = model.generate(logits_processor=procs, **kwargs)
    guard.check()
    return out
