"""Input validation for `segment_advantage` (docs/api.md: bad input raises a ValueError
naming the argument, and nothing is written).

Two layers:
- `check_arguments`: types, shapes, dtypes, devices and scalar parameters. O(1) work, run
  for every backend before anything is allocated.
- `check_values`: the data-dependent rules, vectorised torch (no loop over rows), used by the
  torch, triton and cuda backends. The cpp backend checks the same rules inside its single
  pass over the tokens and reports them through `native_error` with the same messages.

Data rules (documented choice of the project):
- segment_ids: -1 (no segment) or 0..K_i-1, each id one contiguous run, numbered in order of
  appearance along the row.
- response_mask: values 0 or 1. A position is *in* segment k when segment_ids == k and
  response_mask == 1; masked positions inside a segment run are ignored by the segment (they
  are not counted in m_{i,k} and get advantage 0). Every segment must keep at least one
  position with response_mask 1.
- teacher_logp / student_logp must be finite where they are used: at positions in a segment
  (as above) of a row with has_teacher True. Elsewhere (padding, prompt, rows without a
  teacher) any value, NaN included, is allowed and ignored.
- advantages must be finite, and small enough that A_i times the largest coefficient the
  parameters allow stays within half the float32 range (`check_advantage_range`, run for
  every backend before any of them; docs/api.md "Accepted ranges").

Parameter ranges (`check_params`, docs/method.md §4 plus representability): tau, rho_min and
rho_max must be normal float32 numbers whose reciprocals are too, [2**-126, 2**126]; the
math runs in fp32 on every backend, so a bound outside that range would mean one thing in
C++ (double) and another (or an overflow error) in torch and Triton.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

LOGP_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# Error codes shared with csrc/segment_advantage.h (enum SegErr); the messages are formatted
# here for every backend so that they read the same.
ERR_OK = 0
ERR_ID_BELOW_MINUS_ONE = 1
ERR_ID_ORDER = 2
ERR_MASK_VALUE = 3
ERR_TEACHER_NONFINITE = 4
ERR_STUDENT_NONFINITE = 5
ERR_EMPTY_SEGMENT = 6
ERR_ADVANTAGE_NONFINITE = 7
ERR_TEACHER_RANGE = 8      # the cpp kernel's codes of check_logp_range's rule (expected: L)
ERR_STUDENT_RANGE = 9
ERR_ADVANTAGE_RANGE = 10    # the cpp kernel's code of check_advantage_range's rule (expected: c)


def error_message(code: int, row: int, pos: int, found: float, expected: float) -> str:
    """Message of a data error; it starts with the name of the offending argument."""
    if code == ERR_ID_BELOW_MINUS_ONE:
        return (f"segment_ids: values must be -1 (no segment) or a segment index >= 0; "
                f"found {int(found)} at row {row}, position {pos}")
    if code == ERR_ID_ORDER:
        return (f"segment_ids: ids must form contiguous runs numbered 0..K-1 in order of "
                f"appearance; row {row}, position {pos} starts a run with id {int(found)}, "
                f"expected {int(expected)}")
    if code == ERR_MASK_VALUE:
        return (f"response_mask: values must be 0 or 1; found {found:g} at row {row}, "
                f"position {pos}")
    if code == ERR_TEACHER_NONFINITE:
        return (f"teacher_logp: non-finite value {found} at row {row}, position {pos} "
                f"(inside a segment of a row with a teacher)")
    if code == ERR_STUDENT_NONFINITE:
        return (f"student_logp: non-finite value {found} at row {row}, position {pos} "
                f"(inside a segment of a row with a teacher)")
    if code == ERR_EMPTY_SEGMENT:
        return (f"response_mask: segment {int(found)} of row {row} (segment_ids) has no "
                f"position with response_mask 1")
    if code == ERR_ADVANTAGE_NONFINITE:
        return f"advantages: must be finite; found {found} at row {row}"
    if code in (ERR_TEACHER_RANGE, ERR_STUDENT_RANGE):
        name = "teacher_logp" if code == ERR_TEACHER_RANGE else "student_logp"
        return logp_range_message(name, found, row, pos, int(expected))
    if code == ERR_ADVANTAGE_RANGE:
        return advantage_range_message(found, row, expected)
    return f"segment_advantage: unknown native error code {code}"


def _tensor(name: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    return x


def _real(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {type(x).__name__}")
    try:
        x = float(x)
    except OverflowError:          # an int beyond float64 (10**400)
        raise ValueError(f"{name}: must be finite, got an int of {len(str(abs(int(x))))} "
                         f"digits") from None
    if not math.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    return x


# tau, rho_min and rho_max: normal float32 numbers whose reciprocals are normal too.
PARAM_MIN = 2.0 ** -126                # 1.18e-38
PARAM_MAX = 2.0 ** 126                 # 8.5e37
_FP32_HALF = torch.finfo(torch.float32).max / 2


_ACCEPTED_PARAMS: set = set()     # exact-float 5-tuples that passed (a call's fast path)


def check_params(lam, alpha, tau, rho_min, rho_max) -> tuple[float, float, float, float, float]:
    """docs/method.md §4 requirements: 0 < alpha < 1, 0 <= lam <= 1, 0 < rho_min <= rho_max,
    tau > 0; and tau, rho_min, rho_max in [2**-126, 2**126] (float32-representable, with
    their reciprocals). A tuple of plain floats that passed once is remembered (at most 64;
    a rejected one never is), so a training loop's repeated call skips the checks."""
    key = (lam, alpha, tau, rho_min, rho_max)
    plain = all(type(x) is float for x in key)    # before hashing: a list is not hashable
    if plain and key in _ACCEPTED_PARAMS:
        return key
    out = _check_params(lam, alpha, tau, rho_min, rho_max)
    if plain and len(_ACCEPTED_PARAMS) < 64:
        _ACCEPTED_PARAMS.add(out)
    return out


