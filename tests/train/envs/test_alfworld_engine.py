"""The real ALFWorld engine through the project's environment: generated games, the real
games in ../shared/data, experts, the worker pool, demonstrations and the CLI.

Few, small engine runs (a step costs 50-135 ms): one module-wide set of six tiny
generated games, one real game per family."""
import json
import os
import signal
from pathlib import Path

import pytest

pytest.importorskip("textworld", reason="needs the alfworld extra: pip install '.[alfworld]'")
pytest.importorskip("alfworld.agents.environment.alfred_tw_env",
                    reason="needs the alfworld extra: pip install '.[alfworld]'")

from sharpo_train.cli import main as cli_main  # noqa: E402
from sharpo_train.envs import make_suite  # noqa: E402
from sharpo_train.envs.alfworld import make_pool  # noqa: E402
from sharpo_train.envs.alfworld.demos import write_demos  # noqa: E402
from sharpo_train.envs.alfworld.engine import INVALID_FEEDBACK, AlfWorldEnv  # noqa: E402
from sharpo_train.envs.alfworld.play import (expert_agent, play, random_agent,  # noqa: E402
                                                 success_table)
from sharpo_train.envs.alfworld.games import FAMILIES, discover_games, task_of  # noqa: E402
from sharpo_train.envs.alfworld.generator import build_game, generate_games  # noqa: E402
from sharpo_train.envs.alfworld.prompts import parse_action  # noqa: E402
from sharpo_train.envs.base import Task  # noqa: E402

from train.envs.test_alfworld_games import shared_alfworld  # noqa: E402


@pytest.fixture(scope="module")
def gen_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("alfworld_games")
    os.environ.setdefault("ALFWORLD_DATA", str(root))
    generate_games(root, 6, seed=7, split="train", size="tiny")
    return root


@pytest.fixture(scope="module")
def gen_tasks(gen_root):
    return [task_of(g) for g in discover_games(gen_root, "train")]


def test_generated_games_cover_every_family_and_carry_a_checked_plan(gen_root, gen_tasks):
    assert sorted(t.family for t in gen_tasks) == sorted(FAMILIES)
    for t in gen_tasks:
        game = json.loads(Path(t.source, "game.tw-pddl").read_text())
        traj = json.loads(Path(t.source, "traj_data.json").read_text())
        assert game["solvable"] is True and game["walkthrough"]
        assert traj["generator"]["seed"] == 7
        assert "move " not in " ".join(game["walkthrough"])      # release wording


def test_generated_games_load_in_alfredtwenv(gen_root, gen_tasks):
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv
    cfg = {"dataset": {"data_path": str(gen_root / "json_2.1.1" / "train"), "num_train_games": -1},
           "env": {"task_types": [1, 2, 3, 4, 5, 6], "goal_desc_human_anns_prob": 0.0,
                   "domain_randomization": False, "expert_type": "planner"},
           "general": {"training_method": "dagger"},
           "dagger": {"training": {"max_nb_steps_per_episode": 50}}}
    tw_env = AlfredTWEnv(cfg, "train")
    assert tw_env.num_games == len(gen_tasks)
    gym_env = tw_env.init_env(batch_size=1)
    try:
        seen = set()
        for _ in gen_tasks:
            obs, infos = gym_env.reset()
            assert "Your task is to:" in obs[0]
            seen.add(os.path.dirname(infos["extra.gamefile"][0]))
    finally:
        gym_env.close()
    assert seen == {t.source for t in gen_tasks}


def test_same_seed_same_game_other_seed_other_game(gen_root, gen_tasks, tmp_path):
    a = build_game(3, 0, "Heat", "small")
    b = build_game(3, 0, "Heat", "small")
    c = build_game(4, 0, "Heat", "small")
    assert a is not None and a == b and a.problem != c.problem
    # and the files written for a seed are byte-identical
    pick = next(t for t in gen_tasks if t.family == "Pick")
    index = json.loads(Path(pick.source, "traj_data.json").read_text())["generator"]["index"]
    again = generate_games(tmp_path, 1, seed=7, size="tiny", start_index=index)[0]
    for name in ("game.tw-pddl", "traj_data.json"):
        assert Path(again.path, name).read_bytes() == Path(pick.source, name).read_bytes()


def test_env_replays_the_plan_and_answers_bad_actions(gen_tasks):
    task = next(t for t in gen_tasks if t.family == "Clean")
    plan = json.loads(Path(task.source, "game.tw-pddl").read_text())["walkthrough"]
    env = AlfWorldEnv(max_steps=50)
    obs = env.reset(task)
    assert obs.task_text.startswith("Your task is to: ") and "clean" in obs.task_text
    assert "Welcome" not in obs.text and plan[0] in obs.admissible_actions
    for bad in (None, "", "fly to the moon", "<action>look"):
        r = env.step(bad)
        assert r.observation.text == INVALID_FEEDBACK and not r.done and r.reward == 0.0
        assert r.info["valid"] is False
    with pytest.raises(TypeError, match="action"):
        env.step(123)
    for cmd in plan[:-1]:
        r = env.step("  " + cmd.upper() + " ")      # whitespace/case normalised
        assert not r.done and r.info["valid"]
    r = env.step(plan[-1])
    assert r.done and r.reward == 1.0 and r.info["won"] and r.info["steps"] == len(plan) + 4
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")
    env.close()


