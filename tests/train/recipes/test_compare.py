"""`sharpo compare`: every method x seed trains from the one warm start with the same seed,
the table is mean ± sample std over seeds per family, a rerun keeps finished runs. The
training and evaluation calls are replaced by recorders (the real ones are exercised by
test_pipeline.py); what is tested here is the orchestration and the report."""
import statistics

import pytest

import sharpo_train.loops.trainer as trainer
from sharpo_train.cli import main
import sharpo_train.recipes.compare as compare_recipe
from sharpo_train.recipes.recipe_config import parse_methods, parse_seeds

from train.recipes.compare_support import HELD, fake_phases, write_fake_run

# the final success each (method, seed) will report: made up, distinct per run
FINAL = {("grpo", 0): 0.25, ("grpo", 1): 0.5, ("sharpo", 0): 0.75, ("sharpo", 1): 0.5}


@pytest.fixture
def fake_world(monkeypatch):
    calls = []

    def fake_train(cfg):
        calls.append((cfg.method, cfg.seed, cfg.init_from, cfg.estimator.lam))
        x = FINAL[(cfg.method, cfg.seed)]
        rows = [{"step": s, "kind": "train", "success": x * s / 2} for s in (1, 2)]
        rows.append({"step": 2, "kind": "eval", "eval/success": x})
        per_task = {t.id: int(i < 4 * x) for i, t in enumerate(HELD)}
        return write_fake_run(cfg, rows, {"success": x, "per_family": {"Pick": x, "Cool": 1 - x},
                                          "episodes": 4, "per_task": per_task})

    fake_phases(monkeypatch, fake_train,
                {"success": 0.1, "per_family": {"Pick": 0.2, "Cool": 0.0}, "episodes": 4,
                 "per_task": {t.id: 0 for t in HELD}})
    return calls


def test_compare_table_and_resume(tmp_path, fake_world, capsys):
    out = tmp_path / "cmp"
    args = ["compare", "--out", str(out), "--seeds", "0,1", "--methods", "grpo,sharpo:0.05"]
    assert main(args) == 0
    # every run starts from the one warm start; seed k is the same for both methods
    sft = str(out / "sft")
    assert sorted(fake_world) == [("grpo", 0, sft, 0.2), ("grpo", 1, sft, 0.2),
                                  ("sharpo", 0, sft, 0.05), ("sharpo", 1, sft, 0.05)]
    md = (out / "compare.md").read_text()
    grpo = [0.25, 0.5]
    row = f"| GRPO | 2 | {statistics.mean(grpo) * 100:.2f} ± {statistics.stdev(grpo) * 100:.2f} |"
    assert row in md
    # per family: Pick = x, Cool = 1 - x
    assert "| SHARPO (λ=0.05) | 62.50 ± 17.68 | 37.50 ± 17.68 | 62.50 ± 17.68 |" in md
    assert "GRPO: 2/2" in md and "Warm start before RL" in md
    assert "120 generated training games (size tiny)." in md     # ALFWorld's RecipeSpec.tasks_note
    assert (out / "compare_curves.png").read_bytes()[:4] == b"\x89PNG"
    # paired on the same held-out games, per game averaged over the seeds: GRPO wins game 0
    # in both seeds and game 1 in seed 1 (0.25 -> 1 game, 0.5 -> 2); SHARPO(0.05) games 0-2
    # in seed 0 and 0-1 in seed 1; the warm start wins none
    assert ("| GRPO | +37.5 points (95% paired bootstrap" in md
            and "2 games gained, 0 lost" in md)
    assert "| SHARPO (λ=0.05) | +62.5 points" in md
    assert "| +25.0 points" in md                 # SHARPO(0.05) vs GRPO
    # a rerun keeps the finished runs
    fake_world.clear()
    assert main(args) == 0
    assert fake_world == []
    assert "already done" in capsys.readouterr().out


def test_partial_runs_are_labelled(tmp_path, fake_world, monkeypatch):
    real_train = trainer.train

    def stop_at_sharpo(cfg):
        if cfg.method == "sharpo":
            raise KeyboardInterrupt
        return real_train(cfg)

    monkeypatch.setattr(trainer, "train", stop_at_sharpo)
    out = tmp_path / "cmp"
    with pytest.raises(KeyboardInterrupt):
        main(["compare", "--out", str(out), "--seeds", "0,1", "--methods", "grpo,sharpo:0.2"])
    md = (out / "compare.md").read_text()
    assert "GRPO: 1/2" in md and "SHARPO (λ=0.2): 0/2" in md


def test_argument_errors(tmp_path, capsys):
    # one home: recipes/recipe_config.py (compare.py re-exports nothing of it)
    assert not hasattr(compare_recipe, "parse_methods") and not hasattr(compare_recipe, "parse_seeds")
    assert parse_methods("grpo,sharpo:0.05")[1][1] == "sharpo-lam0.05"
    assert parse_seeds("0,2") == [0, 2]
    for bad in ("ppo", "sharpo:x", "sharpo:2"):
        with pytest.raises(ValueError, match="--methods"):
            parse_methods(bad)
    for bad in ("a", "1,1", "-1"):
        with pytest.raises(ValueError, match="--seeds"):
            parse_seeds(bad)
    assert main(["compare", "--out", str(tmp_path / "c"), "--seeds", "x"]) == 2
    assert "--seeds" in capsys.readouterr().err
