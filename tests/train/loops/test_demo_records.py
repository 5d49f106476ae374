"""Malformed `sharpo sft --demos` files are a one-line UsageError naming the file, line and
key (sharpo_train/loops/demo_records.py), never a traceback. Before: messages that are
strings were an AttributeError, a non-UTF-8 byte a UnicodeDecodeError, 5000-deep nesting a
RecursionError, and a wrong-typed "step" a TypeError inside hinted_demos."""
import json

import pytest

from sharpo_train.errors import UsageError
from sharpo_train.loops.sft import hinted_demos, load_demos

GOOD = {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]}


def _write(tmp_path, *lines, raw=None):
    p = tmp_path / "demos.jsonl"
    if raw is not None:
        p.write_bytes(raw)
    else:
        p.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n"
                             for x in lines))
    return p


@pytest.mark.parametrize("record, needle", [
    ({"messages": ["hi", "there"]}, ":1: messages[0]: expected an object"),
    ({"messages": [{"role": "user", "content": "a"}, None]}, "messages[1]: expected an object"),
    ({"messages": [{"role": 1, "content": "a"}, GOOD["messages"][1]]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": ["a"]}, GOOD["messages"][1]]}, "messages[0].content"),
    ({"messages": [GOOD["messages"][1], GOOD["messages"][0]]}, "the last message must be the assistant's"),
    ({"messages": "hi"}, "messages: expected a list"),
    ({"messages": [GOOD["messages"][1]]}, "1 message(s)"),
    ({}, "got null"), ([GOOD], "expected a JSON object"), ("null", "got null"), ("7", "got int"),
    ({**GOOD, "step": "3"}, "step: expected an integer, got str"),
    ({**GOOD, "step": True}, "step: expected an integer, got bool"),
    ({**GOOD, "hint": 5}, "hint: expected a string"),
    ({**GOOD, "action": None}, "action: expected a string, got null"),
    ({**GOOD, "hint_informative": "no"}, "hint_informative: expected true or false"),
    ({**GOOD, "episode": [1]}, "episode: expected a string or an integer"),
])
def test_a_malformed_record_names_file_line_and_key(tmp_path, record, needle):
    p = _write(tmp_path, GOOD, record)
    with pytest.raises(UsageError) as exc:
        load_demos(p)
    msg = str(exc.value)
    assert msg.startswith(f"--demos {p}:2") and needle.replace(":1:", ":2:") in msg, msg
    assert "\n" not in msg


def test_non_utf8_names_the_line(tmp_path):
    p = _write(tmp_path, raw=(json.dumps(GOOD) + "\n").encode() + b'{"messages": "\xff"}\n')
    with pytest.raises(UsageError, match=r":2: not UTF-8 text \(byte 0xff\)"):
        load_demos(p)


def test_deep_nesting_is_refused(tmp_path):
    p = _write(tmp_path, raw=b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}\n")
    with pytest.raises(UsageError, match=r":1: JSON nested too deeply"):
        load_demos(p)


@pytest.mark.parametrize("make, needle", [("dir", "not a regular file"),
                                          ("missing", "no such file"),
                                          ("empty", "no demonstrations")])
def test_a_path_that_is_no_demos_file(tmp_path, make, needle):
    p = tmp_path / "d.jsonl"
    if make == "dir":
        p.mkdir()
    elif make == "empty":
        p.write_text("\n\n")
    with pytest.raises((UsageError, FileNotFoundError), match=needle):
        load_demos(p)


def test_hinted_demos_reads_the_checked_records(tmp_path):
    rec = {**GOOD, "episode": "e0", "step": 0, "action": "go", "observation_after": "done"}
    p = _write(tmp_path, rec, {**rec, "step": 1})
    assert len(hinted_demos(p, 1.0)) == 2
    p = _write(tmp_path, rec, {**rec, "step": "1"})
    with pytest.raises(UsageError, match=r":2: step: expected an integer"):
        hinted_demos(p, 1.0)


# ---------------------------------------------------------------- probe round
def test_a_byte_order_mark_is_accepted(tmp_path):
    p = _write(tmp_path, raw=b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n")
    assert load_demos(p) == [GOOD["messages"]]


def test_a_lone_surrogate_is_refused_at_read(tmp_path):
    """JSON allows "\\ud800"; no tokenizer encodes it (a UnicodeEncodeError mid-SFT)."""
    p = _write(tmp_path, '{"messages": [{"role": "user", "content": "a\\ud800"}, '
                         '{"role": "assistant", "content": "x"}]}')
    with pytest.raises(UsageError, match=r":1: messages\[0\].content: holds a lone surrogate"):
        load_demos(p)


def test_an_integer_of_5000_digits_is_one_line(tmp_path):
    """json.loads raised a plain ValueError (int max str digits): a traceback."""
    p = _write(tmp_path, '{"messages": ' + json.dumps(GOOD["messages"]) + ', "step": '
               + "9" * 5000 + "}")
    with pytest.raises(UsageError, match=r":1: not JSON sharpo can read"):
        load_demos(p)


def test_an_empty_role_is_shown_as_empty(tmp_path):
    p = _write(tmp_path, {"messages": [{"role": "", "content": "a"}, GOOD["messages"][1]]})
    with pytest.raises(UsageError, match=r"messages\[0\].role: .*got ''$"):
        load_demos(p)


def test_hinted_copies_keep_a_system_message_and_hint_the_user_turn(tmp_path):
    """The hinted copy took messages[0] as the user turn: a system prompt got the hint and
    the real user message was dropped."""
    msgs = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "USER"},
            {"role": "assistant", "content": "x"}]
    p = _write(tmp_path, {"messages": msgs, "episode": "e", "step": 0, "action": "a",
                          "observation_after": "o"})
    (copy,) = hinted_demos(p, 1.0)
    assert [m["role"] for m in copy] == ["system", "user", "assistant"]
    assert copy[0]["content"] == "SYS" and copy[1]["content"].startswith("USER")
    assert copy[1]["content"] != "USER"                     # the hint was placed there


@pytest.mark.parametrize("record, needle", [
    ({"messages": [{"role": "usr", "content": "go"}, GOOD["messages"][1]]},
     "messages[0].role: unknown role 'usr' (did you mean 'user'?)"),
    ({"messages": [{"role": "narrator", "content": "go"}, GOOD["messages"][1]]},
     "expected one of system, user, assistant, tool"),
    ({"messages": [GOOD["messages"][0], {"role": "assistant", "content": ""}]},
     "messages[1].content: the assistant's reply (the text trained on) is empty"),
    ({"messages": [GOOD["messages"][0], {"role": "assistant", "content": " \n\t"}]},
     "is empty"),
])
def test_an_unknown_role_or_an_empty_reply_is_refused(tmp_path, record, needle):
    """issue 47 (LOW): both were accepted and trained on."""
    p = _write(tmp_path, GOOD, record)
    with pytest.raises(UsageError, match=r"--demos .*:2: ") as exc:
        load_demos(p)
    assert needle in str(exc.value)
    ok = {"messages": [{"role": "system", "content": "s"}, *GOOD["messages"]]}
    assert len(load_demos(_write(tmp_path, ok))) == 1
