"""`sharpo compare env=corridor --quick` end to end, for real (no stand-ins): the tasks,
the mixed demonstrations with peer hints, the SFT warm start, two methods x one seed, and
compare.md with the corridor's sections (late training success paired by seed, credit AUC
per token and per segment sum from the exact labels, time per method)."""
from __future__ import annotations

import json

from sharpo_train.cli import main


def test_quick_corridor_compare_runs_and_reports(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", "--quick", "--run-dir", str(out), "--seeds", "0",
                 "--methods", "grpo,sharpo:0.2@estimator.tau=0.5", "env=corridor",
                 "demo.train_games=12", "demo.eval_games=4"]) == 0
    state = json.loads((out / "pipeline.json").read_text())
    assert state["phases"]["tasks"]["result"]["train"] == 12
    assert state["phases"]["demos"]["result"]["agent"] == "mixed"
    for run in ("grpo-seed0", "sharpo-lam0.2-tau0.5-seed0"):
        cfg = (out / "runs" / run / "config.yaml").read_text()
        assert "name: corridor" in cfg and "hint_scope: to_turn" in cfg
        # the recipe's guard and repeated held-out episodes, for every arm alike
        assert "format_penalty: 0.5" in cfg and "episodes_per_task: 4" in cfg
        ev = json.loads((out / "runs" / run / "eval.json").read_text())
        assert ev["episodes"] == 16 and ev["episodes_per_task"] == 4 and len(ev["per_task"]) == 4
    assert "tau: 0.5" in (out / "runs" / "sharpo-lam0.2-tau0.5-seed0" / "config.yaml").read_text()
    md = (out / "compare.md").read_text()
    assert "Held-out corridor tasks (4 tasks" in md and "sampled at temperature 1" in md
    assert "4 episodes per task (a task's score: its success rate over them)" in md
    assert "| SHARPO (λ=0.2, tau=0.5) | 1 |" in md
    assert "late training success" in md and "| Method | RL runs | seconds" in md
    assert (out / "compare_curves.png").read_bytes()[:4] == b"\x89PNG"
