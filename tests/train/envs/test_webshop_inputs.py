"""WebShop inputs: the action parser is WebShop's regex without its quadratic
backtracking, and ``webshop_reward`` refuses malformed values naming the argument
(NaN/inf/negative prices are never scored)."""
import math
import random
import re

import pytest

pytest.importorskip("bm25s")
pytest.importorskip("rapidfuzz")
pytest.importorskip("spacy")

from sharpo_train.envs.webshop import webshop_reward  # noqa: E402
from sharpo_train.envs.webshop.engine import parse_webshop_action  # noqa: E402

WEBSHOP_RE = re.compile(r"(.+)\[(.+)\]")     # web_agent_site's parse_action


def _webshop(action):
    m = WEBSHOP_RE.match(action)
    return (action, None) if m is None else (m.group(1), m.group(2).lower())


def test_action_parsing_matches_webshops_regex_on_random_strings():
    rng = random.Random(0)
    alphabet = "ab[]\n A"
    cases = ["search[x]", "click[[x]]", "[x]", "a[]", "a[]]", "a[b]c]d", "a[b\nc]", "]a[b]",
             "x[y][z]", "search[ red [shoes] ]", "a[[", "a]]["]
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
              for _ in range(20000)]
    for s in cases:
        assert parse_webshop_action(s) == _webshop(s), repr(s)


@pytest.mark.parametrize("n", [30_000, 1_000_000])
def test_search_with_many_brackets_parses_in_one_scan(n):
    """``search[`` + n '[' (the input that made the regex take seconds): no match, found by
    two rfind scans (the parser holds no regex that could backtrack)."""
    action = "search[" + "[" * n
    assert parse_webshop_action(action) == (action, None)
    closed = action + "x]"
    assert parse_webshop_action(closed) == ("search[" + "[" * (n - 1), "x")
    import sharpo_train.envs.webshop.engine as engine
    assert not any(isinstance(v, re.Pattern) for v in vars(engine).values())


# ------------------------------------------------------------------ webshop_reward inputs


@pytest.fixture
def goal(world):
    return dict(world.goals[0])


@pytest.mark.usefixtures("webshop_data")
@pytest.mark.parametrize("price, exc, needle", [
    (math.nan, ValueError, "price"), (math.inf, ValueError, "price"),
    (-1.0, ValueError, "price"), ("12", TypeError, "price"), (True, TypeError, "price"),
])
def test_bad_prices_are_refused_naming_price(goal, price, exc, needle):
    with pytest.raises(exc, match=needle):
        webshop_reward(goal, goal["asin"], {}, price)


@pytest.mark.usefixtures("webshop_data")
@pytest.mark.parametrize("key, value, exc", [
    ("price_upper", math.nan, ValueError), ("price_upper", -5, ValueError),
    ("price_upper", "10", TypeError), ("attributes", "soft", TypeError),
    ("attributes", [1, 2], TypeError), ("attributes", [], ValueError),
    ("query", None, TypeError), ("name", 5, TypeError),
    ("goal_options", {"color": 3}, TypeError), ("goal_options", 7, TypeError),
])
def test_malformed_goals_name_the_key(goal, key, value, exc):
    goal[key] = value
    with pytest.raises(exc, match=rf"goal\['{key}'\]"):
        webshop_reward(goal, goal["asin"])


@pytest.mark.usefixtures("webshop_data")
def test_malformed_asin_and_options_name_the_argument(goal):
    with pytest.raises(TypeError, match="asin"):
        webshop_reward(goal, 123)
    with pytest.raises(ValueError, match="asin"):
        webshop_reward(goal, "NOPE")
    with pytest.raises(TypeError, match="options"):
        webshop_reward(goal, goal["asin"], ["red"])
    with pytest.raises(TypeError, match=r"options\['color'\]"):
        webshop_reward(goal, goal["asin"], {"color": 3})
    assert 0.0 <= webshop_reward(goal, goal["asin"], {}, 10.0) <= 1.0   # well-formed: scored