def test_step_limit_ends_the_episode(gen_tasks):
    env = AlfWorldEnv(max_steps=3)
    env.reset(gen_tasks[0])
    results = [env.step("look") for _ in range(3)]
    assert [r.done for r in results] == [False, False, True]
    assert results[-1].info["truncated"] and not results[-1].info["won"]
    with pytest.raises(ValueError, match="max_steps"):
        AlfWorldEnv(max_steps=0)


def test_expert_wins_generated_games_random_agent_mostly_fails(gen_tasks):
    pool = make_pool(0, expert="planner")
    try:
        rec = play(pool, gen_tasks, expert_agent, batch_size=6)
    finally:
        pool.close()
    table = success_table(rec)
    assert table["success"] == 1.0 and table["errors"] == 0
    assert set(table["per_family"]) == set(FAMILIES)
    pool = make_pool(0, max_steps=10)
    try:
        rec = play(pool, gen_tasks, random_agent(seed=1), batch_size=6)
    finally:
        pool.close()
    assert sum(r.won for r in rec) <= 2 and all(r.steps == 10 for r in rec if not r.won)


def test_handcoded_expert_fixed_on_package_grammar_pick_two(tmp_path):
    # alfworld 0.4.2's own "move" grammar is the one its handcoded expert loses track on
    game = generate_games(tmp_path, 1, seed=11, families=["Pick2"], size="tiny",
                          grammar="package")[0]
    plan = json.loads(Path(game.path, "game.tw-pddl").read_text())["walkthrough"]
    assert any(c.startswith("move ") for c in plan)
    env = AlfWorldEnv(max_steps=50, expert="handcoded", seed=0)
    env.reset(Task("p2", "Pick2", game.path))
    r = None
    for _ in range(50):
        r = env.step(env.expert_action())
        if r.done:
            break
    assert r is not None and r.info["won"]


def test_expert_solves_real_games_of_every_family_through_the_pool():
    root = shared_alfworld()
    if root is None:
        pytest.skip("real ALFWorld games not found at ../shared/data/alfworld")
    suite = make_suite({"name": "alfworld", "games_dir": str(root), "train_split": "valid_train",
                        "eval_split": "valid_seen", "expert_type": "planner"})
    assert set(suite.families) == set(FAMILIES)
    sample = {}   # the smallest game of each family (fewest PDDL facts: fastest to play)
    for t in sorted(suite.eval_tasks, key=lambda t: os.path.getsize(Path(t.source, "game.tw-pddl"))):
        sample.setdefault(t.family, t)
    pool = suite.make_pool(2)
    try:
        rec = play(pool, list(sample.values()), expert_agent, batch_size=6)
    finally:
        pool.close()
    assert {r.family: r.won for r in rec} == {f: True for f in FAMILIES}


def test_pool_survives_a_dead_worker_and_a_broken_game(gen_tasks, tmp_path):
    broken = Task("broken", "Pick", str(tmp_path / "no_such_game"))
    pool = make_pool(2)
    try:
        first = pool.reset([gen_tasks[0], broken, gen_tasks[1], gen_tasks[2]])
        assert first[1].done and "no_such_game" in first[1].info["error"]
        assert not first[0].done and not first[2].done
        pid0 = pool.worker_pids()[0]          # slots 0, 1 live on worker 0; 2, 3 on worker 1
        os.kill(pid0, signal.SIGKILL)
        out = pool.step({0: "look", 2: "look", 3: "look"})
        assert out[0].done and "worker 0" in out[0].info["error"]
        assert not out[2].done and out[2].observation.text
        assert not out[3].done
        again = pool.reset(gen_tasks[:2])          # the dead worker is replaced
        assert not any(r.done for r in again)
        with pytest.raises(ValueError, match="slot 7"):
            pool.step({7: "look"})
    finally:
        pool.close()


def test_make_suite_on_generated_games_and_bad_config(gen_root):
    suite = make_suite({"name": "alfworld", "games_dir": str(gen_root), "eval_split": "",
                        "task_families": ["Heat", "Cool"], "max_steps": 20})
    assert sorted(t.family for t in suite.train_tasks) == ["Cool", "Heat"]
    assert suite.eval_tasks == [] and suite.families == ["Heat", "Cool"]
    with pytest.raises(ValueError, match="unknown key"):
        make_suite({"name": "alfworld", "games_dir": str(gen_root), "gamesdir": "x"})
    with pytest.raises(ValueError, match="max_steps"):
        make_suite({"name": "alfworld", "games_dir": str(gen_root), "eval_split": "", "max_steps": 0})
    with pytest.raises(FileNotFoundError, match="valid_seen"):
        make_suite({"name": "alfworld", "games_dir": str(gen_root)})
    with pytest.raises(ValueError, match="n_games"):
        make_suite({"name": "alfworld", "games_dir": str(gen_root), "generate": {"n_games": 3}})


