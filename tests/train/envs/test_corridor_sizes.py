"""The corridor recipe at other sizes (envs/corridor/recipe.py ``sized`` and ``free_keep``,
docs/corridor.md "Other sizes"): the default size keeps the recipe's values, another size
keeps the default's mix of lamp and free turns in the warm start's data, the SFT makes one
pass over them whatever their number (sft.epochs=1, no step cap: 813 steps at the default
size; it was a fixed 350, under half a pass), an explicit override or --quick still wins,
and the reply budget and SFT length fit every reply and hinted example they are derived
for."""
from __future__ import annotations

import json

import pytest

from sharpo_train.envs.corridor import REPLY_TOKENS
from sharpo_train.envs.corridor.engine import ACTION_NAMES, COLOURS, CorridorSettings
from sharpo_train.envs.corridor.prompts import format_response
from sharpo_train.envs.corridor.recipe import free_keep, sized
from sharpo_train.errors import ConfigError
from sharpo_train.recipes.overrides import PipelinePlan

# the recipe's values before they were derived: the default compare must not move
TODAY = {"sft.max_length": 1024, "rollout.max_new_tokens": 24, "rollout.max_turns": 100}


def sft_steps(tmp_path, *overrides) -> int:
    """The warm start's optimizer steps for these settings: sft.max_steps, or one pass of
    sft.epochs over the demonstrations the recipe writes (loops/sft.py run_sft's rule)."""
    import math

    from sharpo_train.envs.corridor import make_suite
    from sharpo_train.envs.corridor.demos import write_demos
    from sharpo_train.loops.sft import hinted_demos, load_demos
    sft, train = plan(tmp_path, *overrides)
    if sft.max_steps:
        return sft.max_steps
    env = {k[len("env."):]: v for k, v in train.items() if k.startswith("env.")}
    settings = {k: int(v) for k, v in env.items() if k in ("num_turns", "num_decisive")}
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "demos.jsonl"
    write_demos(str(path), make_suite({"name": "corridor", **settings, "num_train": 500,
                                       "num_eval": 0}).train_tasks, agent="mixed",
                seed=0, history_length=0, free_keep=free_keep(CorridorSettings(**settings)))
    n = len(load_demos(path)) + len(hinted_demos(path, sft.hint_fraction, sft.seed,
                                                 sft.hint_settings(), "corridor"))
    return max(1, round(sft.epochs * math.ceil(n / sft.batch_size)))


def plan(tmp_path, *overrides, quick=False):
    p = PipelinePlan.from_args(tmp_path / "cmp", ["env=corridor", *overrides], quick=quick)
    train = {}
    for item in p.train_overrides:      # later items win, as in load_config
        key, _, value = item.partition("=")
        train[key] = value
    return p.sft, train


def test_default_size_derives_the_recipes_values(tmp_path):
    assert sized({"name": "corridor"}) == TODAY
    assert sized({"name": "corridor", "num_turns": 10, "num_decisive": 3}) == TODAY
    sft, train = plan(tmp_path)
    assert (sft.epochs, sft.max_steps, sft.max_length) == (1, 0, 1024)
    assert (train["rollout.max_new_tokens"], train["rollout.max_turns"]) == ("24", "100")
    assert (train["env.format_penalty"], train["eval.episodes_per_task"]) == ("0.5", "4")
    assert sft_steps(tmp_path) == 813          # 13,000 examples / 16: one pass


def test_bigger_sizes_keep_the_mix_and_one_sft_pass(tmp_path):
    # examples per task / 2: 2 x num_decisive + the free turns kept; 13 at the default size
    assert free_keep(CorridorSettings()) == 1.0
    assert free_keep(CorridorSettings(num_turns=15)) == pytest.approx(7 / 12)
    assert free_keep(CorridorSettings(num_decisive=4)) == 1.0      # 6 free per 4 lamps
    assert free_keep(CorridorSettings(num_turns=3, num_decisive=3)) == 1.0
    assert sized({"num_turns": 100})["sft.max_length"] > 1024
    assert sized({"num_turns": 50, "num_decisive": 14})["sft.max_length"] == 1024
    # one pass over 2 x (2 x lamps + free turns kept) examples per task, 500 tasks, batch 16
    assert sft_steps(tmp_path / "a", "env.num_turns=15") == 812         # 7 of 12 free kept
    assert sft_steps(tmp_path / "b", "env.num_decisive=4") == 875       # 14,000 examples
    _, train = plan(tmp_path, "env.num_decisive=4")
    assert train["rollout.max_turns"] == "100"