def _check_params(lam, alpha, tau, rho_min, rho_max):
    lam, alpha, tau = _real("lam", lam), _real("alpha", alpha), _real("tau", tau)
    rho_min, rho_max = _real("rho_min", rho_min), _real("rho_max", rho_max)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam: must lie in [0, 1], got {lam}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: must lie in (0, 1), got {alpha}")
    if not tau > 0.0:
        raise ValueError(f"tau: must be > 0, got {tau}")
    if not rho_min > 0.0:
        raise ValueError(f"rho_min: must be > 0, got {rho_min}")
    if not rho_max >= rho_min:
        raise ValueError(f"rho_min/rho_max: must satisfy rho_min <= rho_max, got "
                         f"{rho_min} > {rho_max}")
    for name, x in (("tau", tau), ("rho_min", rho_min), ("rho_max", rho_max)):
        if not PARAM_MIN <= x <= PARAM_MAX:
            raise ValueError(f"{name}: must lie in [2**-126, 2**126] (~[1.2e-38, 8.5e37]: it "
                             f"and its reciprocal must be normal float32 numbers), got {x:g}")
    return lam, alpha, tau, rho_min, rho_max


def max_coefficient(lam: float, alpha: float, rho_max: float) -> float:
    """The largest factor A~/A_i the parameters allow: max(1, (1-lam) + lam*rho_max*(1+alpha))
    (docs/method.md §4: rho <= rho_max, w <= 1 + alpha; tokens outside segments keep 1)."""
    return max(1.0, (1.0 - lam) + lam * rho_max * (1.0 + alpha))


@torch.no_grad()
def check_logp_range(teacher_logp: torch.Tensor, student_logp: torch.Tensor,
                     segment_ids: torch.Tensor, has_teacher: Optional[torch.Tensor],
                     response_mask: Optional[torch.Tensor]) -> None:
    """Where used (segment positions of rows with a teacher), finite log-probs must stay
    within 1.7e38 / (2 L) in magnitude, so that a segment's sum of teacher - student
    cannot overflow float32 (+inf and -inf deltas in one segment made its gap and every
    advantage of the row NaN, on every backend; docs/api.md "Accepted ranges"). One
    max-reduction per tensor; the positions are looked at only when it is over the bound.
    Non-finite values are left to the backends' own check."""
    B, L = teacher_logp.shape
    if not B * L:
        return
    bound = logp_bound(L)
    # Largest finite magnitude of each tensor, both in one read. NaN/inf are zeroed first:
    # NaN padding is legal and common, and aminmax/amax would propagate it (issue 44).
    pair = (("teacher_logp", teacher_logp), ("student_logp", student_logp))
    bigs = [torch.nan_to_num(x.detach().abs(), nan=0.0, posinf=0.0).float() for _, x in pair]
    peaks = torch.stack([big.amax() for big in bigs]).tolist()                 # 1 read
    for (name, x), big, peak in zip(pair, bigs, peaks):
        if peak <= bound:          # the common case: every finite value is small
            continue
        used = segment_ids >= 0
        if response_mask is not None:
            used = used & (response_mask != 0)
        if has_teacher is not None:
            used = used & has_teacher[:, None]
        bad = used & (big > bound)
        if bool(bad.any()):
            r, p = _first(bad)
            raise ValueError(logp_range_message(name, float(x[r, p]), r, p, L))


