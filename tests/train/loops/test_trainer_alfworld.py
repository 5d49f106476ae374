"""End to end: `sharpo train` on the embedded default config (tiny policy, ALFWorld games
generated on first use by the alfworld generator, real alfworld/textworld engine)."""
import json

import pytest

from sharpo_train.cli import main as cli_main
from sharpo_train.loops.train_config import load_config
from sharpo_train.io import read_jsonl

pytest.importorskip("alfworld")
pytest.importorskip("textworld")


def test_embedded_default_trains_on_alfworld(tmp_path):
    run, games = tmp_path / "run", tmp_path / "games"
    default = load_config(None)
    assert default.env["name"] == "alfworld"
    rc = cli_main(["train", f"run_dir={run}", f"env.games_dir={games}", "log.progress=false"])
    assert rc == 0
    lines = read_jsonl(run / "metrics.jsonl")
    train = [l for l in lines if l["kind"] == "train"]
    assert [l["step"] for l in train] == list(range(1, default.total_steps + 1))
    for l in train:
        assert l["episodes"] == default.rollout.tasks_per_step * default.rollout.group_size
        assert l["rows"] > 0 and l["env_faults"] == 0 and l["turns_mean"] >= 1
        assert l["method"] == "sharpo" and l["time/rollout"] > 0
    evals = [l for l in lines if l["kind"] == "eval"]
    assert len(evals) == 1 and evals[0]["eval/episodes"] == default.eval.num_tasks
    result = json.loads((run / "eval.json").read_text())
    assert result["episodes"] == default.eval.num_tasks
    assert set(result["per_family"]) <= {"Pick", "Clean", "Heat", "Cool", "Look", "Pick2"}
    credit = json.loads((run / "credit" / "step_00001.json").read_text())
    turn = credit["groups"][0]["rollouts"][0]["turns"][0]
    assert "Your task is to:" in turn["user"] and "Admissible actions" in turn["user"]
    assert turn["observation_after"]                      # the engine answered every action
    assert (run / "checkpoints" / "latest").read_text().strip() == f"step_{default.total_steps:06d}"
