"""`sharpo demo` end to end at CI size: games -> demos -> SFT -> SHARPO -> held-out eval,
and the table, the plot and a readable credit report it promises; rerunning resumes."""
import json
import re
from argparse import Namespace
from pathlib import Path

import pytest

pytest.importorskip("alfworld")

from sharpo_train.cli import main
from sharpo_train.recipes.phases import train_config
from sharpo_train.recipes.overrides import PipelinePlan, parse_demo_settings, split_overrides
from sharpo_train.analysis.report.explain_html import fmt
from sharpo_train.analysis.report.records import list_credit_steps, load_credit_record

# smaller still than --quick: this file must stay well under a minute of CPU
TINY = ["demo.train_games=3", "demo.eval_games=2", "demo.real_eval_games=1",
        "demo.real_max_turns=2", "demo.eval_sft=false", "sft.max_steps=3", "sft.batch_size=4",
        "total_steps=2", "rollout.tasks_per_step=1", "rollout.group_size=3",
        "rollout.max_turns=2", "rollout.max_new_tokens=16", "eval.every=0"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "run"
    assert main(["demo", "--quick", "--out", str(out)] + TINY) == 0
    return out


def test_demo_writes_table_plot_and_report(demo_run, capsys):
    results = (demo_run / "results.md").read_text()
    assert "## Held-out generated games" in results
    table = re.findall(r"^\| (Pick|Look|Clean|Heat|Cool|Pick2|\*\*All\*\*) \|", results, re.M)
    assert "**All**" in table and len(table) >= 2
    # the table's overall number is the run's own final evaluation
    final = json.loads((demo_run / "rl" / "eval.json").read_text())
    assert f"**{final['success'] * 100:.1f}**" in results
    assert "95% Wilson" in results            # the rate with its interval under the table
    assert (demo_run / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    page = (demo_run / "credit_report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "Rollouts: GRPO vs SHARPO advantage" in page
    # the credit page shows the GRPO advantage of every rollout of a recorded group
    step = int(re.search(r"step (\d+) · group (\d+)", page).group(1))
    group = int(re.search(r"step (\d+) · group (\d+)", page).group(2))
    record = load_credit_record(demo_run / "rl", step)
    for rollout in record["groups"][group]["rollouts"]:
        assert f"<td>{fmt(rollout['advantage_grpo'])}</td>" in page
    assert list_credit_steps(demo_run / "rl") == [1, 2]
    state = json.loads((demo_run / "pipeline.json").read_text())
    assert all(p["done"] for p in state["phases"].values())
    assert "eval_sft" not in state["phases"]


def test_rerun_skips_finished_phases(demo_run, capsys):
    before = (demo_run / "rl" / "metrics.jsonl").read_text()
    assert main(["demo", "--quick", "--out", str(demo_run)] + TINY) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"run directory: {demo_run}"   # named before any phase
    assert "[rl] already done" in out and "[sft] already done" in out
    assert (demo_run / "rl" / "metrics.jsonl").read_text() == before
    assert f"run directory: {demo_run}" in out


def test_override_routing_and_errors(tmp_path, capsys):
    demo, sft, train = split_overrides(["demo.train_games=4", "sft.lr=0.01", "total_steps=3"])
    assert (demo, sft, train) == (["train_games=4"], ["lr=0.01"], ["total_steps=3"])
    plan = PipelinePlan.from_args(tmp_path, ["sft.max_steps=7", "demo.seed=3"])
    assert plan.sft.max_steps == 7 and plan.settings.seed == 3 and plan.sft.seed == 3
    # the RL phase shows a progress bar
    cfg = train_config(tmp_path / "g", None, plan.settings, plan.train_overrides, tmp_path / "rl")
    assert cfg.log.progress is True
    with pytest.raises(ValueError, match="demo.colour"):
        parse_demo_settings(["colour=red"])
    with pytest.raises(ValueError, match="demo.train_games"):
        parse_demo_settings(["train_games=many"])
    assert main(["demo", "--out", str(tmp_path / "x"), "sft.nope=1"]) == 2
    err = capsys.readouterr().err
    assert "'nope'" in err and "sft.nope" in err     # the key, named


REAL_GAMES = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "alfworld"


def test_eval_of_a_demo_on_games_without_a_train_split(demo_run, capsys):
    """`sharpo eval --run DEMO --games <a folder with no train split>/json_2.1.1/valid_seen`:
    the demo's rl/ run, one game per family (balanced), a new eval-*.json beside the run's
    own eval.json (kept), and no transformers bars or deprecation warnings."""
    split = REAL_GAMES / "json_2.1.1" / "valid_seen"
    if not split.is_dir():
        pytest.skip(f"real ALFWorld games not found at {REAL_GAMES}")
    assert not (REAL_GAMES / "json_2.1.1" / "train").exists()
    own = (demo_run / "rl" / "eval.json").read_text()
    before = set((demo_run / "rl").glob("eval-*.json"))
    assert main(["eval", "--run", str(demo_run), "--games", str(split), "eval.num_tasks=6",
                 "eval.max_turns=1", "rollout.max_new_tokens=8"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["per_family_episodes"] == {f: 1 for f in
                                             ("Pick", "Clean", "Heat", "Cool", "Look", "Pick2")}
    assert result["episodes"] == 6
    (written,) = set((demo_run / "rl").glob("eval-*.json")) - before
    assert json.loads(written.read_text()) == result and f"wrote {written}" in err
    assert (demo_run / "rl" / "eval.json").read_text() == own
    assert "Loading weights" not in err and "past_key_values" not in err


def _fake_run(root: Path) -> Path:
    """A run directory with a config and a checkpoint marker (nothing loadable)."""
    from sharpo_train.loops.train_config import load_config, save_config
    root.mkdir(parents=True)
    save_config(load_config(None, []), root / "config.yaml")
    step = root / "checkpoints" / "step_000002"
    (step / "policy").mkdir(parents=True)
    # the files a complete checkpoint lists (docs/run_directory.md), tensors not loadable
    from safetensors.torch import save_file
    import torch
    save_file({"w": torch.zeros(1)}, str(step / "policy" / "model.safetensors"))
    save_file({}, str(step / "optimizer.safetensors"))
    files = {rel: (step / rel).stat().st_size
             for rel in ("policy/model.safetensors", "optimizer.safetensors")}
    (step / "state.json").write_text(json.dumps({
        "format": "sharpo-checkpoint/1", "step": 2, "trainer": {"step": 2, "seed": 0},
        "scheduler": {}, "optimizer": {"state": {}, "param_groups": [{"params": []}]},
        "files": files}))
    (root / "checkpoints" / "latest").write_text("step_000002\n")
    (root / "eval.json").write_text("{}")
    return root


def _eval_args(**kw):
    base = dict(run_dir=None, model=None, games=None, config=None, out=None, force=False,
                overrides=[])
    base.update(kw)
    return Namespace(**base)


def test_eval_never_overwrites_and_reads_demo_dirs_and_split_folders(tmp_path, capsys):
    from sharpo_train.commands.eval import plan
    demo = tmp_path / "demo-1"
    run = _fake_run(demo / "rl")
    cfg, weights, out = plan(_eval_args(run_dir=str(demo)))
    assert weights == run / "checkpoints" / "step_000002" / "policy"
    assert out.parent == run and out.name.startswith("eval-") and out.name != "eval.json"
    # --out that exists: refused without --force, named
    with pytest.raises(FileExistsError, match="--force"):
        plan(_eval_args(run_dir=str(run), out=str(run / "eval.json")))
    assert plan(_eval_args(run_dir=str(run), out=str(run / "eval.json"), force=True))[2] == \
        str(run / "eval.json")
    assert main(["eval", "--run", str(run), "--out", str(run / "eval.json")]) == 2
    assert "--force" in capsys.readouterr().err
    # a split folder: its release folder and that split
    split = tmp_path / "games" / "json_2.1.1" / "valid_seen"
    split.mkdir(parents=True)
    cfg, _, _ = plan(_eval_args(run_dir=str(run), games=str(split)))
    assert cfg.env["games_dir"] == str(split.parent) and cfg.env["eval_split"] == "valid_seen"
    # a missing run: one line naming --run
    assert main(["eval", "--run", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "--run" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_eval_env_needs_no_training_split():
    from sharpo_train.loops.evaluate import eval_only_env
    env = eval_only_env({"name": "alfworld", "games_dir": "x", "train_split": "train",
                         "eval_split": "valid_seen", "num_train_games": 3}, "y")
    assert env["train_split"] == "valid_seen" and env["games_dir"] == "y"
    assert "num_train_games" not in env
