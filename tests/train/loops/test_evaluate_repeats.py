"""eval.episodes_per_task: every held-out task played k times (sampled), its per_task entry
the task's success rate over them, the counts scaled by k; k = 1 keeps eval.json as it was
(0/1 per task, no extra key). The rollouts are stood in for, so the test pins the
bookkeeping: which episode's success lands in which task's rate."""
from __future__ import annotations

import re

import pytest

from sharpo_train.envs import make_suite
from sharpo_train.errors import ConfigError
from sharpo_train.loops import evaluate as evaluate_module
from sharpo_train.loops.train_config import load_config
from sharpo_train.step.rollout import Episode

ENV = ["env.name=corridor", "env.num_train=4", "env.num_eval=5", "env.seed=3"]


def _fake_rollouts(calls):
    """collect_rollouts stand-in: episode i of task g succeeds when (g + i) % 3 == 0."""
    def collect(model, tokenizer, pool, tasks, group_size, prompts, **kw):
        calls.append(group_size)
        return [Episode(task, g, i, success=(g + i) % 3 == 0)
                for g, task in enumerate(tasks) for i in range(group_size)]
    return collect


@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_per_task_is_the_rate_over_k_episodes(monkeypatch, k):
    calls = []
    monkeypatch.setattr(evaluate_module, "collect_rollouts", _fake_rollouts(calls))
    cfg = load_config(None, ENV + ["eval.temperature=1.0", f"eval.episodes_per_task={k}"])
    suite = make_suite(dict(cfg.env))
    tasks = suite.eval_tasks
    result = evaluate_module.evaluate_checkpoint((None, None), cfg, tasks, suite=suite,
                                                 pool=object())
    assert calls == [k]
    assert result["episodes"] == len(tasks) * k
    want = {t.id: sum((g + i) % 3 == 0 for i in range(k)) / k for g, t in enumerate(tasks)}
    assert result["per_task"] == pytest.approx(want)
    assert result["success"] == pytest.approx(sum(want.values()) / len(tasks))
    assert sum(result["per_family_episodes"].values()) == len(tasks) * k
    if k == 1:
        assert "episodes_per_task" not in result
        assert all(type(v) is int for v in result["per_task"].values())
    else:
        assert result["episodes_per_task"] == k


@pytest.mark.parametrize("overrides, needle", [
    (["eval.episodes_per_task=0"], "eval.episodes_per_task"),
    (["eval.episodes_per_task=2", "eval.temperature=0"],
     "eval.episodes_per_task: expected 1 with greedy decoding"),
    (["eval.episodes_per_task=two", "eval.temperature=1"], "eval.episodes_per_task")])
def test_bad_episodes_per_task_is_refused_by_name(overrides, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(None, ENV + overrides)
