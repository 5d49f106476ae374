"""The corridor environment (sharpo_train/envs/corridor/, docs/corridor.md): the expert
wins, a random agent wins about num_actions ** -num_decisive, bad actions get a clear
message and count as a wrong door at a lamp, a wrong door does not end the episode, the
draw is deterministic per seed, settings are checked, labels are exact, demos carry a
peer hint that agrees at every lamp."""
from __future__ import annotations

import json
import math
import random

import pytest

from sharpo_train.errors import ConfigError

from sharpo_train.loops.train_config import load_config
from sharpo_train.envs import env_prompts, make_suite
from sharpo_train.envs.corridor import label_episodes, settings_of
from sharpo_train.envs.corridor.agents import lamp_doors, play, play_episode, summary
from sharpo_train.envs.corridor.demos import write_demos
from sharpo_train.envs.corridor.engine import CorridorEnv, decisive_labels, task_spec


def _suite(**kw):
    return make_suite({"name": "corridor", **kw})


def test_defaults_and_expert_wins_every_task():
    s = _suite()
    assert (len(s.train_tasks), len(s.eval_tasks)) == (500, 200)
    spec = task_spec(s.train_tasks[0])
    assert spec["turns"] == 10 and len(spec["decisive"]) == 3 and spec["actions"] == ["left", "right"]
    assert summary(play(s.train_tasks + s.eval_tasks, "expert"))["success"] == 1.0


@pytest.mark.parametrize("k,actions", [(3, 2), (2, 3), (1, 2)])
def test_random_agent_wins_about_one_over_actions_to_the_k(k, actions):
    s = _suite(num_decisive=k, num_actions=actions, num_train=2000, num_eval=0)
    rate = summary(play(s.train_tasks, "random", seed=1))["success"]
    p = actions ** -k
    assert abs(rate - p) < 4 * math.sqrt(p * (1 - p) / 2000), (rate, p)


def test_a_wrong_door_does_not_end_the_episode_and_only_all_right_wins():
    task = _suite().train_tasks[3]
    spec = task_spec(task)
    lamps = {int(t): d[1] for t, d in spec["decisive"].items()}
    for wrong_at in [None, *lamps]:
        env = CorridorEnv()
        obs = env.reset(task)
        assert "Turn 1 of 10." in obs.text
        for turn in range(1, 11):
            right = lamps.get(turn, "left")
            a = ("right" if right == "left" else "left") if turn == wrong_at else right
            res = env.step(a)
            assert res.done == (turn == 10), turn          # never ends early
            if turn < 10:
                assert f"Turn {turn + 1} of 10." in res.observation.text
        assert res.info["won"] == (wrong_at is None) and res.reward == float(wrong_at is None)


def test_bad_actions_get_a_clear_message_and_count_as_wrong_at_a_lamp():
    task = _suite().train_tasks[0]
    lamps = {int(t): d[1] for t, d in task_spec(task)["decisive"].items()}
    env = CorridorEnv()
    env.reset(task)
    res = env.step("fly away")
    assert "Invalid action 'fly away': the doors are left, right." in res.observation.text
    assert not res.done
    res = env.step(None)
    assert "Invalid action no action" in res.observation.text
    for turn in range(3, 11):
        res = env.step(lamps.get(turn, "left"))
    # turns 1-2 were invalid: the episode is lost exactly when one of them had a lamp
    assert res.info["won"] == (not ({1, 2} & set(lamps)))
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("left")



@pytest.mark.parametrize("penalty", [0.0, 0.3, 1.0])
def test_format_penalty_costs_each_invalid_reply_a_share_of_the_reward(penalty):
    """env.format_penalty: reward = success - penalty * invalid replies / turns; success,
    the tasks and the labels are unchanged."""
    suite = make_suite({"name": "corridor", "format_penalty": penalty})
    assert [t.source for t in suite.train_tasks] == [t.source for t in _suite().train_tasks]
    task = suite.train_tasks[0]
    lamps = {int(t): d[1] for t, d in task_spec(task)["decisive"].items()}
    free = [t for t in range(1, 11) if t not in lamps]
    for bad_turns, won in (([], True), (free[:2], True), ([*free[:1], min(lamps)], False)):
        pool = suite.make_pool(1)
        pool.reset([task])
        for turn in range(1, 11):
            res = pool.step({0: None if turn in bad_turns else lamps.get(turn, "left")})[0]
        assert res.done and res.info["won"] == won and res.info["invalid"] == len(bad_turns)
        assert res.reward == pytest.approx(float(won) - penalty * len(bad_turns) / 10, abs=1e-12)
    for bad in (-0.1, 1.5, "high", True):
        with pytest.raises(ValueError, match="env.format_penalty"):
            make_suite({"name": "corridor", "format_penalty": bad})


