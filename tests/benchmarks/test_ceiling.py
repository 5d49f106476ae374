"""benchmarks/ceiling.py on a synthetic `sharpo compare` directory whose numbers are worked
out by hand: held-out gains paired by task (fractional per-task rates), training gains paired
by seed over the --train-frac window, the share of the oracle's gain, collapses, intervals,
pairing on common seeds, the titles of each window and the CLI's one-line errors."""
import json

import pytest

from sharpo_train.recipes.recipe_config import parse_methods

METHODS = "grpo,oracle,sharpo:0.2"
RUNS = dict(zip(METHODS.split(","), parse_methods(METHODS)))     # item: (label, slug, overrides)
SLUG = {item: slug for item, (_l, slug, _o) in RUNS.items()}
WARM = 0.6
# held-out eval.json per run: (per_task rates, success). "success" is set apart from the
# mean of per_task so that the by-task gain can only come from per_task; per task averaged
# over seeds 0, 1: grpo t0 .5, t1 .5; oracle 1, .875; sharpo .75, .5
HELD = {"grpo": {0: ({"t0": 0.25, "t1": 0.5}, 0.4), 1: ({"t0": 0.75, "t1": 0.5}, 0.7)},
        "oracle": {0: ({"t0": 1.0, "t1": 0.75}, 0.6), 1: ({"t0": 1.0, "t1": 1.0}, 0.95)},
        "sharpo:0.2": {0: ({"t0": 0.5, "t1": 0.75}, 0.55), 1: ({"t0": 1.0, "t1": 0.25}, 0.65)}}
# training success at steps 1..4. Per run (last half / last step / all steps):
# grpo .5/.75/.25, .75/1/.5; oracle 1/1/.875, 1/1/.75; sharpo .75/1/.625, 1/1/.75
TRAIN = {"grpo": {0: [0, 0, 0.25, 0.75], 1: [0, 0.5, 0.5, 1]},
         "oracle": {0: [0.5, 1, 1, 1], 1: [0.5, 0.5, 1, 1]},
         "sharpo:0.2": {0: [0.5, 0.5, 0.5, 1], 1: [0.5, 0.5, 1, 1]}}
HEADER = ("| Method | seeds | held-out (%) | vs GRPO, held-out (by task) | share of the oracle's "
          "held-out gain | late training (%) | vs GRPO, late (by seed) | share of the oracle's "
          "late gain | collapses |")


def make_compare(root, skip=()):
    """RUN/pipeline.json and RUN/runs/<slug>-seed<k>/metrics.jsonl; ``skip``: (method, seed)
    whose RL phase is not recorded (its metrics stay on disk)."""
    warm = {"success": WARM, "per_task": {"t0": 0.5, "t1": 0.75}}
    phases = {"eval/warm-start": {"done": True, "seconds": 1.0, "result": warm}}
    for item, seeds in HELD.items():
        for k, (per_task, success) in seeds.items():
            run = root / "runs" / f"{SLUG[item]}-seed{k}"
            run.mkdir(parents=True)
            run.joinpath("metrics.jsonl").write_text("".join(
                json.dumps({"kind": "train", "step": s, "success": x}) + "\n"
                for s, x in enumerate(TRAIN[item][k], start=1)))
            if (item, k) not in skip:
                phases[f"rl/{SLUG[item]}/seed{k}"] = {
                    "done": True, "seconds": 1.0,
                    "result": {"success": success, "per_task": per_task}}
    root.joinpath("pipeline.json").write_text(json.dumps({"phases": phases, "seeds": [0, 1]}))
    return root


