"""``HFEngine``: transformers ``generate`` on the training model (the default engine)."""
from __future__ import annotations

import torch

from ..models.device import autocast
from ..step.finite_logits import guarded_generate
from ..step.rollout import left_pad, sampling_kwargs
from .base import Generation, check_generate_args, cut_at_stop


class HFEngine:
    name = "hf"

    def __init__(self, model, tokenizer, *, batch_size: int = 64, autocast_bf16: bool = True):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.autocast_bf16 = batch_size, autocast_bf16

    @torch.no_grad()
    def generate(self, prompts, *, max_new_tokens, temperature, top_p=1.0, stop_ids=(),
                 seed=None) -> Generation:
        """Left-padded batches of KV-cached ``generate``; the log-prob of each sampled
        token is read from the step's logits: log_softmax(logits / T) (greedy: T = 1)."""

        check_generate_args(prompts, max_new_tokens, temperature, top_p)
        model, pad = self.model, self.tokenizer.pad_token_id
        stops = list(stop_ids)
        device = next(model.parameters()).device
        if seed is not None:
            torch.manual_seed(seed)
        ids_out, lps_out = [], []
        was_training = model.training
        model.eval()
        try:
            for lo in range(0, len(prompts), self.batch_size):
                chunk = prompts[lo:lo + self.batch_size]
                ids, mask = left_pad(chunk, pad)
                width = ids.shape[1]
                kwargs = sampling_kwargs(stops, pad, max_new_tokens, temperature, top_p)
                with autocast(device, self.autocast_bf16):
                    out = guarded_generate(model, input_ids=ids.to(device),   # NaN/inf logits:
                                           attention_mask=mask.to(device),    # an error
                                           output_logits=True, return_dict_in_generate=True,
                                           **kwargs)
                new = out.sequences[:, width:]                             # [b, n]
                t = temperature if temperature > 0 else 1.0
                lp = torch.stack([                                          # [b, n], per step
                    torch.log_softmax(step.float() / t, -1).gather(-1, new[:, k:k + 1]).squeeze(-1)
                    for k, step in enumerate(out.logits)], 1).cpu()         # step: [b, V]
                new = new.cpu()
                for b in range(len(chunk)):
                    row = new[b].tolist()
                    n = cut_at_stop(row, set(stops))
                    ids_out.append(row[:n])
                    lps_out.append(lp[b, :n].tolist())
        finally:
            model.train(was_training)
        return Generation(ids_out, lps_out)

    def sync_weights(self, model) -> None:
        self.model = model            # generates with the training model itself

    def close(self) -> None:
        pass
