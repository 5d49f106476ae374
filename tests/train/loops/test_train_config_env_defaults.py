"""An environment's own trainer defaults (EnvSpec.train_defaults, loops/train_config.py env_defaults): a
corridor run without the recipe plays whole episodes (rollout.max_turns = env.num_turns)
with the corridor's reply budget, unless the user or a settings file written for the
corridor sets them; and a step whose every episode was cut at rollout.max_turns says so in
one line."""
from sharpo_train.cli import main as cli_main
from sharpo_train.loops.train_config import load_config
from sharpo_train.envs.corridor import REPLY_TOKENS
from sharpo_train.io import read_jsonl
from sharpo_train.loops.trainer import train

from train.loops.test_trainer_support import small_config


def turns_and_reply(cfg):
    return cfg.rollout.max_turns, cfg.rollout.max_new_tokens


def test_corridor_gets_its_own_turns_and_reply_budget(tmp_path):
    assert turns_and_reply(load_config(None, ["env.name=corridor"])) == (10, REPLY_TOKENS)
    assert turns_and_reply(load_config(None, ["env.name=corridor", "env.num_turns=30"])) == (30, REPLY_TOKENS)
    assert turns_and_reply(load_config(None, ["env.name=corridor", "rollout.max_turns=3"])) == (3, REPLY_TOKENS)
    assert turns_and_reply(load_config(None, [])) == (4, 48)               # the embedded default: as written
    own = tmp_path / "corridor.yaml"                                      # a file written for the corridor
    own.write_text("env: {name: corridor}\nrollout: {max_new_tokens: 40}\n")
    assert turns_and_reply(load_config(own, [])) == (10, 40)
    other = tmp_path / "synthetic.yaml"                                   # ... and one for another env
    other.write_text("env: {name: synthetic}\nrollout: {max_turns: 2, max_new_tokens: 40}\n")
    assert turns_and_reply(load_config(other, ["env.name=corridor"])) == (10, REPLY_TOKENS)
    assert turns_and_reply(load_config(other, [])) == (2, 40)


def test_print_config_shows_the_corridor_defaults(capsys):
    assert cli_main(["train", "--print-config", "env.name=corridor"]) == 0
    out = capsys.readouterr().out
    assert "  max_turns: 10\n" in out and f"  max_new_tokens: {REPLY_TOKENS}\n" in out


def test_a_step_of_truncated_episodes_says_so_once(tmp_path, capsys):
    env = {"name": "corridor", "num_train": 4, "num_eval": 2}
    run = train(small_config(tmp_path / "run", total_steps=2, env=env, rollout={
        "tasks_per_step": 1, "group_size": 2, "max_turns": 2, "max_new_tokens": 6}))
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if "were cut at rollout.max_turns" in l]
    assert lines == ["sharpo train: step 1: all 2 episodes were cut at rollout.max_turns=2 before env "
                     "'corridor' ended them (reward 0, nothing to learn); raise rollout.max_turns "
                     "(metric episodes_truncated)"], err
    recs = read_jsonl(run / "metrics.jsonl")
    assert [r["episodes_truncated"] for r in recs if r.get("kind") == "train"] == [2, 2]


def test_whole_episodes_are_not_truncated(tmp_path, capsys):
    env = {"name": "corridor", "num_train": 4, "num_eval": 2, "num_turns": 2, "num_decisive": 1}
    run = train(small_config(tmp_path / "run", total_steps=1, env=env, rollout={
        "tasks_per_step": 1, "group_size": 2, "max_turns": 2, "max_new_tokens": 6}))
    assert "were cut" not in capsys.readouterr().err
    assert [r["episodes_truncated"] for r in read_jsonl(run / "metrics.jsonl") if r.get("kind") == "train"] == [0]
