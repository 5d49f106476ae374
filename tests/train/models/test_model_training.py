"""What trains and how it steps (sharpo_train/models/policy.py, optimizer.py): ``model.trainable_layers`` and
fp32 master weights for 16-bit parameters (``build_optimizer`` / ``MasterWeightAdamW``).
Tiny random models: seconds on CPU."""
import copy

import pytest
import torch

from sharpo_train.models.optimizer import MasterWeightAdamW, build_optimizer

from sharpo_train.models.policy import build_policy, configure_trainable, decoder_layers
from sharpo_train.step.update import policy_logprobs

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 3, "num_heads": 4,
        "num_kv_heads": 2}


def _tiny(**extra):
    torch.manual_seed(0)
    return build_policy({**TINY, **extra})


def _rows(vocab: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (5, 9, 7)]
    responses = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (4, 2, 6)]
    return prompts, responses


def _loss(model, seed: int = 1):
    prompts, responses = _rows(model.config.vocab_size, seed)
    logp, _ = policy_logprobs(model, prompts, responses, 6, autocast_bf16=False)
    return -logp.sum()


def test_trainable_layers_freezes_all_but_the_top():
    model, _ = _tiny(trainable_layers=1)
    layers = decoder_layers(model)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(n.startswith(("model.layers.2.", "model.norm.")) for n in trained)
    assert {"model.layers.2." + n for n, _ in layers[2].named_parameters()} | \
        {"model.norm.weight"} == trained
    # tied lm_head == embedding: frozen, so nothing below layer 2 needs a gradient
    assert not model.get_input_embeddings().weight.requires_grad
    _loss(model).backward()
    for n, p in model.named_parameters():
        assert (p.grad is not None) == p.requires_grad, n
    # the gradient of the top layer equals the one of the all-trainable model
    full, _ = _tiny()
    _loss(full).backward()
    torch.testing.assert_close(layers[2].mlp.down_proj.weight.grad,
                               decoder_layers(full)[2].mlp.down_proj.weight.grad)


def test_trainable_layers_records_no_graph_below_the_top():
    """The frozen layers run as under no_grad: their outputs carry no autograd graph."""
    model, _ = _tiny(trainable_layers=1)
    seen = {}
    layers = decoder_layers(model)
    layers[1].register_forward_hook(lambda m, i, o: seen.__setitem__(1, o))
    layers[2].register_forward_hook(lambda m, i, o: seen.__setitem__(2, o))
    _loss(model)
    out1 = seen[1][0] if isinstance(seen[1], tuple) else seen[1]
    out2 = seen[2][0] if isinstance(seen[2], tuple) else seen[2]
    assert not out1.requires_grad and out2.requires_grad


def test_trainable_layers_bad_values():
    with pytest.raises(ValueError, match="model.trainable_layers"):
        _tiny(trainable_layers=4)


def test_untied_head_trains_with_the_top_layers():
    model, _ = _tiny(trainable_layers=1, tie_word_embeddings=False)
    assert model.get_output_embeddings().weight.requires_grad
    assert not model.get_input_embeddings().weight.requires_grad


# ------------------------------------------------------------------ fp32 master weights

def _train(model, optimizer, steps: int):
    for k in range(steps):
        optimizer.zero_grad(set_to_none=True)
        _loss(model, seed=k).backward()
        optimizer.step()


def _moves(before: dict, after: dict) -> dict:
    return {n: (after[n].float() - before[n].float()) for n in before}


