"""TRL's log-prob passes through linear_logprobs (sharpo_train/integrations/fused_head.py,
SharpoConfig.fused_logprobs): per-token log-probs, entropy and gradients equal TRL's own
fused head on the same batch (fp32 <= 1e-5 relative; bf16 within 2e-2 absolute, one bf16
rounding of the logits), on tiny models built in code; the models whose head is not a
plain linear layer keep TRL's head with one log line; in a real train() every pass (teacher,
loss) runs through the kernel; lam=0 with the setting off is GRPOTrainer bit for bit, and
with it on the difference is measured (docs/integrations.md)."""
import copy
import logging

import pytest
import torch

from integrations.trl_support import config, needs_trl, script_sampling, tiny_policy

pytestmark = needs_trl

LOGGER = "sharpo_train.integrations.trl"
SUCCESS = "<think>the door is closed</think><action>open door</action>"
FAIL = "<think>hmm</think><action>look around</action>"


def _pair(model, temperature, entropy=True, cast=False):
    """(TRL's patched model, the same weights with sharpo's head on top): TRL's head is
    ``add_fused_lm_head`` as GRPOTrainer adds it."""
    from trl.trainer.utils import add_fused_lm_head

    from sharpo_train.integrations.fused_head import add_linear_logprobs_head

    trl_model = model
    ours = copy.deepcopy(model)
    for m in (trl_model, ours):
        add_fused_lm_head(m, temperature=temperature, cast_lm_head_to_fp32=cast, outputs=("log_probs", "entropy"))
    logged = []
    assert add_linear_logprobs_head(ours, temperature, cast, lambda: entropy, logged.append) is None
    assert logged == []
    return trl_model, ours


def _batch(V, b=3, S=23, seed=1):
    """Left-padded rows with a prompt: labels -100 on padding and prompt (TRL's layout)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (b, S), generator=g)
    attn = torch.ones(b, S, dtype=torch.long)
    attn[1, :4] = 0
    attn[2, :9] = 0
    labels = ids.masked_fill(attn == 0, -100)
    labels[:, :-11] = -100                 # logits_to_keep = 11 completion tokens
    return ids, attn, labels


def _untied_with_bias(dtype=torch.float32):
    """A tiny Qwen2 with its own output head, a bias on it (a plain nn.Linear), odd sizes."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(3)
    cfg = Qwen2Config(vocab_size=1031, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg)
    model.lm_head = torch.nn.Linear(48, 1031, bias=True)
    torch.nn.init.normal_(model.lm_head.bias, std=0.5)
    return model.to(dtype)


def _compare(trl_model, ours, V, rtol, atol, grads=True):
    ids, attn, labels = _batch(V)
    want = trl_model(input_ids=ids, attention_mask=attn, labels=labels, fused_lm_head=True)
    got = ours(input_ids=ids, attention_mask=attn, labels=labels, fused_lm_head=True)
    scored = labels[:, 1:] != -100
    assert got.log_probs.shape == want.log_probs.shape == scored.shape
    torch.testing.assert_close(got.log_probs, want.log_probs.float(), rtol=rtol, atol=atol)
    torch.testing.assert_close(got.entropy, want.entropy.float(), rtol=rtol, atol=atol)
    assert (got.log_probs[~scored] == 0).all() and (got.entropy[~scored] == 0).all()   # as TRL's
    assert (got.log_probs[scored] < 0).all() and torch.isfinite(got.log_probs).all()
    if not grads:
        return
    g = torch.randn(scored.shape, generator=torch.Generator().manual_seed(5))
    ((want.log_probs * g).sum() + want.entropy.sum()).backward()
    ((got.log_probs * g).sum() + got.entropy.sum()).backward()
    for (name, p), (_, q) in zip(trl_model.named_parameters(), ours.named_parameters()):
        if p.requires_grad:
            assert q.grad is not None, name
            torch.testing.assert_close(q.grad, p.grad, rtol=rtol * 10, atol=atol * 10, msg=name)
        else:
            assert q.grad is None, name


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_tied_embeddings_fp32_equal_trls_head(temperature):
    model, tok = tiny_policy()
    assert model.config.tie_word_embeddings
    trl_model, ours = _pair(model, temperature)
    _compare(trl_model, ours, model.config.vocab_size, rtol=1e-5, atol=1e-6)


