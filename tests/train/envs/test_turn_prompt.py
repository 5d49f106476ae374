"""sharpo_train.envs.turn_prompt: the history block of both environments' turn prompts."""
import pytest

from sharpo_train.envs.alfworld.prompts import render_turn_prompt as alfworld_prompt
from sharpo_train.envs.turn_prompt import history_lines, one_line
from sharpo_train.envs.webshop.prompts import render_turn_prompt as webshop_prompt


def test_history_lines_window_and_numbering():
    hist = [(f"obs\n{k}", f"act  {k}") for k in range(1, 6)]
    assert history_lines([], 2) == []
    assert history_lines(hist, 0) == ["You have taken 5 step(s) so far."]
    assert history_lines(hist, 2) == [
        "You have taken 5 step(s) so far. Your last 2 observation(s) and action(s):",
        "[Observation 4: 'obs 4', Action 4: 'act 4']",
        "[Observation 5: 'obs 5', Action 5: 'act 5']"]
    assert len(history_lines(hist, 9)) == 6 and history_lines(hist[:1], 3)[1].startswith("[Observation 1:")
    assert one_line(" a\n\tb  c ") == "a b c" and one_line(7) == "7"


@pytest.mark.parametrize("render", [alfworld_prompt, webshop_prompt])
def test_both_prompts_check_history_and_accept_an_iterator(render):
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="history_length"):
            render("t", [], "o", [], history_length=bad)
    with pytest.raises(TypeError, match=r"history\[1\]"):
        render("t", [("o", "a"), ("o",)], "o", [])
    p = render("t", iter([("o1", "a1"), ("o2", "a2"), ("o3", "a3")]), "now", [], history_length=1)
    assert "You have taken 3 step(s) so far. Your last 1 observation(s)" in p
    assert "[Observation 3: 'o3', Action 3: 'a3']" in p and "(step 4)" in p


def test_a_window_longer_than_half_the_history_shows_all_of_it():
    # history[n - L:] with n < L < 2n once cut the window short (n=2, L=3 showed 1 pair)
    hist = [("o1", "a1"), ("o2", "a2")]
    assert history_lines(hist, 3)[0].endswith("Your last 2 observation(s) and action(s):")
    assert len(history_lines(hist, 3)) == 3
