"""Rollouts (sharpo_train/step/rollout.py): malformed replies are invalid actions, limits hold,
environment faults end one episode only, prompts keep the task when shortened."""
from typing import Optional

import pytest
import torch

from sharpo_train.envs import env_prompts
from sharpo_train.envs.base import Env, Observation, SerialEnvPool, StepResult, Task
from sharpo_train.models.policy import build_policy
from sharpo_train.models.policy import stop_token_ids
from sharpo_train.step.rollout import (chat_prompt_ids, collect_rollouts, fit_prompt, generate,
                                       sampling_kwargs)

PROMPTS = env_prompts({"name": "synthetic"})


class ScriptedEnv(Env):
    """Records the actions it receives; faults on the task named 'boom'."""

    def __init__(self, log):
        self.log = log

    def reset(self, task: Task) -> Observation:
        if task.id == "boom":
            raise RuntimeError("engine fault")
        self.task = task
        return Observation("start " * 3, "Your task is to: wait.", ["wait"])

    def step(self, action: Optional[str]) -> StepResult:
        self.log.append((self.task.id, action))
        text = "Nothing happens." if action is None else f"You {action}."
        return StepResult(Observation(text, "Your task is to: wait.", ["wait"]), 0.0, False, {"won": False})


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return build_policy({"hidden_size": 32, "intermediate_size": 64, "num_layers": 1})


def test_random_policy_replies_are_invalid_actions_not_crashes(policy):
    model, tok = policy
    log = []
    pool = SerialEnvPool(lambda: ScriptedEnv(log))
    tasks = [Task("a", "X"), Task("boom", "Y")]
    eps = collect_rollouts(model, tok, pool, tasks, 2, PROMPTS, max_turns=3, max_new_tokens=12,
                           temperature=1.0)
    assert [(e.group, e.index) for e in eps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    ok, boom = eps[:2], eps[2:]
    for e in ok:
        assert len(e.turns) == 3 and not e.success and e.error is None      # turn limit
        for t in e.turns:
            assert 1 <= len(t.response_ids) <= 12
            assert t.action == PROMPTS.parse_action(t.response_text)
            if t.action is None:
                assert t.observation_after == "Nothing happens."
            assert t.prompt_ids == chat_prompt_ids(tok, t.user_text)
    for e in boom:
        assert e.turns == [] and "engine fault" in e.error and e.reward == 0.0
    assert len(log) == 6 and all(task == "a" for task, _ in log)
    # history: turn 2's prompt shows turn 1's observation
    assert "start" in ok[0].turns[1].user_text


def test_parsed_action_reaches_the_environment(policy, monkeypatch):
    import sharpo_train.step.rollout as rollout
    model, tok = policy
    text = "<think>ok</think><action>increase</action>"
    ids = tok(text)["input_ids"] + [tok.eos_token_id]
    # the policy "samples" a well-formed reply
    monkeypatch.setattr(rollout, "generate", lambda m, t, prompts, **kw: [list(ids) for _ in prompts])
    log = []
    pool = SerialEnvPool(lambda: ScriptedEnv(log))
    eps = collect_rollouts(model, tok, pool, [Task("a", "X")], 1, PROMPTS, max_turns=1,
                           max_new_tokens=8, temperature=1.0)
    assert log == [("a", "increase")]
    t = eps[0].turns[0]
    assert t.response_text == text and [s.kind for s in t.spans] == ["think", "action"]


def test_generate_stops_at_end_of_turn_and_greedy_is_deterministic(policy):
    model, tok = policy
    p = chat_prompt_ids(tok, "hello")
    torch.manual_seed(1)
    a = generate(model, tok, [p, p[:5]], max_new_tokens=10, temperature=0.0)
    b = generate(model, tok, [p, p[:5]], max_new_tokens=10, temperature=0.0)
    assert a == b
    for r in a:
        assert tok.eos_token_id not in r[:-1] and 1 <= len(r) <= 10


def test_fit_prompt_drops_history_not_the_task(policy):
    _, tok = policy
    history = [("a long observation " * 20, "increase")] * 5
    full_text, full = fit_prompt(tok, PROMPTS, "Your task is to: reach 3.", history, "now", ["increase"], 5, 10_000)
    text, ids = fit_prompt(tok, PROMPTS, "Your task is to: reach 3.", history, "now", ["increase"], 5,
                           len(full) - 10)
    assert len(ids) < len(full) and "Your task is to: reach 3." in text and "now" in text


def test_sampling_ignores_the_checkpoints_generation_defaults(policy):
    """A checkpoint's generation_config (Qwen2.5-Instruct: top_k 20, top_p 0.8,
    repetition_penalty 1.05) must not change what is sampled: the processed scores HF
    samples from must equal the raw logits / T, the distribution the trainer scores."""
    model, tok = policy
    gc = model.generation_config
    gc.top_k, gc.top_p, gc.repetition_penalty, gc.temperature = 20, 0.8, 1.05, 0.3
    try:
        kwargs = sampling_kwargs(stop_token_ids(model, tok), tok.pad_token_id, 6, 0.7)
        with torch.no_grad():
            out = model.generate(input_ids=torch.tensor([chat_prompt_ids(tok, "hi")]),
                                 output_scores=True, output_logits=True,
                                 return_dict_in_generate=True, **kwargs)
    finally:
        gc.top_k = gc.top_p = gc.repetition_penalty = gc.temperature = None
    for scores, logits in zip(out.scores, out.logits):
        assert torch.isfinite(scores).all()                   # no top-k / top-p masking
        torch.testing.assert_close(scores, logits / 0.7)      # no repetition penalty