def test_untied_head_with_bias_fp32_equal_trls_head():
    model = _untied_with_bias()
    trl_model, ours = _pair(model, 0.9)
    _compare(trl_model, ours, 1031, rtol=1e-5, atol=1e-6)


def test_frozen_head_gets_no_gradient_and_equal_values():
    model = _untied_with_bias()
    model.lm_head.requires_grad_(False)
    trl_model, ours = _pair(model, 1.0)
    _compare(trl_model, ours, 1031, rtol=1e-5, atol=1e-6)
    assert ours.lm_head.weight.grad is None and ours.model.norm.weight.grad is not None


def test_bf16_within_stated_tolerance():
    """bf16 weights: both heads multiply in bf16 and reduce in fp32; they differ by the
    rounding of the logits (TRL rounds each logit tile to bf16, the kernel keeps fp32)."""
    model = _untied_with_bias(torch.bfloat16)
    trl_model, ours = _pair(model, 1.0)
    _compare(trl_model, ours, 1031, rtol=0.0, atol=2e-2, grads=False)


def test_cast_lm_head_to_fp32_equal():
    model = _untied_with_bias(torch.bfloat16)
    trl_model, ours = _pair(model, 1.0, cast=True)
    _compare(trl_model, ours, 1031, rtol=1e-5, atol=1e-5, grads=False)


def test_no_entropy_asked_gives_none():
    model, _ = tiny_policy()
    trl_model, ours = _pair(model, 1.0, entropy=False)
    ids, attn, labels = _batch(model.config.vocab_size)
    out = ours(input_ids=ids, attention_mask=attn, labels=labels, fused_lm_head=True)
    assert out.entropy is None
    want = trl_model(input_ids=ids, attention_mask=attn, labels=labels, fused_lm_head=True)
    torch.testing.assert_close(out.log_probs, want.log_probs, rtol=1e-5, atol=1e-6)


class _ScaledHead(torch.nn.Linear):
    def forward(self, x):
        return super().forward(x) * 0.5


@pytest.mark.parametrize("case", ["softcap", "scale", "custom_head"])
def test_heads_that_are_not_plain_linear_keep_trls_path(case):
    from trl.trainer.utils import add_fused_lm_head

    from sharpo_train.integrations.fused_head import add_linear_logprobs_head

    model = _untied_with_bias()
    if case == "softcap":
        model.config.final_logit_softcapping = 30.0
    elif case == "scale":
        model.config.logit_scale = 0.25
    else:
        head = _ScaledHead(48, 1031)
        head.load_state_dict(model.lm_head.state_dict())
        model.lm_head = head
    add_fused_lm_head(model, temperature=1.0, outputs=("log_probs", "entropy"))
    forward = model.forward
    logged = []
    reason = add_linear_logprobs_head(model, 1.0, False, lambda: True, logged.append)
    word = {"softcap": "soft-capping", "scale": "logit_scale", "custom_head": "_ScaledHead"}[case]
    assert reason is not None and word in reason and logged == [reason]
    assert model.forward == forward                          # TRL's head, untouched


def test_a_head_replaced_after_the_patch_falls_back_with_one_log_line():
    """FSDP/PEFT can swap modules after the patch: checked per call, logged once."""
    from trl.trainer.utils import add_fused_lm_head

    from sharpo_train.integrations.fused_head import add_linear_logprobs_head

    model = _untied_with_bias()
    twin = copy.deepcopy(model)
    for m in (model, twin):
        add_fused_lm_head(m, temperature=1.0, outputs=("log_probs", "entropy"))
    logged = []
    assert add_linear_logprobs_head(model, 1.0, False, lambda: True, logged.append) is None
    for m in (model, twin):
        head = _ScaledHead(48, 1031)
        head.load_state_dict(m.lm_head.state_dict())
        m.lm_head = head
    ids, attn, labels = _batch(1031)
    for _ in range(2):
        out = model(input_ids=ids, attention_mask=attn, labels=labels, fused_lm_head=True)
    want = twin(input_ids=ids, attention_mask=attn, labels=labels, fused_lm_head=True)
    assert torch.equal(out.log_probs, want.log_probs)                  # TRL's head ran
    assert len(logged) == 1 and "_ScaledHead" in logged[0]


