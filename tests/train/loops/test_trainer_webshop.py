"""End to end: `sharpo train env.name=webshop` for two steps with the tiny policy."""
import json

import pytest

from sharpo_train.cli import main as cli_main
from sharpo_train.io import read_jsonl

pytest.importorskip("bm25s")
pytest.importorskip("spacy")

pytestmark = pytest.mark.usefixtures("webshop_data")


def test_train_two_steps_on_webshop(tmp_path):
    run = tmp_path / "run"
    rc = cli_main(["train", f"run_dir={run}", "env.name=webshop", "env.num_eval=2",
                   "total_steps=2", "rollout.tasks_per_step=2", "rollout.group_size=2",
                   "rollout.max_turns=3", "rollout.max_new_tokens=24", "eval.num_tasks=2",
                   "log.progress=false"])
    assert rc == 0
    lines = read_jsonl(run / "metrics.jsonl")
    train = [l for l in lines if l["kind"] == "train"]
    assert [l["step"] for l in train] == [1, 2]
    for l in train:
        assert l["episodes"] == 4 and l["rows"] > 0 and l["env_faults"] == 0
    result = json.loads((run / "eval.json").read_text())
    assert result["episodes"] == 2
    assert set(result["per_family"]) <= {"beauty", "electronics", "fashion", "garden", "grocery"}
    credit = json.loads((run / "credit" / "step_00001.json").read_text())
    turn = credit["groups"][0]["rollouts"][0]["turns"][0]
    assert turn["user"].startswith("You are a shopping agent in WebShop")
    assert "'search[<your query>]'," in turn["user"]
    assert turn["observation_after"]
