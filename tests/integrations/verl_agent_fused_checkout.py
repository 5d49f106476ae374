"""Run by tests/integrations/test_verl_agent.py::test_fused_logprobs_against_verl_agent_checkout
in a subprocess: ``python verl_agent_fused_checkout.py VERL_AGENT_SRC`` with PYTHONPATH = the
verl-agent tree, this repository and its tests/ folder (verl-agent brings its own ``verl``).

verl-agent's fused log-prob path with sharpo's kernel underneath (fused_verl.py,
docs/integrations.md "verl-agent"), against verl-agent's own code:
1. the drop-in's setup (verl_agent.check_config, which the patched RayPPOTrainer.__init__
   runs) on verl-agent's Hydra config turns ``use_fused_kernels`` on, sets the torch
   backend, and refuses by name an override that keeps it off or picks another backend;
   ``algorithm.sharpo.fused_logprobs=false`` leaves verl-agent's default (off);
2. ``register()`` (the workers' setup hook) puts SharpoFusedLinearForPPO in verl-agent's
   torch_functional; verl-agent's own ``apply_monkey_patch`` (as its FSDP worker calls it)
   then gives a tiny Qwen2 the fused forward, and sharpo's kernel runs;
3. per-token log-probs and entropy (and fp32 gradients) equal verl-agent's unfused path
   (full logits / temperature, its ``logprobs_from_logits`` and ``entropy_from_logits``) on
   the same batch: fp32 <= 1e-5 relative (atol 1e-6), bf16 within 2e-2 (log-probs) and 3e-2
   (entropy), the bf16 rounding of the logits on verl-agent's path.
Prints "verl-agent fused: OK" at the end.
"""
import copy
import sys
from pathlib import Path

import torch
from omegaconf import open_dict

