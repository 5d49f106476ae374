"""WebShop through the recipes: `sharpo demo --quick env=webshop` end to end (goals ->
expert demos -> SFT -> RL -> held-out eval on the test split -> report), `sharpo sft` on
WebShop demonstrations, `sharpo eval` on WebShop (success and mean task score), and
`sharpo compare` with env=webshop (settings, and its report with fake runs)."""
import json
import re
from pathlib import Path

import pytest

import sharpo_train.recipes.phases as phases
import sharpo_train.loops.trainer as trainer
from sharpo_train.cli import main
from sharpo_train.errors import ConfigError
from sharpo_train.loops.train_config import load_config
from sharpo_train.envs.base import Task
from sharpo_train.envs.base import balanced_tasks
from sharpo_train.loops.evaluate import score_by_family
from sharpo_train.recipes.overrides import PipelinePlan
from sharpo_train.step.rollout import Episode
import sharpo_train.envs.alfworld.recipe as alfworld_recipe
import sharpo_train.envs.webshop.recipe as webshop_recipe
from sharpo_train.envs import recipe_envs
from sharpo_train.envs.spec import RecipeSpec
from sharpo_train.recipes.recipe_config import CompareConfig

CATEGORIES = {"beauty", "electronics", "fashion", "garden", "grocery"}


def _have_data() -> bool:
    try:
        import bm25s  # noqa: F401
        import spacy  # noqa: F401
        from sharpo_train.envs.webshop.data import resolve_data_dir
        resolve_data_dir()
        return True
    except Exception:
        return False


needs_data = pytest.mark.skipif(not _have_data(), reason="WebShop data (../shared/data/webshop "
                                "or $WEBSHOP_DATA), bm25s or spacy not available")

# `--quick`, smaller still: this file must stay well under a minute of CPU
TINY = ["env=webshop", "demo.train_games=3", "demo.eval_games=3", "sft.max_steps=4",
        "rollout.max_new_tokens=24"]


# ------------------------------------------------------------------ settings (no data needed)

def test_hook_table_covers_every_recipe_environment():
    assert recipe_envs() == ["alfworld", "corridor", "webshop"]
    assert all(isinstance(phases.env_recipe(name), RecipeSpec) for name in recipe_envs())


def test_env_selection_and_errors(tmp_path, capsys):
    for words in (["env=webshop"], ["demo.env=webshop"], ["env.name=webshop"]):
        plan = PipelinePlan.from_args(tmp_path, words + ["demo.eval_games=7"], quick=True,
                                      settings_cls=CompareConfig)
        assert plan.settings.env == "webshop", words
        # WebShop's defaults: the final eval plays demo.eval_games test goals; long pages
        assert "eval.num_tasks=7" in plan.train_overrides and plan.sft.max_length == 768
        cfg = phases.train_config(tmp_path / "goals.json", tmp_path / "sft", plan.settings,
                                  plan.train_overrides, tmp_path / "rl")
        assert cfg.env["name"] == "webshop" and cfg.env["eval_split"] == "test"
        assert cfg.env["train_split"] == "train" and cfg.env["num_train"] == 6
        assert cfg.env["max_steps"] == plan.settings.game_max_steps and cfg.eval.num_tasks == 7
        assert "games_dir" not in cfg.env
    plan = PipelinePlan.from_args(tmp_path, ["env=webshop", "sft.max_length=512"])
    assert (plan.sft.max_steps, plan.sft.batch_size, plan.sft.max_length) == (300, 8, 512)
    plan = PipelinePlan.from_args(tmp_path, [])
    assert plan.settings.env == "alfworld" and plan.sft.max_length == 1536
    assert (plan.sft.max_steps, plan.sft.batch_size) == (800, 16)
    cfg = phases.train_config(tmp_path / "g", None, plan.settings, plan.train_overrides,
                              tmp_path / "rl")
    assert cfg.env["name"] == "alfworld" and cfg.env["games_dir"] == str(tmp_path / "g")
    with pytest.raises(ConfigError, match="demo.env"):
        PipelinePlan.from_args(tmp_path, ["env=webshopp"])
    with pytest.raises(ConfigError, match="env.name"):
        PipelinePlan.from_args(tmp_path, ["demo.env=alfworld", "env.name=webshop"])
    assert main(["compare", "--out", str(tmp_path / "c"), "env=nope"]) == 2
    err = capsys.readouterr().err
    assert "demo.env" in err and "webshop" in err and "Traceback" not in err
    assert not (tmp_path / "c").exists()


