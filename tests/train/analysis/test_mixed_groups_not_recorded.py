"""compare.md's "mixed groups / groups" column and demo.md's outcomes sentence say that
nothing was recorded when the runs wrote no credit records (log.credit_every=0, the
corridor recipe), rather than `0 / 0` and "every advantage is zero", which read as "no
group had a signal"."""
import shutil

from sharpo_train.analysis.report.records import (NOT_RECORDED, mixed_groups_cell,
                                                  outcomes_sentence, training_outcomes)


class _Log:
    """The parts of recipes.phases.PhaseLog that write_compare_report reads."""

    def __init__(self, phases):
        self.state = {"phases": phases, "command": "sharpo compare"}

    def result(self, name):
        return self.state["phases"].get(name, {}).get("result")

    def seconds(self):
        return {k: 1.0 for k in self.state["phases"]}


def _compare_md(tmp_path, write_run, keep_credit):
    from sharpo_train.analysis.report.compare import write_compare_report
    from sharpo_train.recipes.recipe_config import CompareConfig, settings_class
    from sharpo_train.recipes.recipe_config import parse_methods
    out = tmp_path / "cmp"
    methods = parse_methods("grpo,sharpo:0.2")
    phases = {}
    for label, slug, _ in methods:
        run = write_run(out / "runs" / f"{slug}-seed0")
        if not keep_credit:
            shutil.rmtree(run / "credit")
        phases[f"rl/{slug}/seed0"] = {"done": True, "seconds": 1.0, "result": {
            "success": 0.5, "episodes": 4, "per_task": {"a": 0.5, "b": 0.5}}}
    write_compare_report(out, _Log(phases), methods, [0],
                         settings_class(CompareConfig().env, CompareConfig)())
    return (out / "compare.md").read_text()


def test_compare_md_says_nothing_was_recorded(tmp_path, write_run):
    md = _compare_md(tmp_path, write_run, keep_credit=False)
    rows = [line for line in md.splitlines() if line.startswith("| GRPO |")
            and "/" in line and "episodes" not in line]
    assert any(line.endswith(f"| {NOT_RECORDED} |") for line in rows), md
    assert not [line for line in md.splitlines() if line.endswith("| 0 / 0 |")]


def test_compare_md_counts_recorded_groups(tmp_path, write_run):
    md = _compare_md(tmp_path, write_run, keep_credit=True)
    assert "| GRPO | 0 / 0 | 1 / 2 |" in md and NOT_RECORDED not in md


def test_outcomes_sentence_without_records(tmp_path, write_run):
    run = write_run(tmp_path / "r")
    shutil.rmtree(run / "credit")
    o = training_outcomes(run)
    assert o["groups_recorded"] == 0
    text = outcomes_sentence(o)
    assert "not recorded" in text and "every advantage is zero" not in text
    assert mixed_groups_cell(0, 0) == NOT_RECORDED and mixed_groups_cell(1, 2) == "1 / 2"
