"""BM25 search over WebShop's document text (sharpo_train.envs.webshop.search)."""
import math
import random
from collections import Counter

import pytest

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

from sharpo_train.envs.webshop.search import B, K1, analyze, document_text  # noqa: E402

pytestmark = pytest.mark.usefixtures("webshop_data")


def test_analyzer_follows_lucene_standard_english():
    assert analyze("Men's X-Large Shirts, Material:SOLID 14.125 in; 5,000 the and") == \
        ["men", "x", "larg", "shirt", "material:solid", "14.125", "5,000"]
    assert analyze("") == [] and analyze("the of and") == []
    assert analyze("Running RUNS runner") == ["run", "run", "runner"]


def test_document_text_is_webshops(world):
    p = next(p for p in world.catalogue.products if len(p["options"]) >= 2)
    text = document_text(p)
    assert text == text.lower() and text.startswith(p["Title"].lower())
    name, values = next(iter(p["options"].items()))
    assert f"{name}: {', '.join(values)}" in text and ", and " in text


def _lucene_bm25(corpus, query):
    """Plain BM25 as Lucene scores it: idf = ln(1 + (N - df + .5) / (df + .5)),
    tf part tf / (tf + k1 (1 - b + b dl / avgdl)); one term per query token."""
    n = len(corpus)
    avgdl = sum(len(d) for d in corpus) / n
    df = Counter(t for d in corpus for t in set(d))
    out = []
    for d in corpus:
        tf = Counter(d)
        s = 0.0
        for t in query:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] / (tf[t] + K1 * (1 - B + B * len(d) / avgdl))
        out.append(s)
    return out


def test_scores_match_a_plain_bm25_reference(world):
    cat, index = world.catalogue, world.index
    corpus = [analyze(document_text(p)) for p in cat.products]
    rng = random.Random(3)
    for _ in range(7):
        p = rng.choice(cat.products)
        query = " ".join(rng.sample(p["Title"].split(), min(3, len(p["Title"].split()))))
        qt = list(dict.fromkeys(analyze(query)))        # distinct terms
        ref = _lucene_bm25(corpus, qt)
        ours = index.scores(" ".join(qt))
        ratio = [o / r for o, r in zip(ours, ref) if r > 0]
        # bm25s may include the (k1 + 1) factor: a constant scale keeps every ranking
        assert ratio and max(ratio) - min(ratio) < 1e-4 * max(ratio)
        assert all(o == 0 for o, r in zip(ours, ref) if r == 0)


def test_search_ranks_and_caps(world):
    hits = world.search("decorative pillows")
    assert 0 < len(hits) <= 50 and len(set(hits)) == len(hits)
    assert world.search("zzzqqq nonexistentword") == []
    # a product's own title finds it first for most products
    rng = random.Random(0)
    sample = rng.sample(world.catalogue.products, 40)
    top = sum(world.search(p["Title"])[:1] == [p["asin"]] for p in sample)
    assert top >= 34