def test_score_by_family_is_the_mean_task_score():
    import random
    rng = random.Random(3)
    eps, ref = [], {}
    for i in range(37):
        fam = rng.choice(sorted(CATEGORIES))
        ep = Episode(Task(f"t{i}", fam), 0, 0)
        ep.score = rng.choice([None, 0.0, 1.0, rng.random()])
        ep.success = ep.score == 1.0
        eps.append(ep)
        ref.setdefault(fam, []).append(float(ep.score if ep.score is not None else ep.success))
    overall, per = score_by_family(eps)
    assert overall == pytest.approx(sum(sum(v) for v in ref.values()) / 37)
    assert per == pytest.approx({f: sum(v) / len(v) for f, v in ref.items()})
    for ep in eps:
        ep.score = None
    assert score_by_family(eps) is None           # ALFWorld: no score key in eval.json


# ------------------------------------------------------------------ compare with fake runs

def test_compare_on_webshop_reports_categories_and_scores(tmp_path, monkeypatch):
    held = [Task(f"test/{i}", f) for i, f in enumerate(["beauty", "grocery", "beauty"])]
    final = {("grpo", 0): (1 / 3, 0.5), ("sharpo", 0): (2 / 3, 0.8)}
    calls = []

    def fake_train(cfg):
        assert cfg.env["name"] == "webshop" and cfg.init_from == str(tmp_path / "c" / "sft")
        run = Path(cfg.run_dir)
        run.mkdir(parents=True, exist_ok=True)
        succ, score = final[(cfg.method, cfg.seed)]
        calls.append(cfg.method)
        (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "kind": "train",
                                                       "success": succ}) + "\n")
        (run / "eval.json").write_text(json.dumps({
            "success": succ, "per_family": {"beauty": succ, "grocery": 0.0}, "episodes": 3,
            "score": score, "per_family_score": {"beauty": score, "grocery": 0.25}}))

    def alfworld_only(*a, **k):
        raise AssertionError("an ALFWorld phase ran for WebShop")

    for name in ("games", "demos", "heldout_tasks", "real_eval_tasks"):
        monkeypatch.setattr(alfworld_recipe, name, alfworld_only)
    monkeypatch.setattr(webshop_recipe, "goals", lambda path, s, cfg: Path(path).write_text("{}") and {})
    monkeypatch.setattr(webshop_recipe, "demos", lambda *a: {"turns": 4})
    monkeypatch.setattr(webshop_recipe, "heldout", lambda cfg: held)
    monkeypatch.setattr(phases, "sft", lambda d, out, cfg: {"steps": 2, "examples": 4})
    monkeypatch.setattr(phases, "evaluate", lambda w, cfg, tasks, games_dir, *a: {
        "success": 0.0, "per_family": {"beauty": 0.0, "grocery": 0.0}, "episodes": len(tasks),
        "score": 0.125, "per_family_score": {"beauty": 0.25, "grocery": 0.0}}
        if games_dir is None else alfworld_only())
    monkeypatch.setattr(trainer, "train", fake_train)
    out = tmp_path / "c"
    assert main(["compare", "--out", str(out), "--seeds", "0", "--methods", "grpo,sharpo:0.2",
                 "env=webshop"]) == 0
    assert sorted(calls) == ["grpo", "sharpo"]
    md = (out / "compare.md").read_text()
    assert md.startswith("# GRPO vs SHARPO on WebShop")
    assert "WebShop test goals (3 goals" in md and "per product category" in md
    assert "| Method | beauty | grocery | All |" in md
    assert "| GRPO | 1 | 33.33 |" in md and "| SHARPO (λ=0.2) | 1 | 66.67 |" in md
    # the task-score tables: overall and per category
    assert "| Method | runs | WebShop score |" in md
    assert "| GRPO | 1 | 50.00 |" in md and "| SHARPO (λ=0.2) | 80.00 | 25.00 | 80.00 |" in md
    # the warm start's one-run table has both measures
    assert "| warm start | success (%) | score | episodes |" in md
    assert "| **All** | **0.0** | **12.5** | 3 |" in md
    state = json.loads((out / "pipeline.json").read_text())
    assert "goals" in state["phases"] and "games" not in state["phases"]
    assert not any(k.startswith("eval_real") for k in state["phases"])


