"""Argument checks of `token_logprobs` and `linear_logprobs` (docs/api.md: bad input raises
a ValueError/TypeError whose message starts with the argument's name; nothing is computed).

All checks but `check_label_values` and the finiteness checks read only metadata (types,
shapes, dtypes, devices), so they are fine inside a `torch.compile` graph;
`check_label_values`, `check_finite_logits` and `check_finite_linear` read the data (a
device sync on CUDA) and run inside the dispatch that torch.compile leaves out.

Finiteness (``check_finite``, docs/api.md "Non-finite inputs"): a row that is scored (its
label is not ignore_index) must not hold NaN or +inf, and not be -inf everywhere; -inf
entries are masked tokens and allowed (their log-prob is -inf). The check is one max
pass over the inputs, no [N, V] temporary: on by default for CPU tensors, off for CUDA
tensors (it would add a pass over the logits and a host sync to every call). With the check
on, the scaled logits must also stay representable (docs/api.md "Accepted ranges"): a
scored row's max/T and (max - logit at the label)/T within half the computation dtype's
range, so every backend returns the same finite log-prob rather than -inf/NaN from an
overflow; for `linear_logprobs` the logits are bounded without forming them,
|z| <= ||h||_1 * max|W| + max|b| (Hoelder).
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
LABEL_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
_INT64 = torch.iinfo(torch.int64)
# temperature range (docs/api.md "Accepted ranges"): a normal float32 whose reciprocal is a
# normal float32 too, so 1/T and x/T mean the same on every backend (the Triton kernels
# hold T and 1/T in fp32).
TEMPERATURE_MIN = 2.0 ** -126          # 1.18e-38
TEMPERATURE_MAX = 2.0 ** 126           # 8.5e37


def _half_range(dtype: torch.dtype) -> float:
    """Half the largest finite value of the computation dtype (fp64 for fp64 inputs, else
    fp32): the bound scaled logits must stay under, with room for the rounding."""
    return torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).max / 2


def check_float(name: str, t, *, ndim_min: int = 1) -> None:
    """A floating tensor with at least `ndim_min` dimensions that holds data (not meta)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in FLOATS:
        raise TypeError(f"{name}: expected a floating tensor (float32/bfloat16/float16/"
                        f"float64), got {t.dtype}")
    if t.dim() < ndim_min:
        raise ValueError(f"{name}: expected at least {ndim_min} dimension(s), got shape "
                         f"{tuple(t.shape)}")
    if t.device.type == "meta":
        raise ValueError(f"{name}: meta tensors hold no data; the log-prob kernels need the "
                         f"values (CPU or CUDA tensors)")


