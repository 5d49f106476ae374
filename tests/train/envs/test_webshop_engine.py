"""The WebShop text environment: pages, transitions, invalid actions, step limit, agents,
the env suite, prompts, demonstrations and `sharpo webshop play`."""
import json

import pytest

pytest.importorskip("bm25s")
pytest.importorskip("rapidfuzz")
pytest.importorskip("spacy")

from sharpo_train.cli import main as cli_main  # noqa: E402
from sharpo_train.envs import env_prompts, make_suite  # noqa: E402
from sharpo_train.envs.base import Task  # noqa: E402
from sharpo_train.envs.webshop.agents import play, summary  # noqa: E402
from sharpo_train.envs.webshop.demos import write_demos  # noqa: E402
from sharpo_train.envs.webshop.engine import WebShopEnv, parse_webshop_action  # noqa: E402

pytestmark = pytest.mark.usefixtures("webshop_data")


@pytest.fixture
def env(world):
    return WebShopEnv(world, max_steps=15)


def _goal_with_options(world):
    i = next(i for i, g in enumerate(world.goals[:500]) if len(g["goal_options"]) >= 2)
    return Task(f"test/{i}", world.goals[i]["category"], f"synthetic:{i}"), world.goals[i]


def test_pages_and_transitions(world, env):
    task, goal = _goal_with_options(world)
    obs = env.reset(task)
    assert obs.task_text == goal["instruction_text"]
    assert obs.text == "'Search'" and obs.admissible_actions == ["search[<your query>]"]
    assert env.raw_observation == f"WebShop [SEP] Instruction: [SEP] {goal['instruction_text']} [SEP] Search"
    title = world.catalogue.by_asin[goal["asin"]]["Title"]
    r = env.step(f"search[{title}]")
    assert not r.done and r.info["valid"] and r.reward == 0
    parts = r.observation.text.split(" [SEP] ")
    assert parts[:3] == ["'Back to Search'", f"'Page 1 (Total results: {len(env.hits)})'", "'Next >'"]
    assert len(parts) == 3 + 3 * min(10, len(env.hits))
    assert r.observation.admissible_actions[:2] == ["click[back to search]", "click[next >]"]
    assert f"click[{goal['asin'].lower()}]" in r.observation.admissible_actions
    r = env.step("click[next >]")
    assert "'Page 2 (Total results: " in r.observation.text and "'< Prev'" in r.observation.text
    r = env.step("click[< prev]")
    assert "'Page 1 (Total results: " in r.observation.text
    r = env.step(f"click[{goal['asin'].lower()}]")
    product = world.catalogue.by_asin[goal["asin"]]
    adm = r.observation.admissible_actions
    assert adm[:6] == ["click[back to search]", "click[< prev]", "click[description]",
                       "click[features]", "click[reviews]", "click[buy now]"]
    for name, values in product["options"].items():
        assert f"'{name}'" in r.observation.text
        assert all(f"click[{v}]" in adm for v in values)
    assert f"'Price: {product['Price']}' [SEP] 'Rating: N.A.'" in r.observation.text
    r = env.step("click[description]")
    assert r.observation.admissible_actions == ["click[back to search]", "click[< prev]"]
    r = env.step("click[< prev]")
    assert env.page == "item"
    r = env.step("click[features]")
    assert all(f"'{b.strip()}'" in r.observation.text for b in product["BulletPoints"] if b.strip())
    env.step("click[< prev]")
    for name, value in goal["goal_options"].items():
        env.step(f"click[{value}]")
    assert env.options == goal["goal_options"]
    r = env.step("click[buy now]")
    assert r.done and r.info["won"] and r.reward == 1.0 and r.info["task_score"] == 1.0
    assert r.info["purchase"] == {"asin": goal["asin"], "options": goal["goal_options"]}
    assert r.observation.admissible_actions == []
    with pytest.raises(RuntimeError):
        env.step("click[buy now]")


def test_back_to_search_and_prev_from_item(world, env):
    task, goal = _goal_with_options(world)
    env.reset(task)
    env.step(f"search[{goal['query']}]")
    asin = env.hits[0]
    env.step(f"click[{asin.lower()}]")
    first_value = next(iter(world.catalogue.by_asin[asin]["options"].values()), [None])[0]
    if first_value:
        env.step(f"click[{first_value}]")
    r = env.step("click[< prev]")                  # item -> results: options cleared
    assert env.page == "results" and env.options == {} and env.asin is None
    r = env.step("click[back to search]")
    assert r.observation.text == "'Search'" and env.keywords is None


