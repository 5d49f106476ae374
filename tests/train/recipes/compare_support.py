"""Stand-ins for `sharpo compare`'s phases (no tests here; imported by tests/train/recipes/test_compare.py
and tests/train/estimators/test_estimators_train.py): games, demos, SFT and evaluation return canned results
and training is a recorder, so that only the orchestration and the report run."""
from __future__ import annotations

import json
from pathlib import Path

import sharpo_train.envs.alfworld.recipe as alfworld_recipe
import sharpo_train.recipes.phases as phases
import sharpo_train.loops.trainer as trainer
from sharpo_train.envs.base import Task

HELD = [Task(f"held/{f}{i}", f) for f in ("Pick", "Cool") for i in range(2)]


def fake_phases(monkeypatch, fake_train, warm_eval: dict) -> None:
    """Patch every phase: held-out tasks are HELD, every evaluate() returns warm_eval,
    trainer.train is fake_train (cfg -> run dir, see write_fake_run)."""
    monkeypatch.setattr(alfworld_recipe, "games", lambda d, s: Path(d).mkdir(parents=True) or {})
    monkeypatch.setattr(alfworld_recipe, "demos", lambda *a: {"turns": 10})
    monkeypatch.setattr(phases, "sft", lambda d, out, cfg: {"steps": 3, "examples": 10})
    monkeypatch.setattr(alfworld_recipe, "heldout_tasks", lambda games: HELD)
    monkeypatch.setattr(alfworld_recipe, "real_eval_tasks", lambda s: (None, []))
    monkeypatch.setattr(phases, "evaluate", lambda *a, **k: warm_eval)
    monkeypatch.setattr(trainer, "train", fake_train)


def write_fake_run(cfg, rows: list[dict], result: dict) -> Path:
    """What a finished run leaves for the report: cfg.run_dir/metrics.jsonl (rows) and
    eval.json (result); returns the run dir."""
    run = Path(cfg.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "eval.json").write_text(json.dumps(result))
    return run
