"""The optimizer: AdamW, with fp32 master weights (``MasterWeightAdamW``) when trained
parameters are held in bf16/fp16, so that small updates are not rounded away."""
from __future__ import annotations

from typing import Any

import torch

from . import setting as _get


class MasterWeightAdamW(torch.optim.AdamW):
    """AdamW on fp32 master copies of low-precision (bf16/fp16) parameters.

    AdamW keeps its states in the parameters' dtype and adds the step to them in that
    dtype: a bf16 weight of magnitude 0.02 has a spacing of ~1.2e-4, so a step of lr 1e-6
    is rounded away. Here the model's parameters only carry the forward/backward; the
    optimizer steps fp32 masters (and fp32 states) and copies them back, rounded, after
    every step, so small steps accumulate in the masters. ``state_dict`` includes the
    masters (a resumed run continues from them, not from the rounded weights).
    Memory per trained parameter: 2 (bf16 weight) + 2 (bf16 grad) + 4 (master) + 4 (fp32
    grad, during the step) + 8 (AdamW states) bytes.
    """

    def __init__(self, params, **kwargs):
        self.model_params = [p for p in params if p.requires_grad]
        if not self.model_params:
            raise ValueError("model: no parameter requires a gradient (nothing to train)")
        masters = [p.detach().float().clone().requires_grad_(True) for p in self.model_params]
        super().__init__(masters, **kwargs)

    @property
    def masters(self) -> list[torch.Tensor]:
        return self.param_groups[0]["params"]

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("closure: MasterWeightAdamW does not take a closure")
        for p, m in zip(self.model_params, self.masters):
            m.grad = None if p.grad is None else p.grad.float()
            p.grad = None                              # free the low-precision grad now
        super().step()
        for p, m in zip(self.model_params, self.masters):
            p.copy_(m)
            m.grad = None

    def zero_grad(self, set_to_none: bool = True):
        super().zero_grad(set_to_none)
        for p in self.model_params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def state_dict(self):
        """AdamW's state dict; each stepped parameter's entry also holds its fp32 master
        (``"master"``), so checkpoints that keep only ``state``/``param_groups`` carry it."""
        out = super().state_dict()
        for i, m in enumerate(self.masters):
            if out["state"].get(i):
                out["state"][i] = dict(out["state"][i], master=m.detach().clone())
        return out

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        with torch.no_grad():
            for p, m in zip(self.model_params, self.masters):
                saved = self.state.get(m, {}).pop("master", None)
                if saved is not None:
                    m.copy_(saved)
                    p.copy_(saved)


def build_optimizer(model, optim_cfg: Any = None) -> torch.optim.Optimizer:
    """AdamW over the parameters that require a gradient; fp32 master weights
    (``MasterWeightAdamW``) when any of them is held in a 16-bit dtype."""
    params = [p for p in model.parameters() if p.requires_grad]
    kwargs = dict(lr=float(_get(optim_cfg, "lr", 1e-6)),
                  betas=(float(_get(optim_cfg, "beta1", 0.9)), float(_get(optim_cfg, "beta2", 0.999))),
                  weight_decay=float(_get(optim_cfg, "weight_decay", 0.01)))
    if any(p.dtype in (torch.bfloat16, torch.float16) for p in params):
        return MasterWeightAdamW(params, **kwargs)
    return torch.optim.AdamW(params, **kwargs)