def test_use_liger_loss_is_refused_with_a_clear_message(tmp_path):
    with pytest.raises(TypeError, match="use_liger_loss.*no Liger GRPO loss.*fused_logprobs"):
        config(tmp_path, use_liger_loss=True)


def reward_open(completions, **kw):
    return [1.0 if "open door" in c[-1]["content"] else 0.0 for c in completions]


def chat_data(n=8):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: get out of the room."}]}
                              for i in range(n)])


def _train(tmp_path, cls, calls=None, monkeypatch=None, **kw):
    """2 steps of ``cls`` on the scripted tiny policy; -> (trainer, the trained parameters).
    ``calls``: each linear_logprobs call's (hidden shape, grad enabled, the head's weight)."""
    import sharpo_train.integrations.fused_head as fused_head

    model, tok = tiny_policy()
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    from trl import GRPOTrainer

    args = config(tmp_path, plain_trl=cls is GRPOTrainer, max_steps=2, **kw)
    trainer = cls(model=model, reward_funcs=reward_open, args=args, train_dataset=chat_data(), processing_class=tok)
    if calls is not None:
        inner = fused_head.linear_logprobs

        def counted(hidden, weight, labels, **k):
            calls.append((tuple(hidden.shape), torch.is_grad_enabled(), weight is trainer.model.lm_head.weight))
            return inner(hidden, weight, labels, **k)

        monkeypatch.setattr(fused_head, "linear_logprobs", counted)
    trainer.train()
    return trainer, {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def test_every_pass_of_a_train_goes_through_linear_logprobs(tmp_path, monkeypatch):
    """lam > 0: the teacher pass (no grad, its longer prompts) and the loss passes (with
    grad) call the kernel with the head's own weight; the default config turns it on."""
    from sharpo_train.integrations.trl import SharpoConfig, SharpoGRPOTrainer

    assert SharpoConfig.__dataclass_fields__["fused_logprobs"].default is True
    calls = []
    trainer, _ = _train(tmp_path, SharpoGRPOTrainer, calls, monkeypatch)
    assert trainer.sharpo_fused == {"policy": None}
    assert any(not grad for _, grad, _ in calls)          # the teacher pass
    assert sum(grad for _, grad, _ in calls) >= 2         # a loss pass per step
    assert all(same for _, _, same in calls)
    teacher = trainer.sharpo_last["teacher_input_ids"]
    assert (teacher.shape[0], teacher.shape[1] - 1) in [s[:2] for s, g, _ in calls if not g]


def test_the_setting_off_keeps_trls_head(tmp_path, monkeypatch):
    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    calls = []
    trainer, _ = _train(tmp_path, SharpoGRPOTrainer, calls, monkeypatch, fused_logprobs=False)
    assert calls == [] and trainer.sharpo_fused == {}


def test_lam_zero_is_grpo_bit_for_bit_off_and_measured_on(tmp_path):
    """lam = 0, fused_logprobs=False: GRPOTrainer's trained weights exactly. On: the
    log-probs differ by float rounding only (<= 1e-5 above); Adam's normalised step carries
    that into the weights: measured 4.5e-6 largest |dW| after 2 steps at lr 1e-3, where the
    largest update is 1.5e-3 (0.3%); asserted below 1% (docs/integrations.md states it)."""
    from trl import GRPOTrainer

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model0, _ = tiny_policy()
    start = {n: p.detach().clone() for n, p in model0.named_parameters()}
    _, grpo = _train(tmp_path / "grpo", GRPOTrainer)
    _, off = _train(tmp_path / "off", SharpoGRPOTrainer, lam=0.0, fused_logprobs=False)
    _, on = _train(tmp_path / "on", SharpoGRPOTrainer, lam=0.0)
    assert all(torch.equal(off[n], grpo[n]) for n in grpo)
    update = max((grpo[n] - start[n]).abs().max().item() for n in grpo)
    diff = max((on[n] - grpo[n]).abs().max().item() for n in grpo)
    assert update > 1e-4
    print(f"lam=0 fused on vs GRPOTrainer: max |dW| {diff:.3g}, max update {update:.3g}")
    assert diff <= 1e-2 * update