# ------------------------------------------------------------------ the real thing, tiny

@pytest.fixture(scope="module")
def webshop_demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("wsdemo") / "run"
    assert main(["demo", "--quick", "--out", str(out)] + TINY) == 0
    return out


@needs_data
def test_quick_demo_on_webshop_end_to_end(webshop_demo):
    out = webshop_demo
    state = json.loads((out / "pipeline.json").read_text())
    assert list(state["phases"]) == ["goals", "demos", "sft", "eval_sft", "rl", "eval_rl",
                                     "report"]
    assert all(p["done"] for p in state["phases"].values())
    goals = json.loads((out / "goals.json").read_text())
    assert goals["train"] == ["train/1500", "train/1501", "train/1502"]
    assert len(goals["heldout"]) == 3 and all(g.startswith("test/") for g in goals["heldout"])
    # the demonstrations are the expert's wins on the training goals, nothing else
    demos = [json.loads(line) for line in (out / "demos.jsonl").read_text().splitlines()]
    assert demos and {d["task_id"] for d in demos} <= set(goals["train"])
    assert all(d["won"] and d["score"] == 1.0 for d in demos)
    cfg = (out / "rl" / "config.yaml").read_text()
    assert "name: webshop" in cfg and "eval_split: test" in cfg
    # the final evaluation: the held-out test goals, success and mean task score
    final = json.loads((out / "rl" / "eval.json").read_text())
    assert final["episodes"] == 3 and set(final["per_family"]) <= CATEGORIES
    assert 0.0 <= final["success"] <= final["score"] <= 1.0
    assert set(final["per_family_score"]) == set(final["per_family"])
    assert sum(final["per_family_episodes"].values()) == 3
    held = webshop_recipe.heldout(load_config(out / "rl" / "config.yaml"))
    assert [t.id for t in held] == goals["heldout"]
    res = (out / "results.md").read_text()
    assert "# sharpo demo: results (WebShop)" in res and "## WebShop test goals (3 goals" in res
    assert "| category | episodes | warm start (SFT) success | warm start (SFT) score |" in res
    assert f"| **All** | 3 | " in res and f"**{final['score'] * 100:.1f}** |" in res
    rows = re.findall(r"^\| (beauty|electronics|fashion|garden|grocery) \|", res, re.M)
    assert rows and set(rows) <= CATEGORIES and "Real ALFWorld" not in res
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "credit_report.html").is_file()


@needs_data
def test_rerun_of_webshop_demo_skips_everything(webshop_demo, capsys):
    before = (webshop_demo / "rl" / "metrics.jsonl").read_text()
    assert main(["demo", "--quick", "--out", str(webshop_demo)] + TINY) == 0
    out = capsys.readouterr().out
    assert "[goals] already done" in out and "[rl] already done" in out
    assert (webshop_demo / "rl" / "metrics.jsonl").read_text() == before


@needs_data
def test_sft_command_on_webshop_demonstrations(webshop_demo, tmp_path, capsys):
    out = tmp_path / "sft"
    assert main(["sft", "--demos", str(webshop_demo / "demos.jsonl"), "--out", str(out),
                 "max_steps=2", "batch_size=2", "max_length=512", "model.hidden_size=32",
                 "model.num_layers=1", "model.intermediate_size=64"]) == 0
    assert "2 steps" in capsys.readouterr().out
    assert (out / "config.json").is_file()


@needs_data
def test_eval_on_webshop_writes_success_and_mean_score(webshop_demo, tmp_path, capsys):
    from sharpo_train.models.tokenizer import TOKENIZER_DIR
    path = tmp_path / "ws_eval.json"
    assert main(["eval", "--model", str(webshop_demo / "sft"), "--out", str(path),
                 "env.name=webshop", "eval.num_tasks=4", "rollout.max_turns=2",
                 "rollout.max_new_tokens=16", f"model.tokenizer_path={TOKENIZER_DIR}"]) == 0
    result = json.loads(path.read_text())
    assert result["episodes"] == 4 and "test split" in result["games"]
    assert set(result["per_family"]) <= CATEGORIES and "score" in result
    assert 0.0 <= result["success"] <= result["score"] <= 1.0
    assert sum(result["per_family_episodes"].values()) == 4
    # a WebShop demo directory: its RL run, its config (the same held-out test goals)
    assert main(["eval", "--run", str(webshop_demo)]) == 0
    written = sorted((webshop_demo / "rl").glob("eval-*.json"))
    again = json.loads(written[-1].read_text())
    final = json.loads((webshop_demo / "rl" / "eval.json").read_text())
    assert again["per_family_episodes"] == final["per_family_episodes"]
    assert again["success"] == final["success"] and again["score"] == final["score"]
    # --games is ALFWorld's: one line, exit 2
    capsys.readouterr()
    assert main(["eval", "--model", str(webshop_demo / "sft"), "--games", str(tmp_path),
                 "env.name=webshop"]) == 2
    err = capsys.readouterr().err
    assert "--games" in err and "Traceback" not in err