V = 1031


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def compose_config(src: Path, overrides=()):
    from hydra import compose, initialize_config_dir

    base = ["algorithm.adv_estimator=sharpo", "data.max_prompt_length=256"]
    with initialize_config_dir(config_dir=str(src / "verl" / "trainer" / "config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=base + list(overrides))


def raises(fn, error, words):
    try:
        fn()
    except error as e:
        check(words in str(e), f"{error.__name__} without {words!r}: {e}")
        return
    raise AssertionError(f"no {error.__name__} naming {words}")


def check_setup(src: Path) -> None:
    from sharpo_train.integrations.verl_agent import check_config

    cfg = compose_config(src)
    check(cfg.actor_rollout_ref.model.use_fused_kernels is False, "verl-agent's default should be off")
    check_config(cfg)
    model, actor = cfg.actor_rollout_ref.model, cfg.actor_rollout_ref.actor
    # verl-agent's actor section has no use_fused_kernels: its FSDP worker copies the model's
    check(model.use_fused_kernels is True and actor.get("use_fused_kernels", True) is True,
          "fused kernels not turned on")
    check(model.fused_kernel_options.impl_backend == "torch", "backend not torch")
    off = compose_config(src, ["+algorithm.sharpo.fused_logprobs=false"])
    check_config(off)
    check(off.actor_rollout_ref.model.use_fused_kernels is False, "fused_logprobs=false turned them on")
    raises(lambda: check_config(compose_config(src, ["+actor_rollout_ref.actor.use_fused_kernels=false"])),
           ValueError, "actor_rollout_ref.actor.use_fused_kernels")
    bad = compose_config(src)
    with open_dict(bad):
        bad.actor_rollout_ref.model.fused_kernel_options = {"impl_backend": "triton"}
    raises(lambda: check_config(bad), ValueError, "fused_kernel_options.impl_backend")
    raises(lambda: check_config(compose_config(src, ["+algorithm.sharpo.fused_logprobs=yes"])),
           TypeError, "algorithm.sharpo.fused_logprobs")


def tiny(tied: bool, dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(4)
    cfg = Qwen2Config(vocab_size=V, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tied)
    return Qwen2ForCausalLM(cfg).to(dtype)


def engine_path(model, ids, temperature):
    """verl-agent without fused kernels: logits / temperature -> its log-prob and entropy
    functions, labels = the next token (rolled, as its fused forward scores them)."""
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    logits = model(input_ids=ids).logits.float() / temperature
    return logprobs_from_logits(logits, torch.roll(ids, -1, dims=-1)), entropy_from_logits(logits)


def fused_path(model, ids, temperature):
    """verl-agent's FSDP worker's patching (apply_monkey_patch, the torch backend), then its
    actor's fused call."""
    from verl.models.transformers.monkey_patch import apply_monkey_patch

    apply_monkey_patch(model, use_remove_padding=False, use_fused_kernels=True, fused_kernels_backend="torch")
    out = model(input_ids=ids, temperature=temperature, return_dict=True)
    return out.log_probs, out.entropy


def main(src: Path) -> None:
    import verl
    from transformers import Qwen2ForCausalLM

    check(Path(verl.__file__).resolve().is_relative_to(src), f"verl comes from {verl.__file__}, not {src}")
    check_setup(src)

    from verl.utils.experimental import torch_functional

    import sharpo_train.integrations.verl as integration
    from sharpo_train.integrations import fused_verl

    integration.register()
    check(torch_functional.FusedLinearForPPO is fused_verl.SharpoFusedLinearForPPO, "kernel not installed")
    calls = []
    inner = fused_verl.linear_logprobs
    fused_verl.linear_logprobs = lambda *a, **k: calls.append(1) or inner(*a, **k)
    unpatched = Qwen2ForCausalLM.forward
    worst = {}
    try:
        for tied, temperature in ((True, 1.0), (False, 0.7)):
            Qwen2ForCausalLM.forward = unpatched
            model = tiny(tied, torch.float32)
            twin = copy.deepcopy(model)
            ids = torch.randint(0, V, (3, 29), generator=torch.Generator().manual_seed(2))
            want_lp, want_ent = engine_path(twin, ids, temperature)
            n = len(calls)
            got_lp, got_ent = fused_path(model, ids, temperature)
            check(len(calls) == n + 1, "sharpo's kernel did not run")
            check(got_lp.dtype == torch.float32 and got_lp.shape == want_lp.shape == (3, 29), "log-prob shape")
            torch.testing.assert_close(got_lp, want_lp, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(got_ent, want_ent, rtol=1e-5, atol=1e-6)
            g = torch.randn(3, 29, generator=torch.Generator().manual_seed(3))
            ((want_lp * g).sum() + 0.1 * want_ent.sum()).backward()
            ((got_lp * g).sum() + 0.1 * got_ent.sum()).backward()
            for (name, p), (_, q) in zip(twin.named_parameters(), model.named_parameters()):
                torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)
            worst[f"fp32 tied={tied}"] = float((got_lp - want_lp).detach().abs().max())

        Qwen2ForCausalLM.forward = unpatched
        model = tiny(False, torch.bfloat16)
        twin = copy.deepcopy(model)
        ids = torch.randint(0, V, (2, 33), generator=torch.Generator().manual_seed(6))
        with torch.no_grad():
            want_lp, want_ent = engine_path(twin, ids, 1.0)
            got_lp, got_ent = fused_path(model, ids, 1.0)
        check(got_ent.dtype == torch.bfloat16, "entropy should be in hidden's dtype")
        torch.testing.assert_close(got_lp, want_lp, rtol=0, atol=2e-2)
        torch.testing.assert_close(got_ent.float(), want_ent, rtol=0, atol=3e-2)
        worst["bf16"] = float((got_lp - want_lp).abs().max())
    finally:
        Qwen2ForCausalLM.forward = unpatched
        fused_verl.linear_logprobs = inner
    print("verl-agent fused: OK", {k: f"{v:.2e}" for k, v in worst.items()})


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
