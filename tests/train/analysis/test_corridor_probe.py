"""The corridor's teacher probe (door_probe.probe_corridor, `sharpo probe-teacher --env
corridor`) and its hint-aware warm-start data (sft.hinted_demos with the demos' peer
hints): a teacher that reads the hint's door of the current turn is measured as such
(separation > 0.5 nats), one that ignores the hint is not (separation 0)."""
from __future__ import annotations

import json
import re

import pytest
import torch

import sharpo_train.analysis.teacher_probe as teacher_probe
from sharpo_train.cli import main
from sharpo_train.envs.corridor import make_suite
from sharpo_train.envs.corridor.demos import write_demos
from sharpo_train.models.policy import build_policy
from sharpo_train.models.tokenizer import build_tokenizer
from sharpo_train.envs.corridor.door_probe import probe_corridor
from sharpo_train.loops.sft import encode_example, hinted_demos, parse_sft_overrides
from sharpo_train.envs.turn_prompt import TASK_LINE_PREFIX
from sharpo_train.hint import HintSettings, place_hint

_TURN = re.compile(r"Current observation \(turn (\d+) of")
_DOOR = re.compile(r"<action>(\w+)</action>")


def _fake_logprobs(tok, reads_hint: bool):
    """tree_logprobs stand-in: the student gives every response token log-prob -0.7; the
    teacher (a sequence holding a hint) gives -0.1 when the reply's door is the hint's door
    of the current turn and -3.0 when it is not (a hint-reader), or -0.7 (ignores it)."""
    def fake(model, seqs, counts, **kw):
        out = []
        for seq, n in zip(seqs, counts):
            text = tok.decode(seq)
            lp = -0.7
            if "A successful attempt at this task:" in text and reads_hint:
                turn = _TURN.search(text).group(1)
                line = re.search(rf"^turn {turn}: (?:\w+ lamp -> )?(\w+)", text, re.M)
                lp = -0.1 if _DOOR.search(text).group(1) == line.group(1) else -3.0
            out.append(torch.full((n,), lp))
        return out
    return fake


@pytest.mark.parametrize("reads_hint,scope", [(True, "trajectory"), (True, "to_turn"),
                                              (False, "trajectory")])
def test_probe_separates_supported_from_contradicted_doors(monkeypatch, reads_hint, scope):
    tok = build_tokenizer()
    monkeypatch.setattr(teacher_probe, "tree_logprobs", _fake_logprobs(tok, reads_hint))
    tasks = make_suite({"name": "corridor", "num_eval": 4}).eval_tasks
    scorer = teacher_probe.ProbeScorer(torch.nn.Identity(), tok)
    s = probe_corridor(scorer, tasks, seed=0, scope=scope).summary(scorer)
    assert s["tasks"] == 4 and s["lamp_turns"] == 12
    if reads_hint:
        assert s["gap_supported"] == pytest.approx(0.6, abs=1e-5)
        assert s["gap_contradicted"] == pytest.approx(-2.3, abs=1e-5)
        assert s["separation"] == pytest.approx(2.9, abs=1e-5) and s["auc"] == 1.0
        # summed over the action span (8-9 tokens: "action>", the door's pieces, the tag)
        assert 8 * 2.9 - 1e-4 <= s["separation_sum"] <= 9 * 2.9 + 1e-4
        # the peer is the expert: the hint's door at a lamp is the right one
        assert s["teacher_p_right"] > s["student_p_right"]
    else:
        assert s["separation"] == pytest.approx(0.0, abs=1e-6) and s["auc"] == 0.5
        assert s["separation_sum"] == pytest.approx(0.0, abs=1e-5)
        assert s["plain_separation"] == pytest.approx(0.0, abs=1e-6)


