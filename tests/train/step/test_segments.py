"""Segment extraction on real chat-templated text (sharpo_train/step/segments.py, docs/method.md §2)."""
import pytest
import torch

from sharpo_train.models.tokenizer import build_tokenizer
from sharpo_train.envs.base import Task
from sharpo_train.step.rollout import Episode, Turn, chat_prompt_ids
from sharpo_train.step.batch import StepBatch
from sharpo_train.step.segments import find_spans, segment_ids, token_bytes


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def response_ids(tok, text, eos=True):
    """The ids a policy would have sampled for ``text`` (then the end-of-turn token)."""
    return tok(text, add_special_tokens=False)["input_ids"] + ([tok.eos_token_id] if eos else [])


def spans_text(tok, ids):
    return [(s.kind, tok.decode(ids[s.start:s.end])) for s in find_spans(tok, ids)]


def test_token_bytes_reassemble_the_text(tok):
    text = "<think>café — naïve ü 😀</think><action>go to cabinet 1</action>"
    ids = response_ids(tok, text, eos=False)
    assert b"".join(token_bytes(tok, ids)).decode("utf-8") == text


def test_well_formed_response_exact_tokens(tok):
    think = "<think>The mug is on the countertop, so I go there.</think>"
    action = "<action>go to countertop 1</action>"
    ids = response_ids(tok, think + "\n" + action)
    spans = find_spans(tok, ids)
    assert [s.kind for s in spans] == ["think", "action"]
    assert tok.decode(ids[spans[0].start:spans[0].end]) == think
    assert tok.decode(ids[spans[1].start:spans[1].end]).strip() == action
    seg = segment_ids(spans, len(ids))
    assert seg[-1] == -1 and ids[-1] == tok.eos_token_id          # end-of-turn: no segment
    assert seg[:spans[0].end] == [0] * spans[0].end
    # every token outside the two spans is -1; the spans are contiguous runs 0 then 1
    assert seg == [0] * spans[0].end + [-1] * (spans[1].start - spans[0].end) + \
        [1] * (spans[1].end - spans[1].start) + [-1] * (len(ids) - spans[1].end)


def test_spans_inside_a_full_chat_templated_row(tok):
    """The row is prompt | response; offsets are taken on the response ids only, so the
    prompt (which also mentions <think> and <action>) never yields segments."""
    user = "Think inside <think> </think>, then act inside <action> </action>."
    prompt = chat_prompt_ids(tok, user)
    resp = response_ids(tok, "<think>ok</think><action>look</action>")
    assert find_spans(tok, prompt) != []        # the tags really are in the prompt text...
    ep = Episode(Task("t", "Pick"), 0, 0, [Turn(user, prompt, resp, "", "look",
                                                spans=find_spans(tok, resp))])
    rows = StepBatch.from_episodes([ep])
    seg = rows.segment_ids[0, :len(resp)].tolist()
    kinds = {k: tok.decode([resp[t] for t in range(len(resp)) if seg[t] == k]) for k in (0, 1)}
    # "><" is one token here: it straddles both tags and goes to the earlier span
    assert kinds == {0: "<think>ok</think><", 1: "action>look</action>"}
    assert [t for t in range(len(resp)) if seg[t] == -1] == [len(resp) - 1]   # only <|im_end|>
    assert rows.response_mask[0].sum().item() == len(resp)


@pytest.mark.parametrize("text, expected", [
    ("no tags at all, just words", []),
    ("<think>never closed <action>look</action>", [("action", "<action>look</action>")]),
    ("<think>reasoning only</think> and then nothing", [("think", "<think>reasoning only</think>")]),
    ("<action>unclosed action", []),
    ("<action>go to desk 1</action>", [("action", "<action>go to desk 1</action>")]),
    ("<THINK>upper</THINK> <Action>look</Action>", [("think", "<THINK>upper</THINK>"),
                                                    ("action", "<Action>look</Action>")]),
])
def test_malformed_and_partial_responses(tok, text, expected):
    got = [(k, t.strip()) for k, t in spans_text(tok, response_ids(tok, text))]
    assert got == expected


def test_last_action_outside_think_is_the_segment(tok):
    text = ("<think>maybe <action>take mug 1</action> is wrong</think>"
            "<action>look</action> text <action>inventory</action>")
    got = spans_text(tok, response_ids(tok, text))
    assert got[0][0] == "think"
    assert got[0][1] in ("<think>maybe <action>take mug 1</action> is wrong</think>",
                         "<think>maybe <action>take mug 1</action> is wrong</think><")
    assert got[1][0] == "action" and got[1][1].strip().endswith("<action>inventory</action>")
    assert "look" not in got[1][1]


def test_token_straddling_two_spans_goes_to_the_earlier(tok):
    """'.</' is one token of the shipped tokenizer; build a response where a token holds
    the end of </think> and the start of <action>, and check disjoint contiguous spans."""
    text = "<think>a</think><action>b</action>"
    ids = response_ids(tok, text)
    spans = find_spans(tok, ids)
    assert len(spans) == 2 and spans[0].end <= spans[1].start
    covered = tok.decode(ids[spans[0].start:spans[1].end])
    assert covered.startswith("<think>a</think>") and covered.endswith("<action>b</action>")


def test_random_sampled_junk_never_crashes(tok):
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        ids = torch.randint(0, len(tok), (50,), generator=g).tolist()
        spans = find_spans(tok, ids)
        seg = segment_ids(spans, len(ids))
        assert len(seg) == 50