def test_balanced_webshop_heldout_is_category_balanced():
    tasks = [Task(f"test/{i}", f) for i, f in
             enumerate(["beauty"] * 5 + ["grocery"] * 5 + ["garden"] * 2)]
    picked = balanced_tasks(tasks, 6, "eval")
    assert sorted(t.family for t in picked) == ["beauty"] * 2 + ["garden"] * 2 + ["grocery"] * 2


@needs_data
def test_eval_score_is_the_mean_of_webshops_task_scores(monkeypatch):
    """A scripted policy (the expert on one goal, a wrong product on another) through the
    real evaluation path: eval.json's score is the mean of the environment's task scores
    and success counts score 1 only."""
    import torch

    import sharpo_train.step.rollout as rollout
    from sharpo_train.envs import make_suite
    from sharpo_train.envs.webshop.agents import ExpertAgent
    from sharpo_train.envs.webshop.engine import WebShopEnv, get_world
    from sharpo_train.loops.evaluate import evaluate
    from sharpo_train.models.policy import build_policy

    world = get_world()
    env = WebShopEnv(world)
    tasks = world.tasks("test", 40)
    scripts, expected = {}, {}
    for task in tasks:                      # the expert's actions, replayed on a fresh env
        obs, expert, acts, res = env.reset(task), ExpertAgent(env), [], None
        while res is None or not res.done:
            acts.append(expert.act()[0])
            res = env.step(acts[-1])
        if res.info["won"]:
            scripts[obs.task_text], expected[task.id] = acts, 1.0
            break
    for task in tasks:                      # the wrong product: search, first hit, buy
        if task.id in expected:
            continue
        obs = env.reset(task)
        acts = [f"search[{world.goal_of(task)['query']}]"]
        res = env.step(acts[0])
        asins = [a for a in res.observation.admissible_actions
                 if re.fullmatch(r"click\[b[0-9a-z]{9}\]", a)]
        hit = next(a for a in asins if a[6:-1] != world.goal_of(task)["asin"].lower())
        acts += [hit, "click[buy now]"]
        for a in acts[1:]:
            res = env.step(a)
        if res.done and 0.0 < res.info["task_score"] < 1.0:
            scripts[obs.task_text], expected[task.id] = acts, res.info["task_score"]
            break
    assert len(expected) == 2, "no goal with a partial score among the first 40"
    torch.manual_seed(0)
    model, tok = build_policy({"hidden_size": 32, "intermediate_size": 64, "num_layers": 1})

    def scripted_generate(m, t, prompts, **kw):
        out = []
        for ids in prompts:
            text = tok.decode(ids)
            acts = next(v for k, v in scripts.items() if " ".join(k.split()) in text)
            step = int(re.search(r"Current observation \(step (\d+)\)", text).group(1))
            reply = f"<think>scripted</think><action>{acts[step - 1]}</action>"
            out.append(tok(reply)["input_ids"] + [tok.eos_token_id])
        return out

    monkeypatch.setattr(rollout, "generate", scripted_generate)
    cfg = load_config(None, ["env.name=webshop", "rollout.max_turns=6",
                             "rollout.history_length=0"])
    chosen = [t for t in tasks if t.id in expected]
    result = evaluate(model, tok, make_suite(dict(cfg.env, train_split="")), chosen, cfg)
    assert result["episodes"] == 2 and result["success"] == 0.5
    assert result["score"] == pytest.approx(sum(expected.values()) / 2)
    fams = {}
    for t in chosen:
        fams.setdefault(t.family, []).append(expected[t.id])
    assert result["per_family_score"] == pytest.approx({f: sum(v) / len(v) for f, v in fams.items()})
