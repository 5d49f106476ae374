"""verl 0.9.1's fused log-prob path with sharpo's kernel underneath (docs/integrations.md,
"verl: the fused log-prob path").

verl's actor scores log-probs through the full [N, V] logits unless
``actor_rollout_ref.model.use_fused_kernels`` is on. On, its FSDP engine patches the model's
forward (``verl.models.transformers.monkey_patch.patch_forward_with_backends``); with
``fused_kernel_options.impl_backend=torch`` (verl's default) that forward calls
``verl.utils.experimental.torch_functional.FusedLinearForPPO`` (looked up at each call) on the
backbone's hidden states and the head's weight, which recomputes [512, V] logit chunks in
fp32 with several [512, V] temporaries, forward and backward. ``install()`` (run by
``sharpo_train.integrations.verl.register``: on import, and in every Ray worker through the
documented ``worker_process_setup_hook``) puts ``SharpoFusedLinearForPPO`` in its place: the
same call and outputs, computed by ``sharpo_kernels.linear_logprobs``. verl's own plumbing
(padding removal, nested outputs, temperature, the entropy loss) is unchanged;
``impl_backend=triton`` (verl's GPU kernel) and ``liger`` are left to verl.

``SharpoTrainerMixin`` turns ``use_fused_kernels`` on at construction when
``algorithm.sharpo.fused_logprobs`` is true (the default) and checks that the actor will use
it (``engine_settings.fused_kernels_setup``).

verl-agent (its verl fork, commit 796ed31) has the same ``use_fused_kernels`` switch and
``FusedLinearForPPO``, but its ``patch_forward_with_backends`` imports
``verl.models.transformers.dense_common``, a module the fork does not ship, for every
text-only model, and without ``fused_kernel_options.impl_backend`` it leaves the forward
unpatched (then its actor reads ``output.log_probs`` from a plain logits output). ``install()``
therefore also wraps that function there: a text-only model with the torch backend gets the
fork's own ``verl.models.transformers.llama.forward_for_ppo`` (its generic pure-text PPO
forward, which calls ``FusedLinearForPPO``, i.e. sharpo's kernel); anything else goes to the
fork's function unchanged. The drop-in sets ``impl_backend=torch`` (engine_settings).
"""
from __future__ import annotations

import torch

from sharpo_kernels import linear_logprobs

_VERL_CLASS = None                       # verl's own FusedLinearForPPO, kept for liger


class SharpoFusedLinearForPPO(torch.nn.Module):
    """``FusedLinearForPPO(chunk_size=512, impl_backend="torch")``'s interface:
    ``forward(hidden_states [..., H], vocab_weights [V, H], input_ids [...], temperature)``
    -> (log_probs [...] fp32, entropy [...] in hidden's dtype), differentiable through both
    w.r.t. hidden and weight; ``chunk_size`` is unused (the kernel tiles itself)."""

    def __init__(self, chunk_size: int = 512, impl_backend: str = "torch"):
        super().__init__()
        if impl_backend not in ("torch", "liger"):
            raise ValueError(f"impl_backend: expected 'torch' or 'liger', got {impl_backend!r}")
        self.chunk_size = chunk_size
        self.impl_backend = impl_backend

    def forward(self, hidden_states, vocab_weights, input_ids, temperature=1.0):
        if self.impl_backend == "liger":
            return _VERL_CLASS(self.chunk_size, "liger")(hidden_states, vocab_weights, input_ids, temperature)
        if torch.is_tensor(temperature):
            if temperature.numel() != 1:
                raise ValueError("temperature: one value per call (verl's fused path has no per-sample "
                                 f"temperature), got shape {tuple(temperature.shape)}")
            temperature = temperature.item()
        weight = vocab_weights.to(hidden_states.dtype)
        logp, entropy = linear_logprobs(hidden_states, weight, input_ids.long(),
                                        temperature=float(temperature), return_entropy=True)
        return logp, entropy.to(hidden_states.dtype)


def install() -> bool:
    """Put ``SharpoFusedLinearForPPO`` in verl's ``torch_functional`` module (idempotent);
    -> whether verl's module was found."""
    global _VERL_CLASS
    try:
        from verl.utils.experimental import torch_functional
    except ImportError:                  # a verl without the fused path
        return False
    if torch_functional.FusedLinearForPPO is not SharpoFusedLinearForPPO:
        _VERL_CLASS = torch_functional.FusedLinearForPPO
        torch_functional.FusedLinearForPPO = SharpoFusedLinearForPPO
    _install_text_forward()
    return True


_VISION_TYPES = ("qwen2_5_vl", "qwen2_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v")


def _install_text_forward() -> bool:
    """verl-agent only (a verl without ``dense_common``): wrap its
    ``monkey_patch.patch_forward_with_backends`` so a text-only model on the torch backend
    gets the fork's ``llama.forward_for_ppo`` (idempotent); -> whether it wrapped."""
    import importlib.util

    try:
        from verl.models.transformers import monkey_patch
        if importlib.util.find_spec("verl.models.transformers.dense_common") is not None:
            return False                 # verl 0.9.1: its own text forward exists
        from verl.models.transformers.llama import forward_for_ppo
    except ImportError:
        return False
    original = monkey_patch.patch_forward_with_backends
    if getattr(original, "_sharpo_text_forward", False):
        return True

    def patch_forward_with_backends(model, use_fused_kernels=False, fused_kernels_backend=None):
        if use_fused_kernels and fused_kernels_backend == "torch" and \
                model.config.model_type not in _VISION_TYPES:
            model.__class__.forward = forward_for_ppo
            print(f"sharpo: fused torch forward (linear_logprobs) for {model.__class__.__name__}")
            return None
        return original(model, use_fused_kernels=use_fused_kernels, fused_kernels_backend=fused_kernels_backend)

    patch_forward_with_backends._sharpo_text_forward = True
    monkey_patch.patch_forward_with_backends = patch_forward_with_backends
    return True
