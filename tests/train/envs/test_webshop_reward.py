"""WebShop's reward: sharpo_train.envs.webshop.webshop_reward against an independent
oracle of the original formula (tests/train/envs/webshop_oracle.py) on random triples."""
import random

import pytest

pytest.importorskip("rapidfuzz")
pytest.importorskip("spacy")
thefuzz = pytest.importorskip("thefuzz")

from sharpo_train.envs.webshop import webshop_reward  # noqa: E402
from sharpo_train.envs.webshop.reward import normalize_color, token_set_ratio  # noqa: E402

from train.envs.webshop_oracle import oracle_color, oracle_reward  # noqa: E402

pytestmark = pytest.mark.usefixtures("webshop_data")


def _random_triple(rng, world):
    cat = world.catalogue
    goal = rng.choice(world.goals)
    r = rng.random()
    if r < 0.4:
        product = cat.by_asin[goal["asin"]]
    elif r < 0.7:   # same query: type reward and attributes partly match
        same = [p for p in cat.products if p["query"] == goal["query"]]
        product = rng.choice(same)
    else:
        product = rng.choice(cat.products)
    options = {}
    for name, values in product["options"].items():
        if rng.random() < 0.8:
            if product["asin"] == goal["asin"] and name in goal["goal_options"] and rng.random() < 0.6:
                options[name] = goal["goal_options"][name]
            else:
                options[name] = rng.choice(values)
    price = cat.prices[product["asin"]] if rng.random() < 0.7 else rng.uniform(1, 300)
    return goal, product, options, price


def test_reward_agrees_with_the_original_formula(world):
    rng = random.Random(12345)
    n, agree, nonzero, ones = 160, 0, 0, 0
    for _ in range(n):
        goal, product, options, price = _random_triple(rng, world)
        ours = webshop_reward(goal, product["asin"], options, price)
        ref = oracle_reward(product, goal, price, options)
        agree += abs(ours - ref) < 1e-12
        nonzero += ref > 0
        ones += ref == 1.0
    # the draws cover the interesting range (not all zeros, some full matches)
    assert nonzero > n // 3 and ones > 5
    assert agree == n, f"agreement {agree}/{n}"


def test_token_set_ratio_is_thefuzz_on_strings_pairs_and_non_ascii():
    from thefuzz import fuzz
    rng = random.Random(7)
    words = ["red", "x-large", "men's", "caf\u00e9", "men\u2019s", "3.5 oz", "navy | red",
             "Blue", "pack of 2", "\u0142\u00f3d\u017a", "", "  "]
    cases = [(rng.choice(words) + " " + rng.choice(words), rng.choice(words)) for _ in range(200)]
    cases += [(w, ("color", w2)) for w in words for w2 in words]
    for a, b in cases:
        assert token_set_ratio(a, b) == fuzz.token_set_ratio(a, b), (a, b)


def test_normalize_color_matches_the_oracle():
    for v in ["navy blue", "r.brown2070", "lightweight", ("color", "red"), ("size", "red x"), "xl"]:
        assert normalize_color(v) == oracle_color(v)


def test_goal_product_with_goal_options_scores_one(world):
    g = world.goals[3]
    assert webshop_reward(g, g["asin"], g["goal_options"]) == 1.0
    # lower-case asin accepted, price over the bound costs one part
    parts = len(g["attributes"]) + len(g["goal_options"]) + 1
    assert webshop_reward(g, g["asin"].lower(), g["goal_options"], g["price_upper"] + 1) == \
        pytest.approx((parts - 1) / parts)


def test_bad_inputs_name_the_argument(world):
    g = dict(world.goals[0])
    with pytest.raises(ValueError, match="asin"):
        webshop_reward(g, "B000NOTREAL", {})
    with pytest.raises(TypeError, match="options"):
        webshop_reward(g, g["asin"], ["red"])
    with pytest.raises(TypeError, match="goal"):
        webshop_reward("goal", g["asin"], {})
    bad = dict(g)
    del bad["attributes"]
    with pytest.raises(ValueError, match="attributes"):
        webshop_reward(bad, g["asin"], {})
