"""The one check of an integer argument: an int (a bool is no int) within bounds, else an
error naming the argument. Every module that takes a count, a size or a seed from a user
or a caller uses it (the settings classes check theirs through settings/loader.py
``in_range``, which also takes floats and open ends)."""
from __future__ import annotations

from typing import Optional


def is_int(v) -> bool:
    """``v`` is an int and not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def check_int(v, name: str, lo: Optional[int] = None, hi: Optional[int] = None, *,
              error: type = ValueError) -> int:
    """``v`` when it is an int (not a bool) in [lo, hi] (None: unbounded), else ``error``
    ("name: expected an int >= lo and <= hi, got v"); returns ``v``."""
    if not is_int(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        bounds = "".join(s for s in ((f" >= {lo}" if lo is not None else ""),
                                     (" and" if lo is not None and hi is not None else ""),
                                     (f" <= {hi}" if hi is not None else "")))
        raise error(f"{name}: expected an int{bounds}, got {v!r}")
    return v