def test_gains_shares_and_collapses_by_hand(ceiling, tmp_path):
    rows = ceiling.measure(make_compare(tmp_path), METHODS, [0, 1], "grpo", "oracle")["rows"]
    s, o = rows["sharpo:0.2"], rows["oracle"]
    # held-out, by task: sharpo (.25, 0) -> .125, oracle (.5, .375) -> .4375 (from "success": .05)
    assert s["held"][0] == pytest.approx(0.125) and o["held"][0] == pytest.approx(0.4375)
    assert s["held_updown"] == (1, 0) and o["held_updown"] == (2, 0)
    assert s["held"][3] == pytest.approx(0.125 / 0.4375) and o["held"][3] == pytest.approx(1.0)
    # late (last half), by seed: sharpo (.25, .25) -> .25, oracle (.5, .25) -> .375
    # (the last step alone: .125 each)
    assert s["late"][0] == pytest.approx(0.25) and o["late"][0] == pytest.approx(0.375)
    assert s["late"][3] == pytest.approx(0.25 / 0.375)
    assert s["late_mean"] == pytest.approx(0.875) and s["held_mean"] == pytest.approx(0.6)
    # final "success" below the warm start's .6 (strictly: the oracle's .6 is no collapse)
    assert [rows[m]["collapses"] for m in ("grpo", "oracle", "sharpo:0.2")] == [1, 0, 1]
    assert "held" not in rows["grpo"] and "late" not in rows["grpo"]


def test_intervals_contain_the_mean_within_the_differences(ceiling, tmp_path):
    rows = ceiling.measure(make_compare(tmp_path), METHODS, [0, 1], "grpo", "oracle", 1.0)["rows"]
    held, late = rows["sharpo:0.2"]["held"], rows["sharpo:0.2"]["late"]
    # held-out task differences (.25, 0); all-steps seed differences (.375, .25)
    assert 0 <= held[1] <= held[0] <= held[2] <= 0.25 and held[1] < held[2]
    assert 0.25 <= late[1] <= late[0] <= late[2] <= 0.375 and late[1] < late[2]


@pytest.mark.parametrize("frac, sharpo, oracle", [(0.5, 0.25, 0.375), (1.0, 0.3125, 0.4375),
                                                  (0.25, 0.125, 0.125)])
def test_train_frac_sets_the_window(ceiling, tmp_path, frac, sharpo, oracle):
    res = ceiling.measure(make_compare(tmp_path), METHODS, [0, 1], "grpo", "oracle", frac)
    s, o = res["rows"]["sharpo:0.2"], res["rows"]["oracle"]
    assert s["late"][0] == pytest.approx(sharpo) and o["late"][0] == pytest.approx(oracle)
    assert s["late"][3] == pytest.approx(sharpo / oracle)
    assert s["held"][0] == pytest.approx(0.125)        # the held-out gain does not move
    assert res["train_frac"] == frac


def test_a_missing_seed_is_paired_only_on_common_seeds(ceiling, tmp_path):
    run = make_compare(tmp_path, skip={("sharpo:0.2", 1)})
    rows = ceiling.measure(run, METHODS, [0, 1], "grpo", "oracle")["rows"]
    s, o = rows["sharpo:0.2"], rows["oracle"]
    assert s["seeds"] == 1
    # seed 0 only: held (.25, .25), late .25 (against grpo over both seeds: .125 and .125)
    assert s["held"][0] == pytest.approx(0.25) and s["late"][0] == pytest.approx(0.25)
    # share on seed 0: the oracle's held gain (.75, .25) -> .5, its late gain .5
    assert s["held"][3] == pytest.approx(0.5) and s["late"][3] == pytest.approx(0.5)
    # the oracle's own gain still uses both of its seeds
    assert o["held"][0] == pytest.approx(0.4375) and o["late"][0] == pytest.approx(0.375)