def test_make_suite_generates_the_default_games_when_missing(tmp_path):
    cfg = {"name": "alfworld", "games_dir": str(tmp_path / "games"),
           "generate": {"n_train": 2, "n_eval": 1, "seed": 5, "size": "tiny"}}
    suite = make_suite(cfg)
    assert sorted(t.family for t in suite.train_tasks) == ["Clean", "Pick"]
    assert [t.family for t in suite.eval_tasks] == ["Pick"]
    assert suite.train_tasks[0].source.startswith(str(tmp_path / "games" / "json_2.1.1" / "train"))
    assert make_suite(cfg).train_tasks == suite.train_tasks              # found, not regenerated


def test_demos_are_per_turn_records_in_the_prompt_format(gen_root, tmp_path):
    out = tmp_path / "demos.jsonl"
    stats = write_demos(gen_root, "train", str(out), families=["Pick", "Look"])
    assert stats.games == 2 and stats.won == 2
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == stats.turns
    by_task = {}
    for r in records:
        by_task.setdefault(r["task_id"], []).append(r)
    for task_id, turns in by_task.items():
        source = gen_root / "json_2.1.1" / task_id
        plan = json.loads((source / "game.tw-pddl").read_text())["walkthrough"]
        assert [parse_action(t["messages"][1]["content"]) for t in turns] == plan
        for t in turns:
            user, assistant = t["messages"]
            assert user["role"] == "user" and assistant["role"] == "assistant"
            assert "Your task is to:" in user["content"] and "<action>" in user["content"]
            assert assistant["content"].startswith("<think>")
            assert f"'{parse_action(assistant['content'])}'" in user["content"]  # admissible


def test_cli_play_generate_and_errors(gen_root, tmp_path, capsys):
    out = tmp_path / "play.json"
    assert cli_main(["alfworld", "play", "--games", str(gen_root), "--agent", "expert",
                     "--workers", "0", "--n", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["summary"]["success"] == 1.0 and len(report["episodes"]) == 2
    assert "All" in capsys.readouterr().out
    assert cli_main(["alfworld", "play", "--games", str(tmp_path / "nope"), "--agent", "random"]) == 2
    assert "nope" in capsys.readouterr().err
    assert cli_main(["alfworld", "generate", "--out", str(tmp_path / "g"), "--n", "1",
                     "--families", "Sleep"]) == 2
    assert "Sleep" in capsys.readouterr().err


def _random_trajectory(task, seed, steps=15):
    env = AlfWorldEnv(max_steps=steps)
    o = env.reset(task)
    rng = __import__("random").Random(seed)
    out = [(o.text, o.task_text, o.admissible_actions)]
    for _ in range(steps):
        a = rng.choice(o.admissible_actions) if rng.random() < 0.9 else "nonsense"
        r = env.step(a)
        o = r.observation
        out.append((o.text, o.admissible_actions, r.reward, r.done, r.info["won"]))
        if r.done:
            break
    env.close()
    return out


def test_engine_speedups_do_not_change_what_the_engine_says(gen_tasks):
    from sharpo_train.envs.alfworld.engine import set_engine_caches
    tasks = list(gen_tasks[:2])
    root = shared_alfworld()
    if root is not None:
        real = discover_games(root, "valid_seen", families=["Heat"])
        tasks.append(task_of(min(real, key=lambda g: os.path.getsize(Path(g.path, "game.tw-pddl")))))
    try:
        for k, task in enumerate(tasks):
            set_engine_caches(False)
            plain = _random_trajectory(task, k)
            set_engine_caches(True)
            fast = _random_trajectory(task, k)
            assert fast == plain, task.id
            assert len(plain) > 5
    finally:
        set_engine_caches(True)


def test_pool_ends_the_episodes_of_a_hung_worker(gen_tasks):
    from sharpo_train.envs.alfworld.pool import ProcessEnvPool
    pool = ProcessEnvPool(2, {"max_steps": 10}, timeout_s=2.0, per_slot_timeout_s=0.0)
    try:
        pool.reset(gen_tasks[:2])                   # slot 0 -> worker 0, slot 1 -> worker 1
        pid0 = pool.worker_pids()[0]
        os.kill(pid0, signal.SIGSTOP)               # alive, but answers nothing and uses no CPU
        out = pool.step({0: "look", 1: "look"})
        assert out[0].done and "no CPU progress" in out[0].info["error"]
        assert not out[1].done
        assert pool.worker_pids()[0] is None        # killed; replaced at the next reset
    finally:
        pool.close()