def check_advantage_range(advantages: torch.Tensor, lam: float, alpha: float,
                          rho_max: float) -> None:
    """advantages [B]: every finite A_i converts to float32 and |A_i| * max_coefficient stays
    within half the float32 range, so A~ is finite on every backend (they compute in fp32).
    Non-finite values are left to the backends' own check (the same message everywhere).
    Reads the [B] values (a host sync on CUDA)."""
    if not advantages.numel():
        return
    a = advantages.detach().double()
    c = max_coefficient(lam, alpha, rho_max)
    bad = torch.isfinite(a) & (a.abs() * c > _FP32_HALF)
    if bool(bad.any()):
        r = int(bad.nonzero()[0, 0])
        raise ValueError(advantage_range_message(float(a[r]), r, c))


def logp_bound(L: int) -> float:
    """Largest |log-prob| allowed where used: half the float32 range over 2 L (a segment's
    sum of teacher - student then cannot overflow; docs/api.md "Accepted ranges")."""
    return _FP32_HALF / (2 * L)


def logp_range_message(name: str, value: float, r: int, p: int, L: int) -> str:
    return (f"{name}: {value:g} at row {r}, position {p} is too large in magnitude: a "
            f"segment's sum of teacher_logp - student_logp could overflow float32 (|log-prob| "
            f"must stay within 1.7e38 / (2 L) = {logp_bound(L):.3g} where used)")


def advantage_range_message(value: float, r: int, c: float) -> str:
    return (f"advantages: {value:g} at row {r} times the largest segment coefficient {c:g} "
            f"((1 - lam) + lam * rho_max * (1 + alpha)) exceeds half the float32 range "
            f"({_FP32_HALF:.3g}): the effective advantage would not be finite; scale the "
            f"advantages down or lower rho_max")


