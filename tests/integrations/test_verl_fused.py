"""verl 0.9.1's fused log-prob path with sharpo's kernel underneath (fused_verl.py) and its
setup by the drop-in (engine_settings.fused_kernels_setup): per-token log-probs, entropy
and gradients of the patched model equal verl's own unfused path (full logits,
``logprobs_from_logits``, ``entropy_from_logits``) on the same batch, fp32 <= 1e-5 relative,
bf16 within 2e-2 (the logits' bf16 rounding on verl's path); tiny Qwen2 models built in
code; the trainer turns ``use_fused_kernels`` on at construction and refuses an override
that keeps it off."""
import copy

import pytest
import torch

from integrations.verl_support import needs_verl

pytestmark = needs_verl


def _model(tied: bool, dtype=torch.float32):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(4)
    cfg = Qwen2Config(vocab_size=1031, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tied)
    return Qwen2ForCausalLM(cfg).to(dtype)


def _engine_path(model, ids, temperature):
    """verl without fused kernels: logits / temperature -> its log-prob and entropy functions,
    labels = the next token (rolled, as verl's fused forward scores them)."""
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    logits = model(input_ids=ids).logits.float() / temperature
    rolled = torch.roll(ids, shifts=-1, dims=-1)
    return logprobs_from_logits(logits, rolled), entropy_from_logits(logits)


def _fused_path(model, ids, temperature, monkeypatch):
    """verl's use_fused_kernels forward (torch backend), as its FSDP engine patches it."""
    from verl.models.transformers.monkey_patch import patch_forward_with_backends

    cls = type(model)
    monkeypatch.setattr(cls, "forward", cls.forward)          # restored after the test
    patch_forward_with_backends(model, use_fused_kernels=True, fused_kernels_backend="torch")
    out = model(input_ids=ids, temperature=temperature, return_dict=True)
    return out.log_probs, out.entropy


def test_register_installs_sharpos_kernel_under_verls_fused_path():
    from verl.utils.experimental import torch_functional

    import sharpo_train.integrations.verl as integration
    from sharpo_train.integrations.fused_verl import SharpoFusedLinearForPPO

    integration.register()
    assert torch_functional.FusedLinearForPPO is SharpoFusedLinearForPPO


@pytest.mark.parametrize("tied, temperature", [(True, 1.0), (False, 0.7)])
def test_fp32_log_probs_entropy_and_grads_equal_verls_unfused_path(tied, temperature, monkeypatch):
    import sharpo_train.integrations.verl  # noqa: F401  (installs the kernel)

    model = _model(tied)
    twin = copy.deepcopy(model)
    ids = torch.randint(0, 1031, (3, 29), generator=torch.Generator().manual_seed(2))
    want_lp, want_ent = _engine_path(twin, ids, temperature)
    calls = []
    from sharpo_train.integrations import fused_verl

    inner = fused_verl.linear_logprobs
    monkeypatch.setattr(fused_verl, "linear_logprobs", lambda *a, **k: calls.append(1) or inner(*a, **k))
    got_lp, got_ent = _fused_path(model, ids, temperature, monkeypatch)
    assert calls == [1]                                        # sharpo's kernel ran
    assert got_lp.dtype == torch.float32 and got_lp.shape == want_lp.shape == (3, 29)
    torch.testing.assert_close(got_lp, want_lp, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_ent, want_ent, rtol=1e-5, atol=1e-6)
    g = torch.randn(3, 29, generator=torch.Generator().manual_seed(3))
    ((want_lp * g).sum() + 0.1 * want_ent.sum()).backward()
    ((got_lp * g).sum() + 0.1 * got_ent.sum()).backward()
    for (name, p), (_, q) in zip(twin.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_bf16_within_stated_tolerance(monkeypatch):
    import sharpo_train.integrations.verl  # noqa: F401

    model = _model(False, torch.bfloat16)
    twin = copy.deepcopy(model)
    ids = torch.randint(0, 1031, (2, 33), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        want_lp, want_ent = _engine_path(twin, ids, 1.0)
        got_lp, got_ent = _fused_path(model, ids, 1.0, monkeypatch)
    assert got_ent.dtype == torch.bfloat16                     # verl's: entropy in hidden's dtype
    torch.testing.assert_close(got_lp, want_lp, rtol=0, atol=2e-2)
    torch.testing.assert_close(got_ent.float(), want_ent, rtol=0, atol=3e-2)


def test_a_per_sample_temperature_is_refused_by_name():
    from sharpo_train.integrations.fused_verl import SharpoFusedLinearForPPO

    with pytest.raises(ValueError, match="temperature"):
        SharpoFusedLinearForPPO()(torch.randn(4, 8), torch.randn(11, 8), torch.zeros(4, dtype=torch.long),
                                  torch.ones(4))


def test_the_trainer_turns_verls_fused_kernels_on():
    from integrations.test_verl_construction import compose, construct

    assert compose().actor_rollout_ref.model.use_fused_kernels is False        # verl's default
    trainer = construct()
    cfg = trainer.config.actor_rollout_ref
    assert cfg.model.use_fused_kernels is True and cfg.actor.use_fused_kernels is True
    off = construct(["+algorithm.sharpo.fused_logprobs=false"]).config.actor_rollout_ref
    assert off.model.use_fused_kernels is False and off.actor.use_fused_kernels is False


@pytest.mark.parametrize("extra, error, match", [
    (["actor_rollout_ref.actor.use_fused_kernels=false"], ValueError, r"actor_rollout_ref\.actor\.use_fused_kernels"),
    (["+algorithm.sharpo.fused_logprobs=yes"], TypeError, r"algorithm\.sharpo\.fused_logprobs"),
])
def test_an_override_that_keeps_it_off_is_refused(extra, error, match):
    from integrations.test_verl_construction import construct

    with pytest.raises(error, match=match):
        construct(extra)
