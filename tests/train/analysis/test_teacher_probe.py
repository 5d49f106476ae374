"""The hint-aware warm start (sft.hinted_demos) and the teacher probe (analysis/teacher_probe.py)."""
from __future__ import annotations

import json
import random

import pytest
import torch

from sharpo_train.envs.alfworld.prompts import format_response, render_hint
from sharpo_train.models.policy import build_policy
from sharpo_train.analysis.teacher_probe import ProbeResult, auc, probe_episode
from sharpo_train.step.rollout import chat_prompt_ids
from sharpo_train.step.scoring import tree_logprobs
from sharpo_train.step.segments import find_spans
from sharpo_train.loops.sft import hinted_demos
from sharpo_train.envs.turn_prompt import TASK_LINE_PREFIX
from sharpo_train.hint import HintSettings, place_hint
from sharpo_train.step.teacher import teacher_prompt

MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}


def _episode(task_id: str, n: int) -> list[dict]:
    recs = []
    for k in range(n):
        user = (f"You are a household agent.\nYour task is to: do {task_id}.\n"
                f"Current observation (step {k + 1}): room {k}.\n"
                "Admissible actions: 'go to a 1', 'go to b 1', 'look'")
        action = ["go to a 1", "go to b 1", "look"][k % 3]
        recs.append({"task_id": task_id, "step": k, "action": action,
                     "admissible": ["go to a 1", "go to b 1", "look"],
                     "observation_after": f"You arrive at {k}.",
                     "messages": [{"role": "user", "content": user},
                                  {"role": "assistant",
                                   "content": format_response(f"step {k}", action)}]})
    return recs


def _write(path, episodes):
    with open(path, "w") as f:
        for recs in episodes:
            for r in recs:
                f.write(json.dumps(r) + "\n")


@pytest.mark.parametrize("placement", ["after_task", "after_observation"])
def test_hinted_copies_use_the_teachers_layout(tmp_path, placement):
    eps = [_episode(f"t{i}", 3) for i in range(4)]
    _write(tmp_path / "d.jsonl", eps)
    out = hinted_demos(tmp_path / "d.jsonl", 0.5, seed=0,
                       settings=HintSettings(placement=placement))
    assert len(out) == 2 * 3                          # half of the episodes, every turn
    by_reply = {}
    for recs in eps:
        hint = render_hint([(r["action"], r["observation_after"]) for r in recs])
        for r in recs:
            by_reply[(r["messages"][0]["content"], r["messages"][1]["content"])] = hint
    for user, reply in out:
        matches = [(u, h) for (u, rep), h in by_reply.items()
                   if rep == reply["content"] and place_hint(u, h, placement, TASK_LINE_PREFIX) == user["content"]]
        assert len(matches) == 1                      # exactly the trainer's teacher text
    assert hinted_demos(tmp_path / "d.jsonl", 0.0) == []
    with pytest.raises(ValueError, match="hint_fraction"):
        hinted_demos(tmp_path / "d.jsonl", 1.5)


def test_auc_matches_the_pairwise_definition():
    rng = random.Random(3)
    for _ in range(20):
        pos = [rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(rng.randint(1, 7))]
        neg = [rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(rng.randint(1, 5))]
        want = sum((x > y) + 0.5 * (x == y) for x in pos for y in neg) / (len(pos) * len(neg))
        assert auc(pos, neg) == pytest.approx(want)
    assert auc([], [1.0]) is None
    r = ProbeResult([1.0, 2.0, 3.0], [0.0, 0.0, 5.0], ["a", "b", "c"], {"Pick": 3})
    s = r.summary(boot=200)
    assert s["auc"] == pytest.approx(6 / 9) and s["games"] == 3
    assert 0.0 <= s["auc_ci95"][0] <= s["auc_ci95"][1] <= 1.0


def test_probe_gaps_are_action_span_means_of_teacher_minus_student():
    torch.manual_seed(0)
    model, tok = build_policy(MODEL)
    recs = _episode("t0", 3)
    gaps = probe_episode(model, tok, recs, random.Random(0))
    assert len(gaps) == 3
    # recompute the expert action's gap of turn 1 with separate full forwards
    hint = render_hint([(r["action"], r["observation_after"]) for r in recs])
    rec = recs[1]
    resp = tok(rec["messages"][1]["content"], add_special_tokens=False)["input_ids"]
    student = chat_prompt_ids(tok, rec["messages"][0]["content"])
    teacher, _ = teacher_prompt(tok, rec["messages"][0]["content"], hint, 4096)
    with torch.no_grad():
        lt, ls = tree_logprobs(model, [teacher + resp, student + resp], [len(resp)] * 2,
                               shared_prefix=False)
    span = [s for s in find_spans(tok, resp) if s.kind == "action"][-1]
    want = float((lt[span.start:span.end] - ls[span.start:span.end]).mean())
    assert gaps[1][0] == pytest.approx(want, abs=1e-5)
    assert gaps[1][0] != gaps[1][1]                   # the random action is scored apart


def test_probe_command_refuses_bad_arguments(capsys):
    from sharpo_train.cli import main
    with pytest.raises(SystemExit) as exc:
        main(["probe-teacher"])                       # --model or --run is required
    assert exc.value.code == 2
    assert main(["probe-teacher", "--model", "/nonexistent", "--per-family", "0"]) == 2
    assert "--per-family" in capsys.readouterr().err
    # the environment decides (EnvSpec.probe): one without a probe is named, on one line
    assert main(["probe-teacher", "--model", "/nonexistent", "--env", "webshop"]) == 2
    err = capsys.readouterr().err
    assert "--env: 'webshop' has no teacher probe" in err and "alfworld, corridor" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["probe-teacher", "--model", "/nonexistent", "--env", "nope"]) == 2
    assert "unknown environment 'nope'" in capsys.readouterr().err