def test_free_keep_drops_only_free_turns_and_one_keeps_every_record(tmp_path):
    from sharpo_train.envs.corridor import make_suite
    from sharpo_train.envs.corridor.demos import write_demos
    tasks = make_suite({"name": "corridor", "num_turns": 15, "num_train": 40,
                        "num_eval": 0}).train_tasks
    full, default, cut = (tmp_path / n for n in ("full.jsonl", "default.jsonl", "cut.jsonl"))
    write_demos(str(full), tasks, agent="mixed", free_keep=1.0)
    write_demos(str(default), tasks, agent="mixed")
    stats = write_demos(str(cut), tasks, agent="mixed", free_keep=0.5)
    assert full.read_bytes() == default.read_bytes()
    rows = [json.loads(x) for x in full.read_text().splitlines()]
    kept = [json.loads(x) for x in cut.read_text().splitlines()]
    lamp = [r for r in rows if r["hint_informative"]]
    assert [r for r in kept if r["hint_informative"]] == lamp      # every lamp turn, as is
    free = len(rows) - len(lamp)
    assert 0.4 * free < len(kept) - len(lamp) < 0.6 * free and stats.turns == len(kept)
    with pytest.raises(ValueError, match="free_keep"):
        write_demos(str(tmp_path / "x.jsonl"), tasks, free_keep=0)


def test_an_explicit_setting_or_quick_wins(tmp_path):
    sft, train = plan(tmp_path, "env.num_decisive=4", "sft.max_steps=99", "sft.max_length=512",
                      "rollout.max_new_tokens=30", "rollout.max_turns=15")
    assert (sft.max_steps, sft.max_length) == (99, 512)
    assert (train["rollout.max_new_tokens"], train["rollout.max_turns"]) == ("30", "15")
    sft, _ = plan(tmp_path, "env.num_decisive=4", quick=True)
    assert sft.max_steps == 12


def test_a_bad_size_is_a_one_line_error_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match="env.num_turns"):
        plan(tmp_path, "env.num_turns=0")
    with pytest.raises(ConfigError, match="env.num_decisive"):
        sized({"num_turns": 5, "num_decisive": 6})


def test_the_reply_budget_fits_every_reply_at_every_size():
    from sharpo_train.models.tokenizer import build_tokenizer
    tok = build_tokenizer()
    longest = max(len(tok(format_response(think, door), add_special_tokens=False)["input_ids"])
                  for think in ["no lamp"] + [f"a {c} lamp" for c in COLOURS]
                  for door in ACTION_NAMES)
    assert longest + 1 <= REPLY_TOKENS          # + the stop token


@pytest.mark.parametrize("turns,lamps,doors", [(10, 3, 2), (32, 32, 6), (40, 40, 6),
                                               (100, 3, 2), (100, 100, 2)])
def test_the_sft_length_fits_the_longest_hinted_example(tmp_path, turns, lamps, doors):
    from sharpo_train.envs.corridor import make_suite
    from sharpo_train.envs.corridor.demos import write_demos
    from sharpo_train.hint import HintSettings
    from sharpo_train.loops.sft import encode_example, end_of_turn_ids, hinted_demos
    from sharpo_train.models.tokenizer import build_tokenizer
    env = {"num_turns": turns, "num_decisive": lamps, "num_actions": doors,
           "clues_per_action": 2, "num_train": 2, "num_eval": 0}
    path = tmp_path / "demos.jsonl"
    write_demos(str(path), make_suite({"name": "corridor", **env}).train_tasks,
                agent="mixed", history_length=0)
    copies = hinted_demos(path, 1.0, settings=HintSettings(placement="after_observation",
                                                           scope="to_turn"), env="corridor")
    tok = build_tokenizer()
    eot = end_of_turn_ids(tok)
    longest = max(len(encode_example(tok, m, eot, 1 << 20)[0]) for m in copies)
    assert longest <= sized(env)["sft.max_length"]