def test_default_table_header_is_unchanged(ceiling, tmp_path, capsys):
    assert ceiling.main([str(make_compare(tmp_path)), "--methods", METHODS, "--seeds", "0,1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "warm start held-out success: 60.0%"
    assert lines[2] == HEADER
    sharpo = lines[-1]
    assert sharpo.startswith(f"| {RUNS['sharpo:0.2'][0]} | 2 | 60.0 | +12.5 (")
    assert "; 1 up / 0 down) |" in sharpo
    assert "| 87.5 | +25.0 (" in sharpo and sharpo.endswith("| 1/2 |")


@pytest.mark.parametrize("frac, title", [("1", "training, all steps (%)"),
                                         ("0.3", "training, last 30% of steps (%)")])
def test_table_names_the_window(ceiling, tmp_path, capsys, frac, title):
    assert ceiling.main([str(make_compare(tmp_path)), "--methods", METHODS, "--seeds", "0,1",
                         "--train-frac", frac]) == 0
    header = capsys.readouterr().out.splitlines()[2]
    assert f"| {title} |" in header and "late" not in header


def test_figure_panel_names_the_window(ceiling, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    run = make_compare(tmp_path / "run")
    for frac, title in ((0.5, "late training success vs GRPO"),
                        (1.0, "training success, all steps, vs GRPO")):
        res = ceiling.measure(run, METHODS, [0, 1], "grpo", "oracle", frac)
        fig = ceiling.figure(res, tmp_path / f"f{frac}.png", "oracle")
        assert fig.axes[1].get_title() == title + "\n(points, by seed)"
        assert (tmp_path / f"f{frac}.png").stat().st_size > 0
        plt.close(fig)


@pytest.mark.parametrize("args, named", [
    (["--methods", "oracle,sharpo:0.2"], "'grpo'"),
    (["--methods", METHODS, "--seeds", "0,x"], "--seeds"),
    *((["--methods", METHODS, "--train-frac", bad], "--train-frac")
      for bad in ("0", "1.5", "abc", "nan"))])
def test_bad_input_is_one_line_and_exit_2(ceiling, tmp_path, capsys, args, named):
    assert ceiling.main([str(make_compare(tmp_path))] + args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ") and named in err


def test_measure_rejects_a_bad_train_frac(ceiling, tmp_path):
    with pytest.raises(ValueError, match=r"--train-frac: must be a number in \(0, 1\]"):
        ceiling.measure(make_compare(tmp_path), METHODS, [0, 1], "grpo", "oracle", 0.0)


def test_a_compare_without_a_warm_start_prints_no_collapses(ceiling, tmp_path, capsys):
    run = make_compare(tmp_path)
    state = json.loads(run.joinpath("pipeline.json").read_text())
    del state["phases"]["eval/warm-start"]
    run.joinpath("pipeline.json").write_text(json.dumps(state))
    assert ceiling.main([str(run), "--methods", METHODS, "--seeds", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "warm start held-out success: not recorded" in out and "| n/a/2 |" in out


def test_the_window_is_exact_where_steps_x_frac_is_not_a_float_integer(tmp_path):
    from sharpo_train.analysis.report.compare_training import late_success
    run = tmp_path / "run"
    run.mkdir()
    run.joinpath("metrics.jsonl").write_text("".join(
        json.dumps({"kind": "train", "step": s, "success": float(s > 7)}) + "\n"
        for s in range(1, 11)))
    assert late_success(run, 0.3) == 1.0          # steps 8-10, not 7-10 (10 x 0.3 > 3)


def test_titles_name_the_reference_method(ceiling, tmp_path, capsys):
    """--reference oracle: every "vs" title names the oracle's label, not GRPO."""
    run = make_compare(tmp_path)
    assert ceiling.main([str(run), "--methods", METHODS, "--seeds", "0,1",
                         "--reference", "oracle", "--oracle", "sharpo:0.2"]) == 0
    header = capsys.readouterr().out.splitlines()[2]
    label = RUNS["oracle"][0]
    assert f"vs {label}, held-out (by task)" in header and f"vs {label}, late (by seed)" in header
    assert "GRPO" not in header
    res = ceiling.measure(run, METHODS, [0, 1], "oracle", "sharpo:0.2")
    fig = ceiling.figure(res, tmp_path / "f.png", "sharpo:0.2")
    assert fig.axes[0].get_title().startswith(f"held-out success vs {label}")
    import matplotlib.pyplot as plt
    plt.close(fig)
