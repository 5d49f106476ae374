"""Prompt rendering and reply parsing for ALFWorld (pure functions, no engine)."""
import pytest

from sharpo_train.envs.alfworld.prompts import (FORMAT_INSTRUCTION, format_response, parse_action,
                                                parse_think, render_hint, render_turn_prompt,
                                                task_sentence)


def test_first_turn_prompt_has_task_observation_actions_and_format():
    p = render_turn_prompt("Your task is to: put a mug in cabinet.", [], "You are in a room.",
                           ["go to cabinet 1", "look"])
    assert "Your task is to: put a mug in cabinet." in p
    assert "Current observation (step 1): You are in a room." in p
    assert "'go to cabinet 1', 'look'" in p
    assert p.endswith(FORMAT_INSTRUCTION)
    assert "step(s) so far" not in p


def test_history_window_shows_only_the_last_pairs_but_counts_all_steps():
    hist = [(f"obs {i}", f"act {i}") for i in range(1, 6)]
    p = render_turn_prompt("put a mug in cabinet", hist, "now", [], history_length=2)
    assert "You have taken 5 step(s) so far" in p
    assert "[Observation 4: 'obs 4', Action 4: 'act 4']" in p
    assert "[Observation 5: 'obs 5', Action 5: 'act 5']" in p
    assert "obs 3" not in p
    assert "(step 6): now" in p
    assert "Admissible actions" not in p          # none given
    assert task_sentence("put a mug in cabinet") in p
    p0 = render_turn_prompt("t", hist, "now", [], history_length=0)
    assert "obs 5" not in p0 and "5 step(s)" in p0


def test_prompt_rejects_bad_arguments():
    with pytest.raises(ValueError, match="history_length"):
        render_turn_prompt("t", [], "o", [], history_length=-1)
    with pytest.raises(TypeError, match=r"history\[0\]"):
        render_turn_prompt("t", ["not a pair"], "o", [])


@pytest.mark.parametrize("reply, expected", [
    ("<think>x</think><action>go to desk 1</action>", "go to desk 1"),
    ("<think>x</think><action>  take   mug 1\nfrom desk 1 </action>", "take mug 1 from desk 1"),
    ("<action>look</action> then <action>inventory</action>", "inventory"),
    ("<ACTION>look</ACTION>", "look"),
    ("<think>no action here</think>", None),
    ("<action>   </action>", None),
    ("<action>unclosed", None),
    ("", None),
    (None, None),
    (42, None),
])
def test_parse_action(reply, expected):
    assert parse_action(reply) == expected


def test_format_response_round_trips():
    r = format_response("I need a mug.", "go to countertop 1")
    assert r == "<think>I need a mug.</think><action>go to countertop 1</action>"
    assert parse_action(r) == "go to countertop 1"
    assert parse_think(r) == "I need a mug."


def test_render_hint():
    h = render_hint([("go to desk 1", "You arrive at desk 1. On it you see a mug 1."),
                     "take mug 1 from desk 1"])
    assert h.startswith("A successful attempt at this task:")
    assert "1. go to desk 1 -> You arrive at desk 1." in h
    assert "2. take mug 1 from desk 1" in h
    short = render_hint([("go to desk 1", "x" * 500)], max_observation_chars=10)
    assert "x" * 11 not in short and short.endswith("...")
    assert "->" not in render_hint([("go to desk 1", "obs")], max_observation_chars=0)
    with pytest.raises(ValueError, match="steps"):
        render_hint([])
    with pytest.raises(TypeError, match=r"steps\[0\]"):
        render_hint([("a", "b", "c")])
