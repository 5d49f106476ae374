"""benchmarks/map.py refuses in one line, exit 2, and makes nothing (issue 47): a --results
folder that does not exist (a typo made the folder and a "0 of 16" report), and its own
refusal to pair a rebuilt warm start with the filed one (a RuntimeError traceback)."""
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import map as map_script  # noqa: E402
from corridor_map import runner  # noqa: E402
from corridor_map.grid import Cell, Unit  # noqa: E402


def one_line(capsys, argv, *needles):
    assert map_script.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)


@pytest.mark.parametrize("what", ["report", "status"])
def test_a_results_folder_that_does_not_exist_is_refused_and_not_made(tmp_path, capsys, what):
    typo = tmp_path / "resluts"
    one_line(capsys, [what, "--results", str(typo)], str(typo), "no such folder", "--results")
    assert not typo.exists()
    plain = tmp_path / "file"
    plain.write_text("x")
    one_line(capsys, [what, "--results", str(plain)], "not a folder")


def test_the_report_of_an_existing_empty_folder_still_works(tmp_path, capsys):
    assert map_script.main(["report", "--results", str(tmp_path)]) == 0
    assert "0 of 16 grid cells complete" in (tmp_path / "map.md").read_text()


def test_a_warm_start_that_differs_from_the_filed_one_is_one_line(tmp_path, capsys, monkeypatch):
    c = Cell(10, 3, "full")
    out = tmp_path / "runs" / c.name
    (out / "sft").mkdir(parents=True)
    (out / "sft" / "model.safetensors").write_bytes(b"rebuilt here")
    results = tmp_path / "results"
    runner.write_json(Unit(c).result_path(results), {"weights_sha256": "0" * 64})
    monkeypatch.setattr(runner, "build_warm",
                        lambda *a, **k: (SimpleNamespace(out=out, settings=None), None, None))
    one_line(capsys, ["unit", "--cell", c.name, "--arm", "grpo", "--seed", "0",
                      "--runs", str(tmp_path / "runs"), "--results", str(results)],
             "is not the one filed", "cannot be paired")
    assert not (results / c.name / "grpo-seed0").exists()


@pytest.mark.parametrize("damage, needle", [
    ("missing metrics", "metrics.jsonl: no such file"),
    ("deep eval", "eval.json: JSON nested too deeply"),
    ("deep metrics", "metrics.jsonl"),
    ("huge integer", "eval.json: refused"),
])
def test_a_missing_or_hostile_filed_file_is_one_line(tmp_path, capsys, damage, needle):
    """issue 47: a missing metrics.jsonl and deep JSON were tracebacks of `map.py report`
    (a folder or a fifo in a file's place: test_map_filed.py)."""
    from test_map import _cell_by_hand
    c = _cell_by_hand(tmp_path)
    run = tmp_path / c.name / "oracle-seed3"
    if damage == "missing metrics":
        (run / "metrics.jsonl").unlink()
    elif damage == "deep eval":
        (run / "eval.json").write_text("[" * 200_000 + "]" * 200_000)
    elif damage == "deep metrics":
        good = (run / "metrics.jsonl").read_text()      # not the last line: not a torn tail
        (run / "metrics.jsonl").write_text("[" * 200_000 + "]" * 200_000 + "\n" + good)
    else:
        (run / "eval.json").write_text('{"success": ' + "9" * 5000 + "}")
    one_line(capsys, ["report", "--results", str(tmp_path)], "oracle-seed3/", needle)
