"""benchmarks/map.py report reads what it checks (corridor_map/filed.py; issue 47): a unit
whose record names another cell, arm or seed, an eval.json copied in from another run, a
rate outside [0, 1] or not finite, an empty per_task are refused in one line (exit 2),
never reported; every file is read through benchmarks/_inputs.py."""
import json
import os
import subprocess
import sys

import pytest

from test_map import ROOT, _cell_by_hand

from corridor_map import report  # noqa: E402
from corridor_map.grid import Cell  # noqa: E402
from _inputs import InputError  # noqa: E402


def _edit(path, **changes):
    data = json.loads(path.read_text())
    for key, value in changes.items():
        target = data
        *head, last = key.split("__")
        for h in head:
            target = target[h]
        target[last] = value
    path.write_text(json.dumps(data))


def _report(results):
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "map.py"), "report",
                           "--results", str(results)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT))


def test_another_cells_eval_json_copied_in_is_refused(tmp_path):
    c = _cell_by_hand(tmp_path)
    _cell_by_hand(tmp_path, sharpo_held=(0.1, 0.1, 0.1, 0.1, 0.1), cell=Cell(10, 5, "full"))
    run = tmp_path / c.name / "grpo-seed0"
    other = tmp_path / "t10-d5-full" / "sharpo-lam0.2-seed0"
    (run / "eval.json").write_text((other / "eval.json").read_text())
    r = _report(tmp_path)
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "grpo-seed0/eval.json: differs from the evaluation its unit.json holds" in r.stderr


@pytest.mark.parametrize("field, value, needle", [
    ("cell", "turns=15,decisive=3,start=full", "names the cell t15-d3-full"),
    ("cell", "turns=10,decisive=3,start=full,sft_seed=1", "names the cell t10-d3-full-sft1"),
    ("cell", "t99", "is not a cell"),
    ("arm", "oracle", "arm is 'oracle'"),
    ("seed", 1, "seed is 1"),
    ("seed", True, "seed is True"),
    ("seconds", float("nan"), "seconds: expected a finite number"),
])
def test_a_unit_naming_another_cell_arm_or_seed_is_refused(tmp_path, field, value, needle):
    c = _cell_by_hand(tmp_path)
    _edit(tmp_path / c.name / "grpo-seed0" / "unit.json", **{field: value})
    with pytest.raises(InputError, match="grpo-seed0/unit.json: .*" + needle):
        report.write_report(tmp_path)


@pytest.mark.parametrize("changes, needle", [
    ({"per_task__t0": 75.0}, r"per_task\['t0'\]: a success rate must lie in \[0, 1\], got 75.0"),
    ({"per_task__t1": -0.25}, r"per_task\['t1'\]: a success rate must lie in \[0, 1\]"),
    ({"success": float("nan")}, "success: expected a finite number, got nan"),
    ({"success": "0.5"}, "success: expected a finite number, got str"),
    ({"success": 1.5}, "success: a success rate must lie in"),
    ({"per_task": {}}, "per_task must hold each task's rate"),
])
def test_rates_outside_0_1_non_finite_or_missing_are_refused(tmp_path, changes, needle):
    c = _cell_by_hand(tmp_path)
    run = tmp_path / c.name / "oracle-seed3"
    for name in ("eval.json", "unit.json"):      # both copies agree: the values are checked
        _edit(run / name, **({f"eval__{k}": v for k, v in changes.items()}
                             if name == "unit.json" else changes))
    with pytest.raises(InputError, match="oracle-seed3/eval.json: " + needle):
        report.write_report(tmp_path)


def test_warm_json_of_another_cell_and_bad_rates_are_refused(tmp_path):
    c = _cell_by_hand(tmp_path)
    warm = tmp_path / c.name / "warm.json"
    text = warm.read_text()
    _edit(warm, cell="t10-d5-full")
    with pytest.raises(InputError, match="warm.json: cell: names the cell t10-d5-full"):
        report.write_report(tmp_path)
    warm.write_text(text)
    _edit(warm, eval__success=float("inf"))
    with pytest.raises(InputError, match="warm.json: eval.success: expected a finite number"):
        report.write_report(tmp_path)


@pytest.mark.parametrize("name", ["eval.json", "metrics.jsonl", "unit.json"])
def test_a_folder_or_fifo_in_place_of_a_filed_file_is_one_line(tmp_path, name):
    c = _cell_by_hand(tmp_path)
    f = tmp_path / c.name / "grpo-seed2" / name
    f.unlink()
    os.mkfifo(f) if name == "metrics.jsonl" else f.mkdir()
    r = _report(tmp_path)          # a fifo is never opened: no hang
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r
    assert f"grpo-seed2/{name}" in r.stderr


def test_a_non_finite_training_success_or_diagnostic_is_refused(tmp_path):
    c = _cell_by_hand(tmp_path)
    m = tmp_path / c.name / "sharpo-lam0.2-seed1" / "metrics.jsonl"
    good = m.read_text()
    m.write_text(good + '{"step": 9, "kind": "train", "success": NaN}\n')
    with pytest.raises(InputError, match="metrics.jsonl: step 9 success: expected a finite"):
        report.write_report(tmp_path)
    m.write_text(good + '{"step": 9, "kind": "train", "success": 0.5, '
                        '"credit_quality/auc": Infinity}\n')
    with pytest.raises(InputError, match="step 9 credit_quality/auc: expected a finite"):
        report.write_report(tmp_path)
