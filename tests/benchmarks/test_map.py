"""benchmarks/map.py and benchmarks/corridor_map/ (the corridor map, benchmarks/RESULTS.md
"Where SHARPO helps"): cell parsing and naming, the declared order, which units are
finished and which can start (resume), a cell's numbers on hand-made result folders whose
values are worked out by hand, the declared reading and warm-start failures, the SFT-data
diagnosis, the report and the CLI's one-line errors. Nothing here trains."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from corridor_map import grid, report, stats, warm  # noqa: E402
from corridor_map.grid import Cell, Unit, parse_cell  # noqa: E402


# ------------------------------------------------------------------ cells

def test_parse_cell_both_spellings_round_trip():
    c = parse_cell("turns=20,decisive=5,start=weak")
    assert c == Cell(20, 5, "weak", 0) and c.name == "t20-d5-weak"
    assert parse_cell(" decisive=5 , start=weak,turns=20 ") == c
    assert parse_cell("t20-d5-weak") == c
    d = parse_cell("turns=25,decisive=3,start=full,sft_seed=1")
    assert d.name == "t25-d3-full-sft1" and parse_cell(d.name) == d and parse_cell(d.spec) == d
    assert parse_cell(c.spec) == c


@pytest.mark.parametrize("text,match", [
    ("turns=20,decisive=5", "start missing"),
    ("turns=20,decisive=5,start=strong", "start: expected one of weak, full"),
    ("turns=3,decisive=5,start=weak", "decisive: expected 1-turns"),
    ("turns=x,decisive=5,start=weak", "turns: expected an integer"),
    ("turns=20,turns=10,decisive=5,start=weak", "turns given twice"),
    ("turns=20,decisive=5,start=weak,lamps=2", "expected turns=T"),
    ("turns=0,decisive=1,start=weak", "turns: expected 1-100"),
    ("t20-d5-medium", "expected turns=T"),
    ("turns=20,decisive=5,start=weak,sft_seed=-1", "sft_seed: expected an integer >= 0"),
])
def test_parse_cell_errors_name_the_key(text, match):
    with pytest.raises(ValueError, match="--cell.*" + match):
        parse_cell(text)


def test_cell_type_errors():
    with pytest.raises(TypeError, match="--cell turns"):
        Cell("20", 5, "weak")
    with pytest.raises(TypeError, match="--cell"):
        parse_cell(None)


def test_overrides_and_compare_command():
    assert Cell(25, 5, "weak").overrides() == [
        "env=corridor", "env.num_turns=25", "env.num_decisive=5",
        f"sft.epochs={grid.WEAK_FRACTION}"]
    assert Cell(10, 3, "full").overrides() == ["env=corridor", "env.num_turns=10",
                                               "env.num_decisive=3"]
    assert Cell(10, 3, "full", 1).overrides()[-1] == "sft.seed=1"
    cmd = Cell(20, 5, "weak").compare_command("R")
    assert cmd == ("sharpo compare env=corridor env.num_turns=20 env.num_decisive=5 "
                   "sft.epochs=0.7 --run-dir R --seeds 0,1,2,3,4 --methods grpo,sharpo:0.2,oracle")


def test_declared_order_paper_regime_first():
    order = grid.declared_order()
    assert len(order) == 16 and len(set(order)) == 16
    assert [c.name for c in order[:4]] == ["t25-d5-weak", "t25-d3-weak", "t20-d5-weak",
                                           "t20-d3-weak"]
    assert all(c.start == "weak" for c in order[:8]) and all(c.start == "full" for c in order[8:])
    assert order[-1].name == "t10-d3-full"


def test_parse_seeds():
    assert grid.parse_seeds("5,6, 7") == [5, 6, 7]
    for bad in ("", "1,1", "-1", "a"):
        with pytest.raises(ValueError, match="--seeds"):
            grid.parse_seeds(bad)


# ------------------------------------------------------------------ units, resume

def _file_run(results, cell, slug, seed, held=0.5, per_task=None, train=(0, 0, 0.5, 0.5),
              seconds=100.0, unit=True):
    d = results / cell.name / f"{slug}-seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    ev = {"success": held, "per_task": per_task or {"t0": held, "t1": held}}
    (d / "eval.json").write_text(json.dumps(ev))
    rows = [{"step": i + 1, "kind": "train", "success": s} for i, s in enumerate(train)]
    rows.append({"step": len(train), "kind": "eval", "eval/success": 0.99})
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if unit:
        arm = {"grpo": "grpo", "sharpo-lam0.2": "sharpo:0.2", "oracle": "oracle"}[slug]
        (d / "unit.json").write_text(json.dumps({"cell": cell.spec, "arm": arm, "slug": slug,
                                                 "seed": seed, "seconds": seconds, "eval": ev}))


def _file_warm(results, cell, success=0.3, right=0.7, lamp_turns=960):
    d = results / cell.name
    d.mkdir(parents=True, exist_ok=True)
    (d / "warm.json").write_text(json.dumps({
        "cell": cell.spec, "eval": {"success": success}, "random_agent": 2.0 ** -cell.decisive,
        "play": {"right_door": right, "lamp_turns": lamp_turns, "invalid": 0.01},
        "sft": {"steps": 800}, "seconds": {"sft": 500.0}, "sft_epochs": 1.0,
        "data": {"longest": 500, "max_length": 1024, "over_max_length": 0,
                 "plain_lamp_target_share": 0.3, "lamp_target_share": 0.6,
                 "demo_right_door": 0.75}}))


def test_units_order_and_done(tmp_path):
    c = Cell(10, 3, "full")
    units = grid.cell_units(c, seeds=(0, 1))
    assert units[0].is_warm
    assert [(u.arm, u.seed) for u in units[1:]] == [
        ("grpo", 0), ("sharpo:0.2", 0), ("oracle", 0), ("grpo", 1), ("sharpo:0.2", 1),
        ("oracle", 1)]
    assert units[2].folder == "sharpo-lam0.2-seed0"
    assert grid.pending([c], tmp_path, seeds=(0, 1)) == units
    _file_warm(tmp_path, c)
    _file_run(tmp_path, c, "grpo", 0)
    _file_run(tmp_path, c, "sharpo-lam0.2", 0, unit=False)     # killed before it was filed
    left = grid.pending([c], tmp_path, seeds=(0, 1))
    assert left == units[2:]
    assert grid.is_done(units[1], tmp_path) and not grid.is_done(units[2], tmp_path)


def test_ready_waits_for_the_cells_warm_start(tmp_path):
    a, b = Cell(25, 5, "weak"), Cell(25, 3, "weak")
    todo = grid.pending([a, b], tmp_path, seeds=(0,))
    assert grid.ready(todo, tmp_path) == Unit(a)
    # a's warm start running: a's RL runs cannot start, b's warm start can
    assert grid.ready(todo, tmp_path, running=[Unit(a)]) == Unit(b)
    assert grid.ready(todo, tmp_path, running=[Unit(a), Unit(b)]) is None
    # b's warm start filed first: b's RL runs still wait for a's (the declared order)
    _file_warm(tmp_path, b)
    todo = grid.pending([a, b], tmp_path, seeds=(0,))
    assert grid.ready(todo, tmp_path, running=[Unit(a)]) is None
    c = Cell(20, 5, "weak")
    todo = grid.pending([a, b, c], tmp_path, seeds=(0,))
    assert grid.ready(todo, tmp_path, running=[Unit(a)]) == Unit(c)
    _file_warm(tmp_path, a)
    todo = grid.pending([a, b], tmp_path, seeds=(0,))
    assert grid.ready(todo, tmp_path) == Unit(a, "grpo", 0)
    assert grid.ready(todo, tmp_path, running=[Unit(a, "grpo", 0)]) == Unit(a, "sharpo:0.2", 0)


# ------------------------------------------------------------------ a cell's numbers

def _cell_by_hand(tmp_path, sharpo_held=(0.3, 0.7, 0.9, 0.9, 1.0), seeds=(0, 1, 2, 3, 4),
                  cell=Cell(10, 3, "full")):
    """GRPO held-out .2 .6 .7 .8 .9 (seed 0 below the warm start's .3: a collapse), SHARPO
    as given; per task every seed: GRPO t0 .5 t1 .25, SHARPO .75 .25, oracle 1 .5; late
    training (last half of 4 steps): GRPO .5, SHARPO .75, oracle 1."""
    c = cell
    _file_warm(tmp_path, c, success=0.3)
    grpo = (0.2, 0.6, 0.7, 0.8, 0.9)
    for k in seeds:
        _file_run(tmp_path, c, "grpo", k, grpo[k], {"t0": 0.5, "t1": 0.25}, seconds=90)
        _file_run(tmp_path, c, "sharpo-lam0.2", k, sharpo_held[k], {"t0": 0.75, "t1": 0.25},
                  train=(0, 0, 0.5, 1), seconds=120)
        _file_run(tmp_path, c, "oracle", k, grpo[k] + 0.05, {"t0": 1.0, "t1": 0.5},
                  train=(0, 0, 1, 1), seconds=100)
    return c


def test_cell_summary_by_hand(tmp_path):
    c = _cell_by_hand(tmp_path)
    s = stats.cell_summary(tmp_path, c)
    g = s["arms"]["grpo"]
    assert g["held"] == pytest.approx(0.64) and g["late"] == pytest.approx(0.5)
    assert g["collapses"] == 1 and g["seconds"] == pytest.approx(90)
    assert s["arms"]["sharpo:0.2"]["late"] == pytest.approx(0.75)
    assert s["arms"]["sharpo:0.2"]["collapses"] == 0
    sv = s["sharpo_vs_grpo"]
    assert sv["per_seed"] == pytest.approx([0.1, 0.1, 0.2, 0.1, 0.1])
    assert sv["by_seed"][0] == pytest.approx(0.12)
    assert 0.1 - 1e-9 <= sv["by_seed"][1] < 0.12 < sv["by_seed"][2] <= 0.2 + 1e-9
    assert sv["by_task"][0] == pytest.approx(0.125) and sv["tasks_up_down"] == (1, 0)
    assert sv["late_by_seed"][:3] == pytest.approx((0.25, 0.25, 0.25))
    ov = s["oracle_vs_grpo"]
    assert ov["by_task"][0] == pytest.approx(0.375) and ov["by_seed"][0] == pytest.approx(0.05)
    assert s["share"][0] == pytest.approx(1 / 3)
    assert s["verdict"] == "helps" and s["complete"]
    assert s["warm_fails"] == []


@pytest.mark.parametrize("sharpo,expected", [
    ((0.3, 0.5, 0.8, 0.7, 1.0), "level"),        # +.1 -.1 +.1 -.1 +.1
    ((0.1, 0.5, 0.6, 0.7, 0.8), "hurts"),        # every seed -.1
])
def test_verdict_level_and_hurts(tmp_path, sharpo, expected):
    s = stats.cell_summary(tmp_path, _cell_by_hand(tmp_path, sharpo))
    assert s["verdict"] == expected


def test_verdict_needs_every_seed(tmp_path):
    c = _cell_by_hand(tmp_path, seeds=(0, 1, 2, 3))
    s = stats.cell_summary(tmp_path, c)
    assert s["verdict"] == "incomplete (4/5 seeds)" and not s["complete"]
    assert s["sharpo_vs_grpo"]["by_seed"][1] > 0        # would count with 4 seeds: it may not
    assert stats.cell_summary(tmp_path, Cell(15, 3, "full")) is None


def test_late_success_skips_eval_rows_and_a_torn_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 2, "kind": "train", "success": 1.0}\n'
                 '{"step": 1, "kind": "train", "success": 0.0}\n'
                 '{"step": 3, "kind": "train", "success": 0.5}\n'
                 '{"step": 3, "kind": "eval", "eval/success": 0.9}\n{"step": 4, "ki')
    rows = stats.run_rows(p)
    assert stats.late_success(rows) == pytest.approx(0.75)      # last 2 of 3 steps by step
    assert stats.late_success(rows, 1.0) == pytest.approx(0.5)


def test_step_means_of_the_credit_diagnostics(tmp_path):
    """Mean over the training steps that logged a number (None and missing skipped, eval rows
    and a torn line ignored); None when no step logged it."""
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "kind": "train", "success": 0, "credit_quality/auc": 0.6, '
                 '"sharpo/teacher_coverage": 0.5}\n'
                 '{"step": 2, "kind": "train", "success": 0, "credit_quality/auc": null}\n'
                 '{"step": 3, "kind": "train", "success": 0, "credit_quality/auc": 0.9, '
                 '"sharpo/teacher_coverage": 0.25}\n'
                 '{"step": 3, "kind": "eval", "credit_quality/auc": 0.0}\n{"step": 4, "cr')
    m = stats.step_means(stats.run_rows(p))
    assert m["auc"] == pytest.approx(0.75) and m["coverage"] == pytest.approx(0.375)
    assert m["clipped"] is None and m["weight_max"] is None


def test_credit_diagnostics_in_the_summary_and_report(tmp_path):
    c = _cell_by_hand(tmp_path)
    for k, auc in enumerate((0.6, 0.8, 0.7, 0.7, 0.7)):       # SHARPO's runs: mean 0.7
        f = tmp_path / c.name / f"sharpo-lam0.2-seed{k}" / "metrics.jsonl"
        f.write_text(f.read_text() + json.dumps({
            "step": 9, "kind": "train", "success": 0.5, "credit_quality/auc": auc,
            "sharpo/teacher_coverage": 0.4, "sharpo/clipped_frac": 0.1,
            "sharpo/weight_min": 0.6, "sharpo/weight_max": 1.4}) + "\n")
    s = stats.cell_summary(tmp_path, c)
    d = s["arms"]["sharpo:0.2"]["diag"]
    assert d["auc"] == pytest.approx(0.7) and d["coverage"] == pytest.approx(0.4)
    assert s["arms"]["grpo"]["diag"]["auc"] is None
    text = report.write_report(tmp_path).read_text()
    assert "| t10-d3-full | n/a / 0.70 / n/a | 40% | 10% | 0.60 / 1.40 | helps |" in text


def test_boot_checks_and_ratio():
    m, lo, hi = stats.boot(np.array([1.0, 1.0, 1.0]))
    assert (m, lo, hi) == (1.0, 1.0, 1.0)
    r = stats.boot(np.array([1.0, 2.0]), np.array([2.0, 4.0]))
    assert r[3] == pytest.approx(0.5) and r[4] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="boot"):
        stats.boot(np.array([]))


def test_warm_fails():
    w = {"eval": {"success": 0.125}, "random_agent": 0.125,
         "play": {"right_door": 0.52, "lamp_turns": 960}}
    assert stats.warm_fails(w) == ["at or below random", "right door at chance"]
    w = {"eval": {"success": 0.2}, "random_agent": 0.125,
         "play": {"right_door": 0.54, "lamp_turns": 960}}    # 1.96 x sqrt(.25/960) = .032
    assert stats.warm_fails(w) == []


# ------------------------------------------------------------------ the warm start's diagnosis

def test_token_shares_by_hand():
    ex = [("lamp", ([1] * 10, [-100] * 8 + [5, 6])),
          ("lamp_hinted", ([1] * 30, [-100] * 28 + [5, 6])),
          ("free", ([1] * 12, [-100] * 8 + [5, 6, 7, 8]))]
    out = warm.token_shares(ex, max_length=20)
    assert out["longest"] == 30 and out["over_max_length"] == 1 and out["examples"] == 3
    assert out["plain_lamp_target_share"] == pytest.approx(2 / 8)
    assert out["lamp_target_share"] == pytest.approx(4 / 8)
    assert out["lamp_token_share"] == pytest.approx(40 / 52)
    with pytest.raises(ValueError, match="kind"):
        warm.token_shares([("other", ([1], [1]))], 4)


def _corridor_tasks(turns=6, lamps=2):
    from sharpo_train.envs.corridor import make_suite
    return make_suite({"name": "corridor", "num_turns": turns, "num_decisive": lamps,
                       "num_train": 3, "num_eval": 2}).train_tasks


def test_demo_lamp_rate_and_lamp_rates():
    from sharpo_train.envs.corridor.engine import task_spec
    from sharpo_train.step.rollout import Episode, Turn
    task = _corridor_tasks()[0]
    spec = task_spec(task)
    lamps = sorted(int(t) for t in spec["decisive"])
    right = {t: spec["decisive"][str(t)][1] for t in lamps}
    other = {t: [d for d in spec["actions"] if d != right[t]][0] for t in lamps}
    recs = [{"task_id": task.id, "step": lamps[0] - 1, "hint_informative": True,
             "action": right[lamps[0]]},
            {"task_id": task.id, "step": lamps[1] - 1, "hint_informative": True,
             "action": other[lamps[1]]},
            {"task_id": task.id, "step": 0 if 1 not in lamps else 5, "hint_informative": False,
             "action": "left"}]
    out = warm.demo_lamp_rate(recs, [task])
    assert out == {"demo_lamp_turns": 2, "demo_right_door": 0.5}
    ep = Episode(task, 0, 0)
    for t in range(1, spec["turns"] + 1):
        a = right.get(t, "left") if t != lamps[1] else None       # invalid at the 2nd lamp
        ep.turns.append(Turn("", [], [], "", a))
    r = warm.lamp_rates([ep, ep])
    assert r == {"lamp_turns": 4, "right_door": 0.5, "invalid": 0.5}


# ------------------------------------------------------------------ report and CLI

def test_report_partial(tmp_path):
    _cell_by_hand(tmp_path)
    _file_warm(tmp_path, Cell(25, 5, "weak"), success=0.02, right=0.5)
    text = report.write_report(tmp_path).read_text()
    assert "(1 of 16 grid cells complete; PARTIAL)" in text
    assert "Not run: t25-d3-weak" in text
    assert "| t25-d5-weak | 25 | 5 | weak" in text and "at or below random" in text
    row = [line for line in text.splitlines() if line.startswith("| t10-d3-full |")][2]
    assert "+12.0 (" in row and "**helps**" in row and "33%" in row
    # only the grid's cells count towards "complete"; a check cell is listed after them
    _cell_by_hand(tmp_path, cell=Cell(10, 3, "full", 1))
    text = report.write_report(tmp_path).read_text()
    assert "(1 of 16 grid cells complete; PARTIAL)" in text and "| t10-d3-full-sft1 |" in text


def test_share_only_under_a_ceiling(tmp_path):
    """SHARPO's share of the oracle's gain is a ratio: shown (table and figure) only where
    the oracle's by-task interval lies above 0; an oracle level with GRPO task by task
    (its gain 0 on every task) has no ceiling and the row says so."""
    from corridor_map import figures
    c = _cell_by_hand(tmp_path)
    assert stats.cell_summary(tmp_path, c)["ceiling"]
    for k in range(5):      # the oracle plays every task as GRPO does
        _file_run(tmp_path, c, "oracle", k, 0.5, {"t0": 0.5, "t1": 0.25}, train=(0, 0, 1, 1))
    s = stats.cell_summary(tmp_path, c)
    assert not s["ceiling"] and s["oracle_vs_grpo"]["by_task"][:3] == pytest.approx((0, 0, 0))
    text = report.write_report(tmp_path, figures=True).read_text()
    row = [line for line in text.splitlines() if line.startswith("| t10-d3-full |")][2]
    assert "no ceiling (oracle - GRPO by task holds 0)" in row and "%" not in row.split("|")[-3]
    assert (tmp_path / figures.SHARE).stat().st_size > 0
    assert not stats.has_ceiling({}) and not stats.has_ceiling({"by_task": (0.1, -0.01, 0.2)})
    assert stats.has_ceiling({"by_task": (0.1, 0.01, 0.2)})


def test_added_checks_of_a_cell_that_does_not_count(tmp_path):
    """A level cell with seeds 5-9 filed gets a row in the section of checks added after
    looking (never in the declared checks); a cell without them gets none."""
    c = _cell_by_hand(tmp_path, (0.3, 0.5, 0.8, 0.7, 1.0))          # level
    assert "added after the grid" not in report.write_report(tmp_path).read_text()
    for k in (5, 6, 7, 8, 9):
        _file_run(tmp_path, c, "grpo", k, 0.5, {"t0": 0.5, "t1": 0.5})
        _file_run(tmp_path, c, "sharpo-lam0.2", k, 0.4, {"t0": 0.4, "t1": 0.4})
        _file_run(tmp_path, c, "oracle", k, 0.6, {"t0": 0.6, "t1": 0.6})
    text = report.write_report(tmp_path).read_text()
    assert "No cell counts" in text
    rows = [line for line in text.splitlines() if line.startswith("| t10-d3-full | level |")]
    assert len(rows) == 1
    assert "-10.0 (-10.0 to -10.0); per seed -10.0, -10.0, -10.0, -10.0, -10.0 (5 seeds)" in rows[0]
    assert rows[0].endswith("| not run |")


def test_second_warm_start_of_a_level_cell_is_labelled_an_added_check(tmp_path):
    """A second warm start (SFT seed 1) filed for a cell that does not count is listed in
    every table as an added check, never read as a cell of the grid; its numbers go in the
    section of checks added after looking."""
    _cell_by_hand(tmp_path, (0.3, 0.5, 0.8, 0.7, 1.0))          # level
    c1 = Cell(10, 3, "full", 1)
    _file_warm(tmp_path, c1, success=0.25)
    for k in range(5):
        _file_run(tmp_path, c1, "grpo", k, 0.5, {"t0": 0.5, "t1": 0.5})
        _file_run(tmp_path, c1, "sharpo-lam0.2", k, 0.2, {"t0": 0.2, "t1": 0.2})
        _file_run(tmp_path, c1, "oracle", k, 0.6, {"t0": 0.6, "t1": 0.6})
    text = report.write_report(tmp_path).read_text()
    gains = [line for line in text.splitlines() if line.startswith(f"| {c1.name} |")
             and "by seed" not in line and "up /" in line]
    assert len(gains) == 1 and gains[0].endswith(
        "| **hurts (added check, not part of the reading)** |")
    assert "No cell counts" in text
    added = [line for line in text.splitlines() if line.startswith("| t10-d3-full | level |")]
    assert len(added) == 1 and "warm start 25.0%; -30.0 (-30.0 to -30.0)" in added[0]


def _cli(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "map.py"), *args],
                          capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT))


def test_cli_errors_and_command():
    r = _cli("command", "--cell", "turns=20,decisive=5,start=medium")
    assert r.returncode == 2 and r.stderr.startswith("error: --cell start")
    r = _cli("unit", "--cell", "t20-d5-weak", "--arm", "grpo")
    assert r.returncode == 2 and "--arm and --seed" in r.stderr
    r = _cli("unit", "--cell", "t20-d5-weak", "--arm", "gigpo", "--seed", "0")
    assert r.returncode == 2 and "--arm: expected one of" in r.stderr
    r = _cli("command", "--cell", "t20-d5-weak", "--runs", "R")
    assert r.returncode == 0 and "env.num_turns=20 env.num_decisive=5 sft.epochs=0.7 " \
        "--run-dir R/t20-d5-weak" in r.stdout


def test_lock_marks_a_unit_running_elsewhere(tmp_path):
    import fcntl
    from corridor_map.runner import cell_lock, is_locked, lock_path
    c = Cell(10, 3, "full")
    warm_lock, run_lock = lock_path(Unit(c), tmp_path), lock_path(Unit(c, "grpo", 0), tmp_path)
    assert warm_lock != run_lock and not is_locked(warm_lock)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # another process holds the cell's lock
        os.close(r)
        with cell_lock(tmp_path / c.name):
            os.write(w, b"x")
            os.read(os.open(os.devnull, os.O_RDONLY), 1)
            import time
            time.sleep(5)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    try:
        assert is_locked(warm_lock) and not is_locked(run_lock)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert not is_locked(warm_lock)
    with open(warm_lock, "w") as f:                # this process: not "elsewhere" after unlock
        fcntl.flock(f, fcntl.LOCK_EX)
        fcntl.flock(f, fcntl.LOCK_UN)
    assert not is_locked(warm_lock)


def test_checks_of_a_cell_that_counts(tmp_path):
    c = _cell_by_hand(tmp_path)
    text = report.write_report(tmp_path).read_text()
    assert "| t10-d3-full | pending | pending | **pending** |" in text
    # (a) seeds 5-9: SHARPO - GRPO +.1, +.1, 0, 0, -.1 (mean +.02 > 0)
    for k, d in zip(report.FRESH_SEEDS, (0.1, 0.1, 0.0, 0.0, -0.1)):
        _file_run(tmp_path, c, "grpo", k, 0.5)
        _file_run(tmp_path, c, "sharpo-lam0.2", k, 0.5 + d)
        _file_run(tmp_path, c, "oracle", k, 0.6)
    # (b) SFT seed 1: every seed -.05
    _cell_by_hand(tmp_path, sharpo_held=(0.15, 0.55, 0.65, 0.75, 0.85),
                  cell=Cell(10, 3, "full", 1))
    k = report.check_of(tmp_path, stats.cell_summary(tmp_path, c))
    assert k["fresh"]["new_mean"] == pytest.approx(0.02) and k["fresh"]["ok"]
    assert k["fresh"]["ten"][0] == pytest.approx(0.07)
    assert k["second"]["mean"][0] == pytest.approx(-0.05) and not k["second"]["ok"]
    assert k["state"] == "not confirmed"
    assert "**not confirmed**" in report.write_report(tmp_path).read_text()


def test_figures_from_hand_made_cells(tmp_path):
    from corridor_map import figures
    _cell_by_hand(tmp_path)
    text = report.write_report(tmp_path, figures=True).read_text()
    assert "![map_heat.png](map_heat.png)" in text
    assert (tmp_path / figures.HEAT).stat().st_size > 0 and (tmp_path / figures.SHARE).is_file()
    rows, vals, n, lo, hi = figures.grid_values([stats.cell_summary(tmp_path, Cell(10, 3, "full"))],
                                        "sharpo_vs_grpo")
    i, j = rows.index(("full", 3)), list(grid.TURNS).index(10)
    assert vals[i, j] == pytest.approx(12.0) and n[i, j] == 5 and lo[i, j] < 12 < hi[i, j]
    assert np.isnan(vals).sum() == vals.size - 1 and n.sum() == 5


def test_machine_record_and_a_refused_pairing_names_both_machines(tmp_path, monkeypatch):
    """An RL run whose rebuilt warm start differs from the filed one is refused before it
    trains, and the refusal names the machine that made each (the usual cause: SFT is bit
    for bit only on one processor type)."""
    from types import SimpleNamespace
    from corridor_map import runner
    m = runner.machine()
    assert m["cpu"] and m["cpu_capability"] and m["packages"]["torch"]
    c = Cell(10, 3, "full")
    out = tmp_path / "runs" / c.name
    (out / "sft").mkdir(parents=True)
    (out / "sft" / "model.safetensors").write_bytes(b"rebuilt here")
    results = tmp_path / "results"
    runner.write_json(Unit(c).result_path(results), {
        "weights_sha256": "0" * 64,
        "machine": {"cpu": "Some Other CPU", "cpu_capability": "AVX512"}})
    plan = SimpleNamespace(out=out, settings=None)
    monkeypatch.setattr(runner, "build_warm", lambda *a, **k: (plan, None, None))
    from _inputs import InputError
    with pytest.raises(InputError, match=r"not the one filed .* made on Some Other CPU "
                                           r"\(AVX512\), this one on "):
        runner.run_rl(Unit(c, "grpo", 0), tmp_path / "runs", results, (0,), grid.ARMS)
    assert not (results / c.name / "grpo-seed0").exists()


def _filed_warm(results, c, weights=b"filed weights"):
    """A filed warm start by hand: warm.json with the sha256 of ``weights`` and sft/."""
    import hashlib
    from corridor_map import runner
    (results / c.name / "sft").mkdir(parents=True)
    (results / c.name / "sft" / "model.safetensors").write_bytes(weights)
    (results / c.name / "sft" / "config.json").write_text("{}")
    runner.write_json(Unit(c).result_path(results), {
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
        "sft": {"steps": 7}, "eval": {"success": 0.25},
        "seconds": {"sft": 12.0, "eval/warm-start": 3.0},
        "machine": {"cpu": "Some Other CPU", "cpu_capability": "AVX512"}})


def test_restore_warm_from_the_filed_weights(tmp_path):
    """A cell's filed weights become RUNS/<cell>/sft with the SFT and its evaluation marked
    done (warm.json's results), so no SFT runs; never over a start already there; filed
    weights that are not warm.json's are refused."""
    from sharpo_train.recipes.phases import PhaseLog
    from corridor_map import runner
    c, results, runs = Cell(10, 3, "weak"), tmp_path / "results", tmp_path / "runs"
    _filed_warm(results, c)
    assert runner.restore_warm(c, runs, results, echo=lambda *a: None)
    sft = runs / c.name / "sft"
    assert (sft / "model.safetensors").read_bytes() == b"filed weights"
    assert (sft / "config.json").is_file()
    log = PhaseLog(runs / c.name)
    assert log.done("sft") and log.result("sft") == {"steps": 7}
    assert log.result("eval/warm-start") == {"success": 0.25}
    assert log.state["warm_start_from"] == str(results / c.name / "sft")
    assert not runner.restore_warm(c, runs, results, echo=lambda *a: None)   # one is there
    other = Cell(10, 5, "weak")
    _filed_warm(results, other)
    (results / other.name / "sft" / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(RuntimeError, match="not warm.json's"):
        runner.restore_warm(other, runs, results, echo=lambda *a: None)
    assert not (runs / other.name / "sft").exists()
    assert not runner.restore_warm(Cell(15, 3, "weak"), runs, results)      # nothing filed


def test_file_warm_weights_and_the_cli_guard(tmp_path):
    """`map.py file-warm` files a start built here only when its sha256 is the filed one."""
    from corridor_map import runner
    c, results, runs = Cell(10, 3, "weak"), tmp_path / "results", tmp_path / "runs"
    _filed_warm(results, c, b"the weights")
    (results / c.name / "sft" / "model.safetensors").unlink()
    (runs / c.name / "sft").mkdir(parents=True)
    (runs / c.name / "sft" / "model.safetensors").write_bytes(b"other weights")
    (runs / c.name / "sft" / "config.json").write_text('{"a": 1}')
    r = _cli("file-warm", "--cell", c.name, "--runs", str(runs), "--results", str(results))
    assert r.returncode == 1 and "not the filed one" in r.stdout and "Some Other CPU" in r.stdout
    assert not (results / c.name / "sft" / "model.safetensors").exists()
    (runs / c.name / "sft" / "model.safetensors").write_bytes(b"the weights")
    r = _cli("file-warm", "--cell", c.name, "--runs", str(runs), "--results", str(results))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (results / c.name / "sft" / "model.safetensors").read_bytes() == b"the weights"
    assert (results / c.name / "sft" / "config.json").read_text() == '{"a": 1}'
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        runner.file_warm_weights(tmp_path / "empty", tmp_path / "x")


def test_parse_arms():
    assert grid.parse_arms("grpo, gated,random_mask") == ["grpo", "gated", "random_mask"]
    assert grid.parse_arms("grpo_step_matched@optim.lr=3e-4") == \
        ["grpo_step_matched@optim.lr=3e-4"]
    with pytest.raises(ValueError, match="--arms"):
        grid.parse_arms("grpo,nope")
    with pytest.raises(ValueError, match="--arms"):
        grid.parse_arms(" ")
    r = _cli("unit", "--cell", "t10-d3-weak", "--arms", "grpo,gated", "--arm", "oracle",
             "--seed", "0")
    assert r.returncode == 2 and "--arm: expected one of --arms (grpo, gated)" in r.stderr
