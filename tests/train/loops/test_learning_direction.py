"""RL must move the policy the right way: GRPO and SHARPO raise success on a task whose
optimal behaviour is known (envs/synthetic.py "Signs": follow the sign in each of three
rooms). A format-only warm start (demonstrations with random actions: the reply format,
not the task) wins about 2**-3 of its sampled episodes; a fixed number of RL steps from it,
for fixed seeds, must raise both the sampled training success and the sampled success on
held-out corridors, with a margin. A direction test, not a timing: it would have caught a
sign error in the advantage, a loss that pushes every sampled token down, or padding that
leaks into the update.
"""
from __future__ import annotations

import json
import random

import pytest

from sharpo_train.loops.train_config import ModelConfig, load_config
from sharpo_train.envs import env_prompts, make_suite
from sharpo_train.envs.alfworld.prompts import format_response
from sharpo_train.envs.synthetic import SignsEnv
from sharpo_train.loops.evaluate import evaluate_checkpoint
from sharpo_train.io import read_jsonl
from sharpo_train.loops.sft import SFTConfig, run_sft
from sharpo_train.loops.trainer import train

ENV = {"name": "signs", "num_train": 16, "num_eval": 16, "num_signs": 3, "seed": 0}
ENV_OVERRIDES = [f"env.{k}={v}" for k, v in ENV.items()]
STEPS = 16


def _format_only_demos(path, n_passes: int = 4, seed: int = 0) -> None:
    """Demonstrations of the reply format with a random direction in every room."""
    rng = random.Random(seed)
    suite, prompts = make_suite(dict(ENV)), env_prompts(ENV)
    with open(path, "w") as f:
        for task in suite.train_tasks * n_passes:
            env = SignsEnv()
            obs, history = env.reset(task), []
            while True:
                action = rng.choice(obs.admissible_actions)
                text = prompts.render_turn_prompt(obs.task_text, history, obs.text,
                                                  obs.admissible_actions, history_length=1)
                f.write(json.dumps({"messages": [
                    {"role": "user", "content": text},
                    {"role": "assistant", "content": format_response("I choose a way.", action)}]})
                    + "\n")
                res = env.step(action)
                history.append((obs.text, action))
                obs = res.observation
                if res.done:
                    break


@pytest.fixture(scope="module")
def format_only_policy(tmp_path_factory):
    d = tmp_path_factory.mktemp("signs")
    _format_only_demos(d / "demos.jsonl")
    run_sft(d / "demos.jsonl", d / "sft",
            SFTConfig(max_steps=300, batch_size=16, lr=3e-3, threads=1, log_every=100,
                      model=ModelConfig(hidden_size=64, num_layers=2, intermediate_size=128)),
            log=lambda *_: None)
    return d / "sft"


def _config(run_dir, policy, method: str):
    return load_config(None, ENV_OVERRIDES + [
        f"method={method}", f"total_steps={STEPS}", f"run_dir={run_dir}", f"init_from={policy}",
        "rollout.tasks_per_step=4", "rollout.group_size=8", "rollout.max_turns=3",
        "rollout.max_new_tokens=24", "rollout.history_length=1", "optim.lr=1e-3",
        "optim.micro_batch_size=64", "model.cpu_threads=1", "eval.num_tasks=16",
        "eval.temperature=1.0",
        "eval.at_end=true", "log.progress=false", "log.credit_every=0", "checkpoint.every=0"])


@pytest.mark.parametrize("method", ["grpo", "sharpo"])
def test_rl_raises_success_where_the_optimum_is_known(tmp_path, format_only_policy, method):
    cfg = _config(tmp_path / method, format_only_policy, method)
    before = evaluate_checkpoint(format_only_policy, cfg)["success"]
    run = train(cfg)
    rows = read_jsonl(run / "metrics.jsonl")
    success = [r["success"] for r in rows if r["kind"] == "train"]
    after = [r for r in rows if r["kind"] == "eval"][-1]["eval/success"]
    assert len(success) == STEPS
    early, late = sum(success[:3]) / 3, sum(success[-4:]) / 4
    # sampled training success: ~2**-3 at the start, clearly higher at the end
    assert early < 0.3, success
    assert late > early + 0.2, success
    # sampled success on held-out corridors (greedy decoding of a format-only policy
    # already follows the sign: the prompt's "points left" makes " left" its argmax)
    assert after >= before + 0.25, (before, after)
