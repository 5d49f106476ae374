"""Tables 1-2 layout: mean and sample std over runs, overall and per family; curves."""
import math
import statistics

from sharpo_train.analysis.report.curves import moving_average, plot_learning_curves, run_curves
from sharpo_train.analysis.report.records import read_metrics
from sharpo_train.analysis.report.tables import aggregate_runs, format_mean_std, mean_std, results_markdown


def test_mean_and_sample_std():
    m, s = mean_std([0.5, 0.7, 0.9])
    assert math.isclose(m, 0.7) and math.isclose(s, 0.2)  # n-1, not n
    assert math.isnan(mean_std([0.4])[1])
    assert format_mean_std(0.7, 0.2) == "70.00 ± 20.00"
    assert format_mean_std(0.4, math.nan) == "40.00"


def test_aggregate_per_family_and_markdown():
    runs = {"GRPO": [{"success": 0.5, "per_family": {"Pick": 1.0, "Cool": 0.0}},
                     {"success": 0.25, "per_family": {"Pick": 0.5, "Cool": 0.0}}],
            "SHARPO (λ=0.2)": [{"success": 0.75, "per_family": {"Pick": 1.0, "Cool": 0.5}},
                               {"success": 0.5, "per_family": {"Pick": 1.0}}]}
    table = aggregate_runs(runs)
    assert table["GRPO"]["overall"][0] == 0.375
    assert math.isclose(table["GRPO"]["overall"][1], statistics.stdev([0.5, 0.25]))
    assert table["SHARPO (λ=0.2)"]["per_family"]["Cool"][0] == 0.5   # one run had Cool
    assert math.isnan(table["GRPO"]["per_family"]["Heat"][0])
    md = results_markdown(table)
    assert "| GRPO | 2 | 37.50 ± 17.68 |" in md
    assert "| Method | Pick | Cool | All |" in md      # families nobody evaluated are left out
    assert "| SHARPO (λ=0.2) | 100.00 ± 0.00 | 50.00 | 62.50 ± 17.68 |" in md
    assert "| Method | runs | ALFWorld success |" in md        # the default env's label


def test_metric_label_comes_from_the_environment_spec():
    table = aggregate_runs({"GRPO": [{"success": 0.5, "per_family": {}}]}, families=[])
    assert "| Method | runs | Corridor success |" in results_markdown(table, [], env="corridor")
    assert "| Method | runs | WebShop success |" in results_markdown(table, [], env="webshop")


def test_metrics_and_curves(tmp_path, write_run):
    run = write_run(tmp_path / "r1")
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 5, "kind": "tr')          # a torn last line is skipped
    train, evals = read_metrics(run)
    assert [r["step"] for r in train] == [1, 2, 3, 4] and [r["step"] for r in evals] == [2, 4]
    curves = run_curves(run)
    assert curves["eval"] == ([2, 4], [0.1, 0.2])
    assert list(moving_average([0, 1, 2, 3], 2)) == [0, 0.5, 1.5, 2.5]
    run2 = write_run(tmp_path / "r2")
    png = plot_learning_curves({"SHARPO": [run, run2], "GRPO": [run]}, tmp_path / "c.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_training_outcomes_count_mixed_groups(tmp_path, write_run):
    from sharpo_train.analysis.report.records import outcomes_sentence, training_outcomes
    run = write_run(tmp_path / "r")
    o = training_outcomes(run)
    assert (o["steps"], o["groups_recorded"], o["mixed_groups"]) == (4, 2, 1)
    assert "1 of 2 recorded groups" in outcomes_sentence(o)
    none = dict(o, mixed_groups=0)
    assert "every advantage is zero" in outcomes_sentence(none)