@pytest.mark.parametrize("steps", [3])
def test_bf16_model_at_lr_1e6_moves_like_the_fp32_run(steps):
    """AdamW on bf16 parameters rounds a 1e-6 step away (most weights do not move); with
    fp32 masters the bf16 model's weights follow the fp32 run's (the masters move by the
    same amounts, and the rounded bf16 weights are the rounded masters)."""
    lr = 1e-6
    fp32, _ = _tiny()
    bf16 = copy.deepcopy(fp32).to(torch.bfloat16)
    old = copy.deepcopy(bf16)
    start32 = {n: p.detach().clone() for n, p in fp32.named_parameters()}
    start16 = {n: p.detach().clone() for n, p in bf16.named_parameters()}

    opt32 = build_optimizer(fp32, {"lr": lr, "weight_decay": 0.0})
    assert type(opt32) is torch.optim.AdamW
    _train(fp32, opt32, steps)
    opt16 = build_optimizer(bf16, {"lr": lr, "weight_decay": 0.0})
    assert isinstance(opt16, MasterWeightAdamW)
    _train(bf16, opt16, steps)

    d32 = _moves(start32, {n: p.detach() for n, p in fp32.named_parameters()})
    masters = dict(zip([n for n, p in bf16.named_parameters() if p.requires_grad], opt16.masters))
    d16 = _moves({n: start16[n] for n in masters}, masters)
    ref = torch.cat([d32[n].flatten() for n in masters])
    got = torch.cat([d16[n].flatten() for n in masters])
    moved = ref.abs() > 0.5 * lr
    assert moved.float().mean() > 0.5                       # the fp32 run moves most weights
    # Adam steps are ~lr * sign(grad): bf16 forward/backward changes the gradient a little,
    # so compare per weight with a loose tolerance and in aggregate tightly
    assert ((got - ref).abs() <= 0.5 * lr * steps).float().mean() > 0.9
    assert (got - ref).norm() < 0.2 * ref.norm()
    # the bf16 weights are the masters rounded to bf16
    for n, p in bf16.named_parameters():
        if n in masters:
            assert torch.equal(p.detach(), masters[n].to(torch.bfloat16)), n

    # the old path: plain AdamW on bf16 parameters leaves (nearly) every weight where it was
    opt_old = torch.optim.AdamW([p for p in old.parameters()], lr=lr, weight_decay=0.0)
    _train(old, opt_old, steps)
    d_old = torch.cat([(p.detach().float() - start16[n].float()).flatten()
                       for n, p in old.named_parameters() if n in masters])
    assert (d_old != 0).float().mean() < 0.2
    assert (d_old - ref).norm() > 0.5 * ref.norm()


def test_master_weight_state_dict_round_trip():
    model, _ = _tiny(dtype="bfloat16")
    opt = build_optimizer(model, {"lr": 1e-3})
    _train(model, opt, 2)
    state = copy.deepcopy(opt.state_dict())
    other, _ = _tiny(dtype="bfloat16")
    opt2 = build_optimizer(other, {"lr": 1e-3})
    opt2.load_state_dict(state)
    for a, b in zip(opt.masters, opt2.masters):
        assert torch.equal(a, b) and a.dtype == torch.float32
    for a, b in zip(model.parameters(), other.parameters()):
        assert torch.equal(a, b)
    _train(model, opt, 1)
    _train(other, opt2, 1)
    for a, b in zip(model.parameters(), other.parameters()):
        assert torch.equal(a, b)


def test_master_weights_refuse_a_model_with_nothing_to_train():
    model, _ = _tiny(dtype="bfloat16")
    model.requires_grad_(False)
    with pytest.raises(ValueError, match="model"):
        MasterWeightAdamW(list(model.parameters()), lr=1e-3)


def test_configure_trainable_default_trains_everything():
    model, _ = _tiny()
    configure_trainable(model, {})
    assert all(p.requires_grad for p in model.parameters())


def test_master_weights_survive_a_checkpoint(tmp_path):
    """The masters travel in the optimizer state of a run checkpoint (checkpoint.py):
    a restored optimizer continues from them, not from the rounded bf16 weights."""
    from sharpo_train.runs.checkpoint import load_state, restore_optimizer, save_checkpoint

    fp32, tok = _tiny()
    fp32.save_pretrained(tmp_path / "init")        # both runs load bf16 weights from disk
    model, _ = build_policy({**TINY, "dtype": "bfloat16"}, weights_from=tmp_path / "init")
    opt = build_optimizer(model, {"lr": 1e-6})
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    _train(model, opt, 2)
    assert any(not torch.equal(m.to(torch.bfloat16).float(), m) for m in opt.masters)
    path = save_checkpoint(tmp_path / "run", 2, model, tok, opt, sched, {"step": 2})
    other, _ = build_policy({**TINY, "dtype": "bfloat16"}, weights_from=path / "policy")
    opt2 = build_optimizer(other, {"lr": 1e-6})
    restore_optimizer(opt2, load_state(path)["optimizer"])
    for a, b in zip(opt.masters, opt2.masters):
        assert torch.equal(a, b)
    _train(model, opt, 1)
    _train(other, opt2, 1)
    for a, b in zip(opt.masters, opt2.masters):
        assert torch.equal(a, b)