def check_arguments(teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                    response_mask, traj_index) -> None:
    """Types, shapes ([B, L] / [B]), dtypes and devices. Raises TypeError/ValueError naming
    the argument."""
    t = _tensor("teacher_logp", teacher_logp)
    s = _tensor("student_logp", student_logp)
    ids = _tensor("segment_ids", segment_ids)
    adv = _tensor("advantages", advantages)
    if t.dim() != 2:
        raise ValueError(f"teacher_logp: expected a 2-D [B, L] tensor, got shape {tuple(t.shape)}")
    B, L = t.shape
    if t.dtype not in LOGP_DTYPES:
        raise ValueError(f"teacher_logp: dtype must be float32, bfloat16 or float16, got {t.dtype}")
    if s.shape != t.shape:
        raise ValueError(f"student_logp: shape {tuple(s.shape)} differs from teacher_logp's {(B, L)}")
    if s.dtype != t.dtype:
        raise ValueError(f"student_logp: dtype {s.dtype} differs from teacher_logp's {t.dtype}")
    if ids.shape != t.shape:
        raise ValueError(f"segment_ids: shape {tuple(ids.shape)} differs from teacher_logp's {(B, L)}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"segment_ids: dtype must be an integer type, got {ids.dtype}")
    if adv.shape != (B,):
        raise ValueError(f"advantages: expected shape ({B},) (one per row), got {tuple(adv.shape)}")
    if not adv.dtype.is_floating_point:
        raise ValueError(f"advantages: dtype must be floating point, got {adv.dtype}")
    named = [("student_logp", s), ("segment_ids", ids), ("advantages", adv)]
    if has_teacher is not None:
        ht = _tensor("has_teacher", has_teacher)
        if ht.shape != (B,):
            raise ValueError(f"has_teacher: expected shape ({B},), got {tuple(ht.shape)}")
        if ht.dtype != torch.bool:
            raise ValueError(f"has_teacher: dtype must be torch.bool, got {ht.dtype}")
        named.append(("has_teacher", ht))
    if response_mask is not None:
        rm = _tensor("response_mask", response_mask)
        if rm.shape != t.shape:
            raise ValueError(f"response_mask: shape {tuple(rm.shape)} differs from teacher_logp's {(B, L)}")
        if rm.dtype.is_complex:
            raise ValueError(f"response_mask: dtype must be bool, integer or float, got {rm.dtype}")
        named.append(("response_mask", rm))
    if traj_index is not None:
        ti = _tensor("traj_index", traj_index)
        if ti.shape != (B,):
            raise ValueError(f"traj_index: expected shape ({B},), got {tuple(ti.shape)}")
        if ti.dtype.is_floating_point or ti.dtype.is_complex or ti.dtype == torch.bool:
            raise ValueError(f"traj_index: dtype must be an integer type, got {ti.dtype}")
        named.append(("traj_index", ti))
    for name, x in named:
        if x.device != t.device:
            raise ValueError(f"{name}: on device {x.device}, but teacher_logp is on {t.device}")
    if t.device.type == "meta":
        raise ValueError("teacher_logp: meta tensors hold no data; segment_advantage needs "
                         "the values (CPU or CUDA tensors)")


def _first(bad: torch.Tensor) -> tuple[int, int]:
    """(row, position) of the first True of a [B, L] bool tensor (row-major order)."""
    idx = bad.flatten().nonzero()[0, 0].item()
    return divmod(idx, bad.shape[1])


def check_values(teacher_logp: torch.Tensor, student_logp: torch.Tensor,
                 segment_ids: torch.Tensor, advantages: torch.Tensor,
                 has_teacher: Optional[torch.Tensor],
                 response_mask: Optional[torch.Tensor]) -> tuple[torch.Tensor, int]:
    """The data rules of the module docstring, vectorised.

    Returns (num_segments [B] int64, Kmax) where K_i = number of runs of ids >= 0 in row i.
    """
    B, L = segment_ids.shape
    ids = segment_ids.long()
    # Every rule's "bad" mask is built first and read back in ONE host transfer with Kmax
    # (on CUDA each read is a synchronisation); only when a rule is broken are the masks
    # looked at again, in the rules' order, for the first offending position.
    rules = []                      # (bad mask, message of its first True)
    runs = None
    if B == 0 or L == 0:
        num = torch.zeros(B, dtype=torch.int64, device=ids.device)
    else:
        rules.append((ids < -1, lambda r, p: error_message(
            ERR_ID_BELOW_MINUS_ONE, r, p, ids[r, p].item(), 0)))
        prev = torch.nn.functional.pad(ids[:, :-1], (1, 0), value=-1)   # [B, L] id at t-1
        start = (ids >= 0) & (ids != prev)                               # a run begins at t
        runs = torch.cumsum(start, dim=1)                                # runs begun up to t
        rules.append((start & (ids != runs - 1), lambda r, p: error_message(
            ERR_ID_ORDER, r, p, ids[r, p].item(), runs[r, p].item() - 1)))
        num = runs[:, -1].clone()
    if response_mask is not None and response_mask.dtype != torch.bool:
        rules.append(((response_mask != 0) & (response_mask != 1), lambda r, p: error_message(
            ERR_MASK_VALUE, r, p, response_mask[r, p].item(), 0)))
    rules.append((~torch.isfinite(advantages)[:, None], lambda r, p: error_message(
        ERR_ADVANTAGE_NONFINITE, r, 0, advantages[r].item(), 0)))
    if B and L:
        used = ids >= 0
        if response_mask is not None:
            used &= response_mask != 0
        if has_teacher is not None:
            used &= has_teacher[:, None]
        for code, x in ((ERR_TEACHER_NONFINITE, teacher_logp), (ERR_STUDENT_NONFINITE, student_logp)):
            rules.append((used & ~torch.isfinite(x), lambda r, p, code=code, x=x: error_message(
                code, r, p, x[r, p].item(), 0)))
    flags = [bad.any() for bad, _ in rules]
    kmax_t = num.max() if B else torch.zeros((), dtype=torch.int64, device=ids.device)
    read = torch.stack([f.long() for f in flags] + [kmax_t.long()]).tolist()   # one read
    for (bad, message), broken in zip(rules, read[:-1]):
        if broken:
            r, p = _first(bad)
            raise ValueError(message(r, p))
    return num, int(read[-1])


def check_nonempty_segments(counts: torch.Tensor, num_segments: torch.Tensor) -> None:
    """Every segment k < K_i must keep >= 1 position with response_mask 1.
    counts: [B, Kmax] positions counted per segment."""
    if counts.numel() == 0:
        return
    k = torch.arange(counts.shape[1], device=counts.device)
    bad = (k[None, :] < num_segments[:, None]) & (counts <= 0)
    if bool(bad.any()):
        r, kk = _first(bad)
        raise ValueError(error_message(ERR_EMPTY_SEGMENT, r, 0, kk, 0))


# ---------------------------------------------------------------------------------------
# The error word of the single-pass kernels (triton_kernels.py; issue 44). Each broken rule
# at (row, position) has the key  rank * 2**KEY_SHIFT + row * max(L, 1) + position, where
# the rank orders the rules as the checks above run them (check_advantage_range, then
# check_logp_range, then check_values' rules, then empty segments). The smallest key is the
# error these checks raise first; kernels keep it with one atomic max of KEY_NONE - key
# into a zeroed int64 word (0 = no error).
# ---------------------------------------------------------------------------------------
KEY_SHIFT = 58
KEY_NONE = 2 ** 62
RANK_ADVANTAGE_RANGE, RANK_TEACHER_RANGE, RANK_STUDENT_RANGE = 0, 1, 2
RANK_OF_ERR = {ERR_ID_BELOW_MINUS_ONE: 3, ERR_ID_ORDER: 4, ERR_MASK_VALUE: 5,
               ERR_ADVANTAGE_NONFINITE: 6, ERR_TEACHER_NONFINITE: 7,
               ERR_STUDENT_NONFINITE: 8, ERR_EMPTY_SEGMENT: 9}
RANK_TOO_MANY_SEGMENTS = 10      # a row with more segments than the table holds


def decode_error_word(word: int, L: int) -> tuple[int, int, int]:
    """(rank, row, position) of a non-zero error word."""
    key = KEY_NONE - int(word)
    rank, rest = divmod(key, 2 ** KEY_SHIFT)
    row, pos = divmod(rest, max(L, 1))
    return rank, row, pos


def error_word_message(rank: int, r: int, p: int, teacher_logp, student_logp, segment_ids,
                       advantages, response_mask, num_segments, coefficient: float,
                       max_segments: Optional[int]) -> str:
    """The message the host checks raise for the error (rank, row r, position p); the values
    it quotes are read from the inputs (the error path only)."""
    L = teacher_logp.shape[1]
    if rank == RANK_ADVANTAGE_RANGE:
        return advantage_range_message(float(advantages[r].double()), r, coefficient)
    if rank in (RANK_TEACHER_RANGE, RANK_STUDENT_RANGE):
        name, x = (("teacher_logp", teacher_logp) if rank == RANK_TEACHER_RANGE
                   else ("student_logp", student_logp))
        return logp_range_message(name, float(x[r, p]), r, p, L)
    if rank == RANK_TOO_MANY_SEGMENTS:
        return (f"max_segments: row {r} has {int(num_segments[r])} segments, more than "
                f"max_segments={max_segments}")
    code = {v: k for k, v in RANK_OF_ERR.items()}[rank]
    if code == ERR_ID_ORDER:
        row = segment_ids[r].long()
        prev = torch.nn.functional.pad(row[:-1], (1, 0), value=-1)
        starts = int(((row[:p + 1] >= 0) & (row[:p + 1] != prev[:p + 1])).sum())
        return error_message(code, r, p, int(row[p]), starts - 1)
    if code == ERR_ID_BELOW_MINUS_ONE:
        return error_message(code, r, p, int(segment_ids[r, p]), 0)
    if code == ERR_MASK_VALUE:
        return error_message(code, r, p, response_mask[r, p].item(), 0)
    if code == ERR_ADVANTAGE_NONFINITE:
        return error_message(code, r, 0, advantages[r].item(), 0)
    if code == ERR_TEACHER_NONFINITE:
        return error_message(code, r, p, teacher_logp[r, p].item(), 0)
    if code == ERR_STUDENT_NONFINITE:
        return error_message(code, r, p, student_logp[r, p].item(), 0)
    return error_message(ERR_EMPTY_SEGMENT, r, 0, p, 0)
