"""benchmarks/gated.py and corridor_map/gated*.py (the gated study, results/gated.md):
control (b)'s matched rate, the units left in order, the pooled differences and the
verdict on hand-made result folders worked out by hand, the report. Nothing here trains."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from corridor_map import gated as study  # noqa: E402
from corridor_map.gated_report import write_report  # noqa: E402
from corridor_map.grid import arm_slug  # noqa: E402

import gated as driver  # noqa: E402

from test_map import _file_run as _file_map_run, _file_warm  # noqa: E402


def _file_run(results, cell, slug, seed, held=0.5, unit=True):
    """test_map's filed run of any arm of the study (its unit.json names the arm)."""
    import json as _json
    arms = {arm_slug(a): a for a in (*study.CALIBRATION, "grpo", "oracle", "sharpo:0.2",
                                     "gated", "random_mask")}
    _file_map_run(results, cell, slug, seed, held, unit=False)
    if unit:
        arm = arms.get(slug) or "grpo_step_matched@optim.lr=" + slug.rsplit("-lr", 1)[1]
        ev = {"success": held, "per_task": {"t0": held, "t1": held}}
        (results / cell.name / f"{slug}-seed{seed}" / "unit.json").write_text(_json.dumps(
            {"cell": cell.spec, "arm": arm, "slug": slug, "seed": seed, "seconds": 100.0,
             "eval": ev}))


def _norms(results, cell, arm, seed, norms):
    path = results / cell.name / f"{arm_slug(arm)}-seed{seed}" / "metrics.jsonl"
    rows = [{"step": i + 1, "kind": "train", "success": 0.5, "update_norm": n,
             "gated/kept_rows": 0.4, "adv/abs_mean": 0.2} for i, n in enumerate(norms)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_matched_rate_from_the_calibration_runs(tmp_path):
    c = study.CELLS[0]
    _file_warm(tmp_path, c)
    assert study.matched_lr(tmp_path, c) is None
    grpo_cal, oracle_cal = study.CALIBRATION
    _file_run(tmp_path, c, arm_slug(grpo_cal), 0)
    _norms(tmp_path, c, grpo_cal, 0, [0.02, 0.04])              # mean 0.03
    assert study.matched_lr(tmp_path, c) is None               # the oracle's not filed
    _file_run(tmp_path, c, arm_slug(oracle_cal), 0)
    _norms(tmp_path, c, oracle_cal, 0, [0.01, 0.0123])         # mean 0.01115
    assert study.matched_lr(tmp_path, c) == pytest.approx(float(f"{5e-4 * 0.01115 / 0.03:.3g}"))
    assert study.cell_arms(tmp_path, c)["control_b"] == "grpo_step_matched@optim.lr=0.000186"


def test_units_left_in_order(tmp_path):
    c = study.CELLS[0]
    left = driver.units(tmp_path, c)
    assert left[0] == ("warm", None) and left[1:3] == [(a, 0) for a in study.CALIBRATION]
    assert left[3:6] == [("gated", 0), ("random_mask", 0), ("matched", 0)]
    assert len(left) == 1 + 2 + 3 * 5
    (tmp_path / c.name / "sft").mkdir(parents=True)
    (tmp_path / c.name / "sft" / "model.safetensors").write_bytes(b"w")
    _file_warm(tmp_path, c)
    _file_run(tmp_path, c, "gated", 0)
    left = driver.units(tmp_path, c)
    assert ("warm", None) not in left and ("gated", 0) not in left and ("random_mask", 0) in left
    cmd = driver.command(c, "gated", 3, "R", "S")
    assert cmd[-13:] == ["unit", "--cell", c.name, "--arms", "gated", "--arm", "gated",
                         "--seed", "3", "--runs", "R", "--results", "S"]
    assert driver.command(c, "warm", None, "R", "S")[-8:-5] == ["file-warm", "--build", "--cell"]


def _complete_cell(results, c, rule_gain=0.1):
    _file_warm(results, c, success=0.2)
    for a in study.CALIBRATION:
        _file_run(results, c, arm_slug(a), 0)
        _norms(results, c, a, 0, [0.02])
    lr = study.matched_lr(results, c)
    for k in study.SEEDS:
        _file_run(results, c, "grpo", k, 0.3)
        _file_run(results, c, "oracle", k, 0.5)
        _file_run(results, c, "sharpo-lam0.2", k, 0.3)
        _file_run(results, c, "gated", k, 0.3 + rule_gain + 0.01 * k)
        _norms(results, c, "gated", k, [0.01, 0.03])
        _file_run(results, c, "random_mask", k, 0.3)
        _file_run(results, c, arm_slug(study.matched_arm(lr)), k, 0.25, unit=k != 4)


def test_pooled_differences_verdict_and_report(tmp_path):
    c0, c1 = study.CELLS[:2]
    _complete_cell(tmp_path, c0)
    _complete_cell(tmp_path, c1, rule_gain=0.2)
    cells = [study.cell_numbers(tmp_path, c) for c in (c0, c1)]
    assert not cells[0]["complete"]                     # control (b) seed 4 unfiled
    d = cells[0]["diffs"]
    assert d["rule_vs_grpo"] == pytest.approx({k: 0.1 + 0.01 * k for k in study.SEEDS})
    assert set(d["rule_vs_control_b"]) == {0, 1, 2, 3}
    (m, lo, hi), n = study.pooled(cells, "rule_vs_grpo")
    assert n == 10 and m == pytest.approx(0.15 + 0.02) and lo > 0
    # 9 declared cells: two are not complete, so no verdict
    assert study.verdict(cells).startswith("incomplete (0/9 cells complete)")
    assert study.verdict(cells, all_cells=()).startswith("incomplete")
    # R1 - GRPO +.17 pooled against the oracle's +.2 on the same pairs: 85%
    assert study.share_of_oracle(cells)[0] == pytest.approx(0.17 / 0.2)
    for k in study.SEEDS:
        lr = study.matched_lr(tmp_path, c0)
        _file_run(tmp_path, c0, arm_slug(study.matched_arm(lr)), k, 0.25)
        _file_run(tmp_path, c1, arm_slug(study.matched_arm(lr)), k, 0.25)
    cells = [study.cell_numbers(tmp_path, c) for c in (c0, c1)]
    assert all(c["complete"] for c in cells)
    assert study.verdict(cells, all_cells=(c0, c1)) == "holds"
    for k in study.SEEDS:                               # control (a) as good as R1 in c0
        _file_run(tmp_path, c0, "random_mask", k, 0.4 + 0.01 * k)
        _file_run(tmp_path, c1, "random_mask", k, 0.5 + 0.01 * k)
    cells = [study.cell_numbers(tmp_path, c) for c in (c0, c1)]
    assert study.verdict(cells, all_cells=(c0, c1)) == "does not hold"
    text = write_report(tmp_path, tmp_path / "out", figures=True).read_text()
    assert "Cells complete: 2/9" in text and "incomplete (2/9 cells complete)" in text
    assert "| t10-d3-weak | gated (R1) | 0.40 (n/a) | n/a | 0.200 | 0.0200 | 0/5 | 100 |" in text
    assert (tmp_path / "out" / "gains.png").stat().st_size > 0