def test_hinted_copies_use_the_peer_hint_at_lamp_turns_only(tmp_path):
    tasks = make_suite({"name": "corridor", "num_train": 4}).train_tasks
    write_demos(str(tmp_path / "d.jsonl"), tasks, agent="random", seed=0)
    recs = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    out = hinted_demos(tmp_path / "d.jsonl", 1.0, settings=HintSettings(placement="after_observation"))
    lamp = [r for r in recs if r["hint_informative"]]
    assert len(out) == len(lamp) == 12
    for msgs, r in zip(out, sorted(lamp, key=lambda r: (r["episode"], r["step"]))):
        assert msgs[0]["content"] == place_hint(r["messages"][0]["content"], r["hint"],
                                                "after_observation", TASK_LINE_PREFIX)
        assert msgs[1]["content"].endswith(f"<action>{r['action']}</action>")
        assert f"turn {r['step'] + 1}: " in r["hint"] and \
            f"-> {r['action']}" in r["hint"].splitlines()[r["step"] + 1]


def test_to_turn_hints_end_at_the_turn_being_answered(tmp_path):
    tasks = make_suite({"name": "corridor", "num_train": 3}).train_tasks
    write_demos(str(tmp_path / "d.jsonl"), tasks, agent="expert", seed=0)
    recs = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    out = hinted_demos(tmp_path / "d.jsonl", 1.0,
                       settings=HintSettings(placement="after_observation", scope="to_turn"))
    lamp = sorted((r for r in recs if r["hint_informative"]),
                  key=lambda r: (r["episode"], r["step"]))
    assert len(out) == len(lamp) == 9
    for msgs, r in zip(out, lamp):
        hint = r["hint_to_turn"]
        assert hint.splitlines()[1:] == r["hint"].splitlines()[1:r["step"] + 2]
        assert hint.splitlines()[-1].endswith(f"-> {r['action']}")
        assert msgs[0]["content"].endswith("\n\n" + hint)


def test_cli_probe_on_a_checkpoint(tmp_path, capsys):
    torch.manual_seed(0)
    model, tok = build_policy({"hidden_size": 32, "intermediate_size": 64, "num_layers": 1})
    model.save_pretrained(tmp_path / "m")
    assert main(["probe-teacher", "--model", str(tmp_path / "m"), "--env", "corridor",
                 "--tasks", "2", "--json", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "2 held-out corridor tasks, 6 lamp turns" in out and "separation" in out
    s = json.loads((tmp_path / "p.json").read_text())
    assert s["lamp_turns"] == 6 and s["gap_supported"] is not None
    assert main(["probe-teacher", "--model", str(tmp_path / "m"), "--env", "corridor",
                 "--tasks", "0"]) == 2
    assert "--tasks: expected >= 1" in capsys.readouterr().err


def test_hint_every_turn_adds_hinted_copies_of_the_free_turns(tmp_path):
    """sft.hint_every_turn (a deviation option): every turn gets its hinted copy, the free
    turns included, so the hinted reply there is in the teacher's distribution."""
    tasks = make_suite({"name": "corridor", "num_train": 3}).train_tasks
    write_demos(str(tmp_path / "d.jsonl"), tasks, agent="expert", seed=0)
    recs = sorted((json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()),
                  key=lambda r: (r["episode"], r["step"]))
    out = hinted_demos(tmp_path / "d.jsonl", 1.0, every_turn=True,
                       settings=HintSettings(placement="after_observation", scope="to_turn"))
    assert len(out) == len(recs) == 30 and sum(r["hint_informative"] for r in recs) == 9
    tok = build_tokenizer()
    for msgs, r in zip(out, recs):
        assert msgs[0]["content"].endswith("\n\n" + r["hint_to_turn"])
        assert msgs[1]["content"] == r["messages"][-1]["content"]
        # a free turn's copy trains the reasoning only, never the door
        ids, labels = encode_example(tok, msgs, [tok.eos_token_id], 4096)
        trained = tok.decode([t for t in labels if t != -100])
        if r["hint_informative"]:
            assert "train_chars" not in msgs[1] and trained.endswith("</action>" + tok.eos_token)
        else:
            head = msgs[1]["content"][:msgs[1]["train_chars"]]
            assert head.endswith("</think>") and trained.startswith(head) and \
                len(trained) <= len(head) + 1 and r["action"] not in trained, trained
    assert parse_sft_overrides(["hint_every_turn=true"]).hint_every_turn is True