def check_scalars(temperature, ignore_index, return_entropy) -> tuple[float, int]:
    """temperature finite and > 0, ignore_index an int64 value, return_entropy a bool.
    Returns (temperature as float, ignore_index as int)."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature: expected a real number, got {type(temperature).__name__}")
    try:
        temperature = float(temperature)
    except OverflowError:          # an int beyond float64 (10**400)
        raise ValueError(f"temperature: must be finite and > 0, got an int of "
                         f"{len(str(abs(int(temperature))))} digits") from None
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature: must be finite and > 0, got {temperature}")
    if not TEMPERATURE_MIN <= temperature <= TEMPERATURE_MAX:
        raise ValueError(f"temperature: must lie in [2**-126, 2**126] (~[1.2e-38, 8.5e37]: "
                         f"it and its reciprocal must be normal float32 numbers), got "
                         f"{temperature:g}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
        raise TypeError(f"ignore_index: expected an int, got {type(ignore_index).__name__}")
    ignore_index = int(ignore_index)
    if not _INT64.min <= ignore_index <= _INT64.max:
        raise ValueError(f"ignore_index: must fit in int64 (labels are compared as int64), "
                         f"got {ignore_index}")
    if not isinstance(return_entropy, bool):
        raise TypeError(f"return_entropy: expected a bool, got {type(return_entropy).__name__}")
    return temperature, ignore_index


def check_labels(labels, shape, device) -> None:
    """Type, shape [...] (the leading dimensions) and device of labels (no data access)."""
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"labels: expected a torch.Tensor, got {type(labels).__name__}")
    if labels.dtype not in LABEL_DTYPES:
        raise TypeError(f"labels: expected an integer tensor, got {labels.dtype}")
    if tuple(labels.shape) != tuple(shape):
        raise ValueError(f"labels: expected shape {tuple(shape)} (the leading dimensions), "
                         f"got {tuple(labels.shape)}")
    if labels.device != device:
        raise ValueError(f"labels: expected device {device}, got {labels.device}")


def check_label_values(labels: torch.Tensor, vocab: int, ignore_index: int) -> None:
    """Every label in [0, vocab) or ignore_index. Reads the data (a device sync on CUDA), so
    it runs inside the dispatch that torch.compile leaves out of its graph."""
    if labels.numel():
        bad = ((labels < 0) | (labels >= vocab)) & (labels != ignore_index)
        if bool(bad.any()):
            first = labels[bad].reshape(-1)[0].item()
            raise ValueError(f"labels: value {first} is out of range [0, {vocab}) and is not "
                             f"ignore_index={ignore_index}")


def check_linear(hidden, weight, bias: Optional[torch.Tensor]) -> None:
    """hidden [..., H], weight [V, H] (V, H > 0), bias [V] or None: one dtype, one device."""
    check_float("hidden", hidden)
    check_float("weight", weight, ndim_min=2)
    if weight.dim() != 2:
        raise ValueError(f"weight: expected shape [V, H], got {tuple(weight.shape)}")
    if weight.shape[0] == 0:
        raise ValueError("weight: the vocabulary dimension V is empty")
    if weight.shape[1] != hidden.shape[-1]:
        raise ValueError(f"weight: expected [V, {hidden.shape[-1]}] to match hidden [..., "
                         f"{hidden.shape[-1]}], got {tuple(weight.shape)}")
    if hidden.shape[-1] == 0:
        raise ValueError(f"hidden: the hidden (last) dimension H is empty, got shape "
                         f"{tuple(hidden.shape)}")
    if weight.dtype != hidden.dtype:
        raise TypeError(f"weight: dtype {weight.dtype} differs from hidden's {hidden.dtype}")
    if weight.device != hidden.device:
        raise ValueError(f"weight: device {weight.device} differs from hidden's {hidden.device}")
    if bias is not None:
        check_float("bias", bias)
        if tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"bias: expected shape ({weight.shape[0]},), got "
                             f"{tuple(bias.shape)}")
        if bias.dtype != weight.dtype:
            raise TypeError(f"bias: dtype {bias.dtype} differs from weight's {weight.dtype}")
        if bias.device != weight.device:
            raise ValueError(f"bias: device {bias.device} differs from weight's "
                             f"{weight.device}")


def resolve_check_finite(flag, device: torch.device) -> bool:
    """``check_finite``: None -> True on CPU, False elsewhere; else a bool."""
    if flag is None:
        return device.type == "cpu"
    if not isinstance(flag, bool):
        raise TypeError(f"check_finite: expected a bool or None, got {type(flag).__name__}")
    return flag


@torch.no_grad()
def check_finite_logits(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int,
                        temperature: float = 1.0) -> None:
    """logits [N, V], labels [N]: every scored row free of NaN/+inf and not all -inf, and
    its scaled logits representable: max/T, (max - logit at the label) and that over T
    within half the computation dtype's range (a label at -inf, masked, is allowed).
    One row-max pass (max propagates NaN) and a gather, no [N, V] temporary."""
    if not logits.numel():
        return
    hi = logits.amax(dim=-1)                                      # [N]
    scored = labels != ignore_index
    bad = ~torch.isfinite(hi) & scored
    if bool(bad.any()):
        r = int(bad.nonzero()[0, 0])
        h = float(hi[r])
        what = "NaN" if math.isnan(h) else "+inf" if h > 0 else "only -inf"
        raise ValueError(f"logits: row {r} (label {int(labels[r])}) holds {what}; scored rows "
                         f"must be finite (-inf entries, masked tokens, are allowed; pass "
                         f"check_finite=False to skip this check and get NaN out)")
    if not bool(scored.any()):
        return
    safe = torch.where(scored, labels, torch.zeros_like(labels))
    at = logits.gather(1, safe[:, None])[:, 0].double()           # [N] logit at the label
    top = hi.double()
    span = torch.where(torch.isfinite(at), top - at, torch.zeros_like(top))      # [N] >= 0
    need = torch.maximum(span * max(1.0, 1.0 / temperature), top.abs() / temperature)
    bad = (need > _half_range(logits.dtype)) & scored
    if bool(bad.any()):
        r = int(bad.nonzero()[0, 0])
        raise ValueError(f"logits: row {r} (label {int(labels[r])}) overflows once scaled by "
                         f"1/temperature={temperature:g}: max {float(top[r]):g}, logit at the "
                         f"label {float(at[r]):g}; the log-prob would not be finite "
                         f"(docs/api.md, \"Accepted ranges\")")


@torch.no_grad()
def check_finite_linear(hidden: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                        labels: torch.Tensor, ignore_index: int, temperature: float = 1.0) -> None:
    """hidden [N, H] (scored rows), weight [V, H] finite; bias [V] free of NaN/+inf (-inf:
    a masked token); the bound on the scaled logits of every scored row within half the
    computation dtype's range (one L1-norm pass over hidden; no [N, V], no copy of W)."""
    scored = labels != ignore_index
    if hidden.numel() and bool(scored.any()):
        bad = ~torch.isfinite(hidden.abs().amax(dim=-1)) & scored          # [N]
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            raise ValueError(f"hidden: row {r} (label {int(labels[r])}) holds NaN or inf; "
                             f"scored rows must be finite (pass check_finite=False to skip "
                             f"this check and get NaN out)")
    lo, hi = torch.aminmax(weight)
    if not (math.isfinite(float(lo)) and math.isfinite(float(hi))):
        raise ValueError("weight: holds NaN or inf (pass check_finite=False to skip this "
                         "check and get NaN out)")
    b_abs = 0.0
    if bias is not None and bias.numel():
        hi = float(bias.max())
        if math.isnan(hi) or hi == math.inf or hi == -math.inf:
            raise ValueError(f"bias: holds {'NaN' if math.isnan(hi) else '+inf' if hi > 0 else 'only -inf'} "
                             f"(-inf entries, masked tokens, are allowed; pass "
                             f"check_finite=False to skip this check)")
        finite = torch.isfinite(bias)
        b_abs = float(torch.where(finite, bias.double().abs(), 0.0).max())
    if not (hidden.numel() and bool(scored.any())):
        return
    # |z| <= ||h||_1 * max|W| + max|b| (Hoelder; docs/api.md "Accepted ranges"): max|W| is
    # the min/max pass above, so the weight is not read again (no [V, H] fp64 copy); the
    # spread of a row's logits is at most twice that; both scaled by 1/T (or not, T > 1).
    w_abs = max(abs(float(lo)), abs(float(hi)))
    h_l1 = torch.linalg.vector_norm(hidden, ord=1, dim=-1, dtype=torch.float64)  # [N]
    bound = torch.where(scored, h_l1 * w_abs + b_abs, torch.zeros_like(h_l1))
    need = 2.0 * bound * max(1.0, 1.0 / temperature)
    bad = need > _half_range(hidden.dtype)
    if bool(bad.any()):
        r = int(bad.nonzero()[0, 0])
        raise ValueError(f"hidden: row {r} (label {int(labels[r])}) may give logits that "
                         f"overflow once scaled by 1/temperature={temperature:g}: "
                         f"||h||_1 * max|weight| + max|bias| = {float(bound[r]):g}; the log-prob "
                         f"would not be finite (docs/api.md, \"Accepted ranges\")")