def test_deterministic_per_seed_and_heldout_never_repeats_a_train_layout():
    a, b, c = _suite(seed=3), _suite(seed=3), _suite(seed=4)
    assert [t.source for t in a.train_tasks] == [t.source for t in b.train_tasks]
    assert [t.source for t in a.eval_tasks] == [t.source for t in b.eval_tasks]
    assert [t.source for t in a.train_tasks] != [t.source for t in c.train_tasks]
    assert not {t.source for t in a.eval_tasks} & {t.source for t in a.train_tasks}
    # the lamp code is shared by train and eval tasks of one seed
    code = {}
    for t in a.train_tasks + a.eval_tasks:
        for colour, door in task_spec(t)["decisive"].values():
            assert code.setdefault(colour, door) == door
    assert len(code) == 4 and sorted(code.values()).count("left") == 2


@pytest.mark.parametrize("key,value,match", [
    ("num_turns", 0, "env.num_turns"), ("num_decisive", 11, "env.num_decisive"),
    ("num_actions", 1, "env.num_actions"), ("num_actions", 7, "env.num_actions"),
    ("clues_per_action", 7, "env.clues_per_action"), ("num_train", 0, "env.num_train"),
    ("seed", -1, "env.seed"), ("num_turns", "ten", "env.num_turns"),
    ("num_turns", True, "env.num_turns"), ("colour", 1, "unknown key")])
def test_settings_are_checked(key, value, match):
    with pytest.raises(ValueError, match=match):
        settings_of({"name": "corridor", key: value})


def test_trainer_config_refuses_bad_corridor_keys():
    with pytest.raises(ConfigError, match="env.num_lamps"):
        load_config(None, ["env.name=corridor", "env.num_lamps=3"])
    with pytest.raises(ConfigError, match="env.num_actions"):
        load_config(None, ["env.name=corridor", "env.num_actions=9"])
    cfg = load_config(None, ["env.name=corridor", "env.num_turns=6", "log.credit_quality=true"])
    assert cfg.env["num_turns"] == 6


def test_prompts_parse_and_hint_line_up_with_turns():
    p = env_prompts({"name": "corridor"})
    task = _suite().train_tasks[0]
    ep = play_episode(task, "expert", random.Random(0))
    text = p.render_turn_prompt("Your task is to: x.", [], ep.turns[1].observation,
                                ep.turns[1].admissible, 0)
    assert "Current observation (turn 2 of 10)" in text and "'left', 'right'" in text
    assert p.parse_action("<think>a red lamp</think><action> left </action>") == "left"
    hint = p.render_hint([(t.action, t.observation_after) for t in ep.turns])
    lines = hint.splitlines()[1:]
    assert len(lines) == 10
    for turn, (colour, door) in task_spec(task)["decisive"].items():
        assert lines[int(turn) - 1] == f"turn {turn}: {colour} lamp -> {door}"


def test_labels_are_exact():
    task = _suite().train_tasks[5]
    lamps = {int(t): d[1] for t, d in task_spec(task)["decisive"].items()}
    first = min(lamps)
    actions = [lamps.get(t, "left") for t in range(1, 11)]
    actions[first - 1] = "up"                          # invalid at a lamp: wrong
    labels = decisive_labels(task, actions)
    assert [i + 1 for i, x in enumerate(labels) if x is not None] == sorted(lamps)
    assert labels[first - 1] is False and sum(x is True for x in labels) == 2

    class Ep:                                           # a rollout Episode's used fields
        def __init__(self, error):
            self.task, self.error = task, error
            self.turns = [type("T", (), {"action": a})() for a in actions]
    assert label_episodes([Ep(None), Ep("boom")]) == [labels, [None] * 10]


@pytest.mark.parametrize("agent", ["random", "expert"])
def test_demos_carry_a_peer_hint_that_agrees_at_every_lamp(tmp_path, agent):
    tasks = _suite(num_train=6).train_tasks
    stats = write_demos(str(tmp_path / "d.jsonl"), tasks, agent=agent, passes=2, seed=1)
    recs = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert stats.episodes == 12 and stats.turns == len(recs) == 120
    if agent == "expert":
        assert stats.won == 12
    by_ep = {}
    for r in recs:
        by_ep.setdefault(r["episode"], []).append(r)
    assert len(by_ep) == 12
    for ep in by_ep.values():
        hint = ep[0]["hint"].splitlines()[1:]
        spec = task_spec(next(t for t in tasks if t.id == ep[0]["task_id"]))
        for t in map(int, spec["decisive"]):
            assert hint[t - 1].endswith(f"-> {ep[t - 1]['action']}")
        assert ep[0]["messages"][1]["content"].startswith("<think>")
    with pytest.raises(ValueError, match="agent"):
        write_demos(str(tmp_path / "x.jsonl"), tasks, agent="oracle")
    with pytest.raises(ValueError, match="passes"):
        write_demos(str(tmp_path / "x.jsonl"), tasks, passes=0)
