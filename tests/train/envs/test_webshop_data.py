"""WebShop catalogue loader and goals (sharpo_train.envs.webshop.data / goals)."""
import json
import random

import pytest

from sharpo_train.envs.webshop.data import (ATTRIBUTES_FILE, PRODUCTS_FILE, WebShopDataError,
                                            load_catalogue, parse_options, parse_pricing,
                                            resolve_data_dir)
from sharpo_train.envs.webshop.goals import split_indices, synthetic_goals


def test_loader_processes_products_as_webshop(world):
    cat = world.catalogue
    assert len(cat.products) == 1000 and len(cat.by_asin) == 1000
    raw = json.loads((cat.data_dir / PRODUCTS_FILE).read_text())
    for r, p in zip(raw, cat.products):
        assert p["Title"] == r["name"] and p["Description"] == r["full_description"]
        assert p["BulletPoints"] == (r["small_description"] if isinstance(r["small_description"], list)
                                     else [r["small_description"]])
        assert p["query"] == r["query"].lower().strip()
        entry = cat.attributes.get(p["asin"], {})
        assert p["Attributes"] == entry.get("attributes", ["DUMMY_ATTR"])
        assert all(name == name.lower() for name in p["options"])
    # a price range keeps two numbers and draws the price inside it; no price -> $100.0
    ranged = [p for p in cat.products if len(p["pricing"]) == 2]
    assert ranged and all(min(p["pricing"]) <= cat.prices[p["asin"]] <= max(p["pricing"]) for p in ranged)
    missing = [p for p in cat.products if p["Price"] == "$100.0"]
    assert len(missing) >= 89 and all(cat.prices[p["asin"]] == 100.0 for p in missing)


def test_pricing_and_options_parsing():
    assert parse_pricing("$19.99$27.99") == ([19.99, 27.99], "$19.99 to $27.99")
    assert parse_pricing("$1,299.5") == ([1299.5], "$1299.5")
    assert parse_pricing("") == ([100.0], "$100.0")
    with pytest.raises(ValueError, match="pricing"):
        parse_pricing("free")
    opts = parse_options({"Color": [{"value": " Navy/Red "}, {"value": "Black"}], "Size": None})
    assert opts == {"color": ["navy | red", "black"]}
    assert parse_options("") == {}


def test_missing_and_corrupt_files_name_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("WEBSHOP_DATA", raising=False)
    with pytest.raises(WebShopDataError, match=PRODUCTS_FILE):
        resolve_data_dir(tmp_path)
    (tmp_path / PRODUCTS_FILE).write_text("[{\"asin\": ")           # truncated JSON
    with pytest.raises(WebShopDataError, match=f"{PRODUCTS_FILE}.*not readable"):
        load_catalogue(tmp_path)
    (tmp_path / PRODUCTS_FILE).write_text("[]")
    with pytest.raises(WebShopDataError, match=ATTRIBUTES_FILE):
        load_catalogue(tmp_path)
    (tmp_path / ATTRIBUTES_FILE).write_text("{}")
    (tmp_path / PRODUCTS_FILE).write_text(json.dumps([{"asin": "B1", "name": "x"}]))
    with pytest.raises(WebShopDataError, match=f"{PRODUCTS_FILE}: product #0 is malformed"):
        load_catalogue(tmp_path)
    monkeypatch.setenv("WEBSHOP_DATA", str(tmp_path))
    assert resolve_data_dir() == tmp_path


def test_synthetic_goals_counts_splits_and_shuffle(world):
    goals = world.goals
    assert len(goals) == 6910                       # the data README's number
    assert [len(split_indices(s, len(goals))) for s in ("test", "eval", "train")] == [500, 1000, 5410]
    assert len(world.human_goals) == 13
    unshuffled = synthetic_goals(world.catalogue, shuffle=False)
    perm = list(range(len(unshuffled)))
    random.Random(233).shuffle(perm)                 # WebShop: random.seed(233); shuffle
    assert [unshuffled[i] for i in perm] == goals
    keys = {"asin", "category", "query", "name", "product_category", "instruction_text",
            "attributes", "price_upper", "goal_options", "weight"}
    for g in goals[:200]:
        assert set(g) == keys
        p = world.catalogue.by_asin[g["asin"]]
        assert g["name"] == p["Title"] and set(g["goal_options"]) == set(p["options"])
        assert g["price_upper"] > world.catalogue.prices[g["asin"]]
        text = g["instruction_text"]
        for k, v in g["goal_options"].items():
            assert f"{k}: {v}" in text
        if g["price_upper"] < 1e6:
            assert text.endswith(f", and price lower than {g['price_upper']:.2f} dollars")
    # deterministic across loads
    again = synthetic_goals(load_catalogue(world.catalogue.data_dir))
    assert again == goals
    with pytest.raises(ValueError, match="split"):
        split_indices("dev", 10)
