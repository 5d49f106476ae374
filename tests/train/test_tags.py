"""tags.tag_spans: the spans of ``<tag>(.*?)</tag>`` (DOTALL | IGNORECASE) found in one
linear scan (a probe: a reply of many ``<action>`` with no closing tag made the
regex quadratic, 64k characters in 30 s), and the parsers that use it."""
import random
import re

import pytest

from sharpo_train.envs.turn_prompt import parse_action, parse_think
from sharpo_train.tags import tag_spans


def _regex(text, tag):
    pat = f"<{tag}>(.*?)</{tag}>"
    r = re.compile(pat.encode() if isinstance(text, bytes) else pat, re.DOTALL | re.IGNORECASE)
    return [(m.start(), m.start(1), m.end(1), m.end()) for m in r.finditer(text)]


def test_same_spans_as_the_lazy_regex_on_random_replies():
    rng = random.Random(0)
    pieces = ["<action>", "</action>", "<ACTION>", "</Action>", "<think>", "</think>", "a", " ",
              "\n", "<", ">", "/", "<act", "ion>"]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        for tag in ("action", "think"):
            assert tag_spans(text, tag) == _regex(text, tag), (text, tag)
            assert tag_spans(text.encode(), tag) == _regex(text.encode(), tag), (text, tag)
            assert tag_spans(text, tag, limit=1) == _regex(text, tag)[:1]


@pytest.mark.parametrize("n", [8000, 200_000])
def test_many_unclosed_tags_are_one_scan(n):
    """No closing tag after the first opening one: the scan stops there (the regex retried
    from each of the n opening tags)."""
    text = "<action>" * n
    assert tag_spans(text, "action") == [] and parse_action(text) is None
    assert parse_think("<think>" * n) is None
    closed = text + "go north</action>"
    assert parse_action(closed) == "<action>" * (n - 1) + "go north"
    import sharpo_train.tags as tags
    lazy = [v for v in vars(tags).values() if isinstance(v, re.Pattern) and ".*?" in str(v.pattern)]
    assert lazy == []


def test_find_spans_of_a_degenerate_reply(tmp_path):
    from sharpo_train.models.tokenizer import build_tokenizer
    from sharpo_train.step.segments import find_spans
    tok = build_tokenizer()
    ids = tok("<think>x</think>" + "<action>" * 5000, add_special_tokens=False)["input_ids"]
    spans = find_spans(tok, ids)
    assert [s.kind for s in spans] == ["think"]
    ids = tok("<think>plan</think><action>go</action>", add_special_tokens=False)["input_ids"]
    assert [s.kind for s in find_spans(tok, ids)] == ["think", "action"]
