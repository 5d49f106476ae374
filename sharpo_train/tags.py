"""``<tag>...</tag>`` spans of a reply in one left-to-right pass (str or bytes).

``re.finditer(r"<action>(.*?)</action>", DOTALL | IGNORECASE)`` gives the same spans but,
on a reply with many opening tags and no closing one (a model repeating ``<action>``),
retries the lazy scan from every opening tag: quadratic in the length (64k characters of
``<action>`` took 30 s). Here each opening tag is found once and its closing tag searched
forward from it; when none is left, no later opening tag can close either and the scan
stops: linear.
"""
from __future__ import annotations

import re
from typing import AnyStr, Optional

_PATTERNS: dict = {}


def _tag_res(tag: str, binary: bool) -> tuple[re.Pattern, re.Pattern]:
    key = (tag, binary)
    if key not in _PATTERNS:
        o, c = f"<{tag}>", f"</{tag}>"
        if binary:
            o, c = o.encode(), c.encode()
        _PATTERNS[key] = (re.compile(re.escape(o), re.IGNORECASE),
                          re.compile(re.escape(c), re.IGNORECASE))
    return _PATTERNS[key]


def tag_spans(text: AnyStr, tag: str, limit: Optional[int] = None) -> list[tuple[int, int, int, int]]:
    """[(start, inner_start, inner_end, end)] of each ``<tag>...</tag>`` (case-insensitive,
    the first closing tag after each opening one, non-overlapping, left to right), at most
    ``limit`` of them: what ``re.finditer(r"<tag>(.*?)</tag>", DOTALL | IGNORECASE)``
    matches, in linear time."""
    open_re, close_re = _tag_res(tag, isinstance(text, bytes))
    out, pos = [], 0
    while limit is None or len(out) < limit:
        o = open_re.search(text, pos)
        if o is None:
            break
        c = close_re.search(text, o.end())
        if c is None:               # no closing tag after this one: none after a later one
            break
        out.append((o.start(), o.end(), c.start(), c.end()))
        pos = c.end()
    return out
