"""policy_loss: `linear_policy_loss`, the trainer's clipped GRPO/SHARPO surrogate fused with
linear_logprobs (docs/api.md "linear_policy_loss").

    api.py           public function, checks, dispatch, the autograd.Function (backward scales
                     the gradients the forward formed)
    token_terms.py   per-token loss (PPO-clip, k3 KL, entropy bonus) and its dL/dlogp, dL/dH
    fused_cpu.py     chunked rows on the CPU: 3 GEMMs a chunk (2 with a frozen head)
    fused_triton.py  the same on a GPU: cuBLAS products + token_logprobs' Triton kernels
"""
from .api import LinearPolicyLoss, PolicyLoss, linear_policy_loss
from .fused_cpu import FusedOptions

__all__ = ["linear_policy_loss", "PolicyLoss", "LinearPolicyLoss", "FusedOptions"]
