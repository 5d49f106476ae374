"""SharpoGRPOTrainer on every prompt format TRL's GRPOTrainer takes, at lam=0, and with a
`report_to` backend: real `trainer.train()` runs on CPU with the tiny model."""
import pytest
import torch

from integrations.trl_support import (check_step, config, needs_trl, record_steps, script_sampling, tiny_policy,
                                      train_recorded)

pytestmark = needs_trl

SUCCESS = "<think>the door is closed</think><action>open door</action>"
FAIL = "<think>hmm</think><action>look around</action>"


def reward_open(completions, **kw):
    """1 when the completion opens the door; plain-text or conversational completions."""
    text = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [1.0 if "open door" in t else 0.0 for t in text]


def chat_data(n=8):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: get out of the room."}]}
                              for i in range(n)])


@pytest.mark.parametrize("template", ["kept", "none"])
def test_plain_text_prompts_train(tmp_path, template):
    """TRL's standard format (the prompt is a string, no chat template applied), with and
    without a chat template on the tokenizer: the hint goes before the prompt text, which
    is kept whole, and each step matches the kernel and the float64 reference."""
    from datasets import Dataset

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()
    if template == "none":
        tok.chat_template = None
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    data = Dataset.from_list([{"prompt": f"Room {i}: get out of the room.\nAnswer:"} for i in range(8)])
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward_open, args=config(tmp_path),
                                train_dataset=data, processing_class=tok)
    steps, _ = train_recorded(trainer)
    for step in steps:
        assert all("<|im_start|>" not in tok.decode(p) for p in step["prompts"])   # no chat rendering
        check_step(step, tok, 4, plain=True)


def test_conversational_prompts_need_a_chat_template(tmp_path):
    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()
    tok.chat_template = None
    with pytest.raises(ValueError, match="processing_class: the tokenizer has no chat template"):
        SharpoGRPOTrainer(model=model, reward_funcs=reward_open, args=config(tmp_path),
                          train_dataset=chat_data(), processing_class=tok)


def count_logp_passes(trainer):
    """Count the forward passes `_sharpo_advantages` itself makes (student/teacher scoring)."""
    calls = {"inside": 0}
    inner_adv, inner_lp = trainer._sharpo_advantages, trainer._get_per_token_logps_and_entropies
    state = {"in_sharpo": False}

    def adv(out):
        state["in_sharpo"] = True
        try:
            return inner_adv(out)
        finally:
            state["in_sharpo"] = False

    def lp(*args, **kwargs):
        calls["inside"] += state["in_sharpo"]
        return inner_lp(*args, **kwargs)

    trainer._sharpo_advantages, trainer._get_per_token_logps_and_entropies = adv, lp
    return calls


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_lam_zero_skips_the_teacher_pass(tmp_path, lam):
    """lam = 0: SHARPO's advantage is GRPO's A_i on every trained token (docs/method.md §4),
    so no teacher prompt is built and no extra forward pass runs; lam > 0 runs them on the
    same script (so the lam = 0 run had successful peers to use)."""
    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward_open, args=config(tmp_path, lam=lam),
                                train_dataset=chat_data(), processing_class=tok)
    calls = count_logp_passes(trainer)
    steps, _ = record_steps(trainer)
    trainer.train()
    assert len(steps) == 3
    with_peer = sum(p is not None for s in steps for p in s["peers"])
    assert with_peer > 0
    if lam == 0.0:
        assert calls["inside"] == 0
        for s in steps:
            assert not s["has_teacher"].any() and s["teacher_rows"] == []
            assert all(t is None for t in s["teacher_prompts"])
            torch.testing.assert_close(s["advantages"], (s["base"][:, None] * s["loss_mask"]).float())
    else:
        assert calls["inside"] >= 3                     # at least one teacher pass per step
        for s in steps:
            check_step(s, tok, 4, lam=lam)


def test_report_to_backend_receives_sharpo_metrics(tmp_path, monkeypatch):
    """A `report_to` backend (registered under a name, as transformers' integrations are)
    receives sharpo/teacher_coverage, sharpo/gap_mean and sharpo/weight_mean at every
    logging step, with the values of that step."""
    from transformers import TrainerCallback
    from transformers.integrations import integration_utils

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    received = []

    class Backend(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            received.append(dict(logs or {}))

    monkeypatch.setitem(integration_utils.INTEGRATION_TO_CALLBACK, "sharpo-test-backend", Backend)
    model, tok = tiny_policy()
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward_open,
                                args=config(tmp_path, report_to=["sharpo-test-backend"]),
                                train_dataset=chat_data(), processing_class=tok)
    assert any(isinstance(cb, Backend) for cb in trainer.callback_handler.callbacks)
    steps, _ = record_steps(trainer)
    trainer.train()
    logged = [r for r in received if "sharpo/teacher_coverage" in r]
    assert len(logged) == 3
    for rec, step in zip(logged, steps):
        res, base, has = step["segments"], step["base"], step["has_teacher"]
        scored = (~torch.isnan(res.gap)) & has[:, None] & (base != 0)[:, None]
        assert rec["sharpo/teacher_coverage"] == pytest.approx(has.float().mean().item())
        assert rec["sharpo/gap_mean"] == pytest.approx(res.gap[scored].mean().item(), rel=1e-5)
        assert rec["sharpo/weight_mean"] == pytest.approx(res.weight[scored].mean().item(), rel=1e-5)
