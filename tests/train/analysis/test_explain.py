"""`sharpo explain`: the page shows the segments and weights the credit record holds."""
import json
import re
from html.parser import HTMLParser

import pytest

from sharpo_train.cli import main
from sharpo_train.analysis.report.explain_html import fmt, fmt_plain, render_group_html
from sharpo_train.analysis.report.records import CreditRecordError, find_mixed_group


class SegmentSpans(HTMLParser):
    """Collects the data-* attributes of every segment span, plus external references."""

    def __init__(self):
        super().__init__()
        self.segments, self.external = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "span" and attrs.get("class") == "seg":
            self.segments.append(attrs)
        for key in ("src", "href"):
            if key in attrs and not attrs[key].startswith("#"):
                self.external.append(attrs[key])
        if tag in ("script", "link"):
            self.external.append(tag)


def _num(s):
    return None if s == "" else float(s)


def test_page_segments_match_the_record(tmp_path, write_run):
    run = write_run(tmp_path / "run")
    assert main(["explain", str(run)]) == 0
    page = (run / "report" / "credit_step00003_group1.html").read_text()
    assert (run / "report" / "credit_step00003_group1.png").stat().st_size > 1000
    parser = SegmentSpans()
    parser.feed(page)
    assert parser.external == []          # self-contained
    group = json.loads((run / "credit" / "step_00003.json").read_text())["groups"][1]
    expected = [seg for r in group["rollouts"] for t in r["turns"] for seg in t["segments"]]
    assert len(parser.segments) == len(expected) == 12
    for got, seg in zip(parser.segments, expected):
        assert got["data-kind"] == seg["kind"]
        assert int(got["data-tokens"]) == seg["num_tokens"]
        for attr, key in (("data-gap", "gap"), ("data-weight", "weight"),
                          ("data-length-factor", "length_factor"),
                          ("data-advantage", "advantage"),
                          ("data-advantage-grpo", "advantage_grpo")):
            assert _num(got[attr]) == seg[key]
        # the visible segment table shows the same numbers, as the page formats them
        row = (f"<td>{seg['num_tokens']}</td><td>{fmt(seg['gap'])}</td>"
               f"<td>{fmt_plain(seg['weight'])}</td><td>{fmt_plain(seg['length_factor'])}</td>"
               f"<td>{fmt(seg['advantage_grpo'])}</td><td>{fmt(seg['advantage'])}</td>")
        assert row in page
    # hints and GRPO advantages per rollout are shown; user text is escaped
    assert "go to shelf 1 (from rollout 3)" in page
    assert "&lt;b&gt;escape me&lt;/b&gt;" in page and "<b>escape me</b>" not in page
    assert page.count(fmt(-0.8660254)) >= 2


def test_weights_shade_differently(credit_record):
    page = render_group_html(credit_record(), 1)
    colours = set(re.findall(r'class="seg"[^>]*style="background:(rgb\([^)]*\))', page))
    assert len(colours) > 3


def test_default_picks_the_mixed_group(tmp_path, write_run):
    run = write_run(tmp_path / "run")
    step, group, _ = find_mixed_group(run)
    assert (step, group) == (3, 1)


def test_bad_step_and_group_are_named(tmp_path, capsys, write_run):
    run = write_run(tmp_path / "run")
    with pytest.raises(CreditRecordError, match="--step 7"):
        find_mixed_group(run, step=7)
    with pytest.raises(CreditRecordError, match="--episode 5"):
        find_mixed_group(run, step=3, group=5)
    assert main(["explain", str(tmp_path / "nope")]) == 2
    assert "RUN_DIR" in capsys.readouterr().err


def test_schema_error_names_the_key(tmp_path, write_run, credit_record):
    run = write_run(tmp_path / "run")
    rec = credit_record()
    del rec["groups"][1]["rollouts"][2]["turns"][0]["segments"][1]["num_tokens"]
    (run / "credit" / "step_00003.json").write_text(json.dumps(rec))
    with pytest.raises(CreditRecordError, match=r"rollouts\[2\].turns\[0\].segments\[1\].'num_tokens'"):
        find_mixed_group(run, step=3)


def test_shading_follows_the_update_relative_to_grpo(credit_record):
    """A segment with w > 1 but a small length factor gets a weaker update than GRPO's:
    it is shaded as weaker (orange), and its hover shows w, rho and the factor."""
    from sharpo_train.analysis.report.explain_colors import credit_factor, factor_rgb, factor_scale
    rec = credit_record()
    seg = rec["groups"][1]["rollouts"][0]["turns"][0]["segments"][0]
    seg.update(weight=1.5, length_factor=0.25)
    lam = rec["estimator_config"]["lam"]
    factor = credit_factor(seg, lam)
    assert factor == pytest.approx((1 - lam) + lam * 0.25 * 1.5) and factor < 1
    page = render_group_html(rec, 1)
    span = re.search(r'<span class="seg" id="seg-0-0-0"[^>]*>', page).group(0)
    r, g, b = map(int, re.search(r"background:rgb\((\d+),(\d+),(\d+)\)", span).groups())
    assert r > b                                          # orange: weaker than GRPO
    assert (r, g, b) == factor_rgb(factor, factor_scale(
        credit_factor(s, lam) for ro in rec["groups"][1]["rollouts"] for t in ro["turns"]
        for s in t["segments"]))
    assert "w 1.5000" in span and "rho 0.2500" in span and f"{factor:.3f}" in span
    # a stronger update is blue, a segment without a teacher is grey
    strong = {"weight": 1.5, "length_factor": 4.0}
    r, g, b = factor_rgb(credit_factor(strong, lam), 1.0)
    assert b > r
    assert factor_rgb(credit_factor({"weight": None, "length_factor": None}, lam), 1.0) == \
        (238, 238, 238)


