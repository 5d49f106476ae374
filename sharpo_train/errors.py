"""Errors that mean "the user asked for something that cannot be done" (a bad setting, a
missing file or run): ``sharpo`` prints their message as one line on stderr and exits 2
(cli.py). Anything else is a bug and keeps its traceback.

Messages start with what the user can fix: the dotted config key (``optim.lr: ...``), the
option (``--run: ...``) or the file.
"""
from __future__ import annotations


class UsageError(ValueError):
    """A user error: one line on stderr, exit status 2, no traceback."""


class ConfigError(UsageError):
    """A bad setting; the message starts with the dotted key (``rollout.group_size: ...``)."""


def did_you_mean(key: str, known, aliases=None) -> str:
    """`` (did you mean 'rank'?)`` for an unknown settings ``key``: the known name it is an
    alias of (``aliases``: {other spelling: known name}, e.g. peft's ``r`` for
    ``model.lora.rank``), else the closest known name (difflib); ``""`` when none is close.
    Every unknown-key error of the settings appends it."""
    import difflib

    key, known = str(key), [str(k) for k in known]
    near = (aliases or {}).get(key)
    if near is None or near not in known:
        close = difflib.get_close_matches(key, known, n=1) or \
            difflib.get_close_matches(key.lower(), [k.lower() for k in known], n=1)
        near = next((k for k in known if close and k.lower() == close[0].lower()), None)
    return f" (did you mean {near!r}?)" if near else ""