@pytest.mark.parametrize("bad", [None, "", "buy", "click[nothing here]", "click[search]",
                                 "search[]", "search", "CLICK[buy now]", "click [next >]",
                                 "search[x", 42])
def test_invalid_actions_leave_the_page(world, env, bad):
    task, goal = _goal_with_options(world)
    env.reset(task)
    before = env.step(f"search[{goal['query']}]").observation
    r = env.step(bad)
    assert r.info["valid"] is False and not r.done and r.reward == 0.0
    assert r.observation == before


def test_action_parsing_is_webshops():
    assert parse_webshop_action("search[Red Shoes]") == ("search", "red shoes")
    assert parse_webshop_action("click[< Prev]") == ("click", "< prev")
    assert parse_webshop_action("think") == ("think", None)
    assert parse_webshop_action(None) == (None, None)


def test_step_limit_ends_the_episode(world):
    env = WebShopEnv(world, max_steps=3)
    env.reset(Task("t", "x", "synthetic:0"))
    res = [env.step("click[nothing]") for _ in range(3)]
    assert [r.done for r in res] == [False, False, True]
    assert res[-1].reward == 0.0 and not res[-1].info["won"]
    with pytest.raises(ValueError, match="max_steps"):
        WebShopEnv(world, max_steps=0)
    with pytest.raises(ValueError, match="source"):
        env.reset(Task("t", "x", "synthetic:999999"))


def test_score_reward_mode(world):
    env = WebShopEnv(world, reward="score")
    g = world.goals[1]
    env.reset(Task("t", "x", "synthetic:1"))
    env.step(f"search[{g['query']}]")
    other = next(a for a in env.hits[:10] if a != g["asin"])
    env.step(f"click[{other.lower()}]")
    r = env.step("click[buy now]")
    assert r.done and r.reward == r.info["task_score"] < 1.0


def test_expert_wins_most_test_goals_and_random_rarely(world, env):
    tasks = world.tasks("test", 60)
    s = summary(play(env, tasks, "expert"))
    assert s["success"] >= 0.9 and s["mean_reward"] >= 0.97
    r = summary(play(env, tasks, "random", seed=1))
    assert r["success"] <= 0.1 and r["mean_reward"] < 0.3


def test_suite_and_prompts(world):
    suite = make_suite({"name": "webshop", "num_train": 8, "eval_split": "eval", "num_eval": 3})
    assert len(suite.train_tasks) == 8 and suite.train_tasks[0].id == "train/1500"
    assert [t.id for t in suite.eval_tasks] == ["eval/500", "eval/501", "eval/502"]
    pool = suite.make_pool(2)
    first = pool.reset(suite.train_tasks[:2])
    assert all(not r.done for r in first)
    out = pool.step({0: "search[shoes]", 1: None})
    assert out[0].info["valid"] and not out[1].info["valid"]
    prompts = env_prompts({"name": "webshop"})
    text = prompts.render_turn_prompt(first[0].observation.task_text, [("'Search'", "search[shoes]")],
                                      out[0].observation.text, out[0].observation.admissible_actions)
    assert "Your task is to: " in text and "'click[back to search]'," in text
    assert "[Observation 1: \"'Search'\", Action 1: 'search[shoes]']" in text
    assert prompts.parse_action("<think>x</think><action>click[buy now]</action>") == "click[buy now]"
    with pytest.raises(ValueError, match="unknown key"):
        make_suite({"name": "webshop", "games_dir": "x"})
    with pytest.raises(ValueError, match="env.reward"):
        make_suite({"name": "webshop", "reward": "dense"})


def test_demos_and_cli_play(world, tmp_path, capsys):
    out = tmp_path / "demos.jsonl"
    stats = write_demos(str(out), split="train", limit=3)
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert stats.won >= 2 and len(rows) == stats.turns
    first = rows[0]
    assert first["step"] == 0 and first["won"] and first["messages"][0]["role"] == "user"
    reply = first["messages"][1]["content"]
    assert reply.startswith("<think>") and "<action>search[" in reply
    assert rows[[r["step"] for r in rows].index(rows[0]["num_steps"] - 1)]["messages"][1]["content"] \
        .endswith("<action>click[buy now]</action>")
    js = tmp_path / "play.json"
    assert cli_main(["webshop", "play", "--agent", "expert", "--n", "5", "--json", str(js)]) == 0
    printed = capsys.readouterr().out
    assert "success rate" in printed and "mean reward" in printed
    data = json.loads(js.read_text())
    assert data["summary"]["episodes"] == 5 and len(data["episodes"]) == 5
    assert cli_main(["webshop", "play", "--agent", "random", "--data", str(tmp_path)]) == 2
    assert "items_shuffle_1000.json" in capsys.readouterr().err
