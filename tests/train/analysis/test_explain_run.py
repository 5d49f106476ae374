"""`sharpo explain` on a real training run with a mixed group: the page shows the segments,
weights, gaps, length factors and advantages the run's credit record holds (synthetic
Counter task, warm-started so that groups mix successes and failures)."""
import pytest
from train.analysis.test_explain import SegmentSpans, _num
from train.loops.test_trainer_support import format_warm_start, small_config

from sharpo_train.cli import main
from sharpo_train.analysis.report.records import find_mixed_group, is_mixed_group, list_credit_steps
from sharpo_train.loops.trainer import train


@pytest.fixture(scope="module")
def sharpo_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("explain")
    model = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "device": "cpu"}
    init = format_warm_start(tmp / "warm", model)
    cfg = small_config(tmp / "run", init_from=init, total_steps=3, rollout__group_size=6,
                       rollout__tasks_per_step=2, log__credit_every=1)
    return train(cfg)


def test_page_matches_the_run_records(sharpo_run, tmp_path):
    step, group, record = find_mixed_group(sharpo_run)
    if not is_mixed_group(record["groups"][group]):
        pytest.fail(f"no mixed group in steps {list_credit_steps(sharpo_run)}: the warm start "
                    "no longer gives mixed outcomes")
    assert main(["explain", str(sharpo_run), "--step", str(step), "--episode", str(group),
                 "--out", str(tmp_path / "page")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert (tmp_path / "page.png").stat().st_size > 1000
    parser = SegmentSpans()
    parser.feed(page)
    assert parser.external == []
    segments = [s for r in record["groups"][group]["rollouts"] for t in r["turns"]
                for s in t["segments"]]
    assert segments and len(parser.segments) == len(segments)
    weighted = 0
    for got, seg in zip(parser.segments, segments):
        assert got["data-kind"] == seg["kind"] and int(got["data-tokens"]) == seg["num_tokens"]
        for attr, key in (("data-gap", "gap"), ("data-weight", "weight"),
                          ("data-length-factor", "length_factor"), ("data-advantage", "advantage"),
                          ("data-advantage-grpo", "advantage_grpo")):
            assert _num(got[attr]) == seg[key], (attr, got[attr], seg[key])
        weighted += seg["weight"] is not None
    assert weighted > 0   # SHARPO weighted some segments of this group (a teacher existed)
    hints = [r["hint"] for r in record["groups"][group]["rollouts"] if r["hint"]]
    assert hints and all(h.split("\n")[0] in page for h in hints)