def test_png_uses_the_html_colours(credit_record, tmp_path, monkeypatch):
    """The PNG draws every segment bar in the colour the HTML gives it."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    from sharpo_train.analysis.report.explain_colors import credit_factor, factor_rgb, factor_scale
    from sharpo_train.analysis.report.explain_png import render_group_png
    rec = credit_record()
    drawn, real_barh = [], Axes.barh

    def barh(self, *a, color=None, **k):
        drawn.append(color)
        return real_barh(self, *a, color=color, **k)

    monkeypatch.setattr(Axes, "barh", barh)
    render_group_png(rec, 1, tmp_path / "g.png")
    lam = rec["estimator_config"]["lam"]
    segs = [s for r in rec["groups"][1]["rollouts"] for t in r["turns"] for s in t["segments"]]
    scale = factor_scale(credit_factor(s, lam) for s in segs)
    want = [tuple(c / 255 for c in factor_rgb(credit_factor(s, lam), scale)) for s in segs]
    assert drawn == want


def test_segment_edges_fall_on_tags():
    """Token spans that split '><' between '</think>' and '<action>' are drawn on the tags."""
    from sharpo_train.analysis.report.explain_html import segment_char_spans
    response = "<think>go</think><action>look</action>"
    segs = [{"text": "<think>go</think><"}, {"text": "action>look</action>"}]
    spans = segment_char_spans(response, segs)
    assert [response[a:b] for a, b in spans] == ["<think>go</think>", "<action>look</action>"]
    # a closing tag split across the edge moves the edge after it
    segs = [{"text": "<think>go</thi"}, {"text": "nk><action>look</action>"}]
    spans = segment_char_spans(response, segs)
    assert [response[a:b] for a, b in spans] == ["<think>go</think>", "<action>look</action>"]
    # edges outside tags stay where the tokens put them
    segs = [{"text": "<think>g"}, {"text": "o</think><action>look</action>"}]
    assert segment_char_spans(response, segs) == [(0, 8), (8, len(response))]
    page = render_group_html({"groups": [{"rollouts": [{
        "reward": 0.0, "advantage_grpo": 0.0, "turns": [{"response": response, "segments": [
            {"kind": "think", "text": "<think>go</think><", "num_tokens": 3, "advantage": 0.0},
            {"kind": "action", "text": "action>look</action>", "num_tokens": 3,
             "advantage": 0.0}]}]}]}]}, 0)
    assert ">&lt;think&gt;go&lt;/think&gt;</span>" in page
    assert ">&lt;action&gt;look&lt;/action&gt;</span>" in page


def test_every_field_is_escaped(credit_record, tmp_path):
    """A record carrying markup in any field (hint_from, index, kind, family, ...) cannot
    put a tag or an attribute on the page."""
    bad = '<script>alert(1)</script>"\'><img src=x>'
    rec = credit_record()
    rec["method"] = bad
    rec["step"] = bad
    rec["estimator_config"][bad] = bad
    group = rec["groups"][1]
    group.update(family=bad, task_id=bad)
    for ro in group["rollouts"]:
        ro.update(hint_from=bad, index=bad, hint=bad)
        for t in ro["turns"]:
            t.update(user=bad, observation_after=bad)
            for s in t["segments"]:
                s.update(kind=bad)
    page = render_group_html(rec, 1, run_dir=bad)
    assert "<script" not in page and "<img" not in page
    parser = SegmentSpans()
    parser.feed(page)
    assert parser.external == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert all(s["data-kind"] == bad for s in parser.segments)   # attributes stay whole


def test_demo_directory_is_accepted(tmp_path, write_run, capsys):
    """`sharpo explain` on a `sharpo demo` directory explains its rl/ run; a compare
    directory is refused with its runs named."""
    from sharpo_train.analysis.report.records import find_run_dir
    demo = tmp_path / "demo-1"
    write_run(demo / "rl")
    assert find_run_dir(demo) == demo / "rl"
    assert main(["explain", str(demo)]) == 0
    assert (demo / "rl" / "report" / "credit_step00003_group1.html").is_file()
    write_run(tmp_path / "cmp" / "runs" / "grpo-seed0")
    with pytest.raises(FileNotFoundError, match="grpo-seed0"):
        find_run_dir(tmp_path / "cmp")
    with pytest.raises(FileNotFoundError, match="--run"):
        find_run_dir(tmp_path / "none", "--run")


@pytest.mark.parametrize("name", ["$x^$", "grpo $\\frac{$", "$\\undefinedmacro$", "a$b"])
def test_dollar_signs_in_a_family_or_method_are_drawn_as_written(tmp_path, write_run, name):
    """matplotlib would parse ``$...$`` as mathtext: an unbalanced one was a traceback of
    `sharpo explain` (issue 47). Figures draw names as their characters."""
    from sharpo_train.analysis.report.explain_png import render_group_png
    run = write_run(tmp_path / "run")
    path = run / "credit" / "step_00003.json"
    rec = json.loads(path.read_text())
    rec["method"] = name
    for g in rec["groups"]:
        g["family"] = name
    path.write_text(json.dumps(rec))
    assert main(["explain", str(run)]) == 0
    assert (run / "report" / "credit_step00003_group1.png").stat().st_size > 1000
    assert render_group_png(rec, 1, tmp_path / "x.png").stat().st_size > 1000
