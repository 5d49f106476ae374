"""The records of a demonstrations file (``sharpo sft --demos``, docs/training.md "SFT
warm start"), read once and checked: every problem is a UsageError naming the file and
line (and the key), one line on stderr, never a traceback.

One JSON object per line (blank lines skipped):

    messages             required: a list of >= 2 objects {"role": str, "content": str},
                         each role one of system, user, assistant, tool; the last one's
                         role "assistant", its content not empty (the reply trained on)
    step                 optional: an integer (the turn's order in its episode)
    episode, task_id     optional: a string or an integer (groups turns into episodes)
    action, observation_after, hint, hint_to_turn
                         optional: strings (the hinted copies, sft.hinted_demos)
    hint_informative     optional: a bool

The file must be a regular file (a FIFO would block the reader), UTF-8 (a byte-order mark
is allowed), its contents text (no lone surrogates), no line may nest deeper than
Python's recursion limit, and no line may be longer than ``MAX_LINE_BYTES`` (4 MiB, some
million tokens: far beyond any sft.max_length; a 300 MB line made the tokenizer abort on an
8.6 GB allocation), checked by length before anything parses or tokenizes it.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError, did_you_mean

__all__ = ["read_demo_records"]

MAX_LINE_BYTES = 4 << 20
ROLES = ("system", "user", "assistant", "tool")     # the chat roles a template renders
_OPTIONAL = {"step": (int,), "episode": (str, int), "task_id": (str, int), "action": (str,),
             "observation_after": (str,), "hint": (str,), "hint_to_turn": (str,),
             "hint_informative": (bool,)}


def _type_name(x) -> str:
    return "null" if x is None else type(x).__name__


def _check(record, where: str) -> dict:
    if not isinstance(record, dict):
        raise UsageError(f"{where}: expected a JSON object {{'messages': [...]}}, got "
                         f"{_type_name(record)}")
    messages = record.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        raise UsageError(f"{where}: messages: expected a list of at least 2 messages "
                         f"{{'role': ..., 'content': str}}, the last the assistant's, got "
                         f"{_type_name(messages) if not isinstance(messages, list) else f'{len(messages)} message(s)'}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise UsageError(f"{where}: messages[{i}]: expected an object {{'role': ..., "
                             f"'content': str}}, got {_type_name(m)}")
        if not isinstance(m.get("role"), str) or not m["role"]:
            got = repr(m["role"]) if isinstance(m.get("role"), str) else _type_name(m.get("role"))
            raise UsageError(f"{where}: messages[{i}].role: expected a role name (a string "
                             f"such as 'user' or 'assistant'), got {got}")
        if m["role"] not in ROLES:          # a typo would reach the chat template as is
            raise UsageError(f"{where}: messages[{i}].role: unknown role {m['role']!r:.40}"
                             f"{did_you_mean(m['role'], ROLES)}; expected one of "
                             f"{', '.join(ROLES)}")
        if not isinstance(m.get("content"), str):
            raise UsageError(f"{where}: messages[{i}].content: expected a string, got "
                             f"{_type_name(m.get('content'))}")
        try:
            m["content"].encode("utf-8")
        except UnicodeEncodeError as exc:     # "\ud800": JSON allows it, no tokenizer does
            raise UsageError(f"{where}: messages[{i}].content: holds a lone surrogate "
                             f"({m['content'][exc.start]!r}) at character {exc.start}, "
                             f"not text") from None
    if messages[-1]["role"] != "assistant":
        raise UsageError(f"{where}: messages: the last message must be the assistant's "
                         f"(the reply trained on), got {messages[-1]['role']!r}")
    if not messages[-1]["content"].strip():
        raise UsageError(f"{where}: messages[{len(messages) - 1}].content: the assistant's "
                         f"reply (the text trained on) is empty")
    for key, types in _OPTIONAL.items():
        if key in record and (not isinstance(record[key], types) or
                              (bool not in types and isinstance(record[key], bool))):
            raise UsageError(f"{where}: {key}: expected "
                             f"{' or '.join('an integer' if t is int else 'a string' if t is str else 'true or false' for t in types)}"
                             f", got {_type_name(record[key])}")
    return record


def _line_ends(data: bytes):
    """The offset of each line's end (its newline, or the end of ``data``)."""
    at = data.find(b"\n")
    while at != -1:
        yield at
        at = data.find(b"\n", at + 1)
    yield len(data)


def read_demo_records(path: str | Path, key: str = "--demos") -> list[dict]:
    """The checked records of the demonstrations file ``path`` (in file order)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{key}: no such file {path}")
    if not path.is_file():
        raise UsageError(f"{key}: {path} is not a regular file (a folder, FIFO or device)")
    data = path.read_bytes()
    start = 0
    for n, end in enumerate(_line_ends(data), 1):       # by length first: nothing parsed
        if end - start > MAX_LINE_BYTES:
            raise UsageError(f"{key} {path}:{n}: a line of {end - start:,} bytes; the limit "
                             f"is {MAX_LINE_BYTES:,} (a demonstration is a chat of a few "
                             f"turns: split it, or shorten its observations)")
        start = end + 1
    try:
        text = data.decode("utf-8-sig")     # a byte-order mark (some editors write one) is fine
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise UsageError(f"{key} {path}:{line}: not UTF-8 text (byte {data[exc.start]:#04x})") \
            from None
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{key} {path}:{n}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: not JSON ({exc})") from None
        except RecursionError:
            raise UsageError(f"{where}: JSON nested too deeply (refused)") from None
        except ValueError as exc:           # an integer of more than 4300 digits
            raise UsageError(f"{where}: not JSON sharpo can read ({exc})") from None
        records.append(_check(record, where))
    if not records:
        raise UsageError(f"{key} {path}: no demonstrations")
    return records
