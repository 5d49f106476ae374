"""Rollout engines on SmolLM2-135M-Instruct (CPU): HF generate vs vLLM, new tokens/s, the
weight sync after an update, and the sampled-vs-scored log-prob mismatch. Not collected
by pytest (a script): run it in the vLLM venv (`make venv-vllm`) after the named model is
in the cache (any `model.path=smollm2-135m-instruct` use builds it):

    PYTHONPATH=$PWD .venv-vllm/bin/python benchmarks/smollm2_engines.py [N_PROMPTS] [NEW_TOKENS]

Prints one JSON line. Numbers of this machine: benchmarks/RESULTS.md.
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inputs import Parser, positive_int  # noqa: E402


def parse(argv=None):
    """[N_PROMPTS] [NEW_TOKENS]: positive integers (benchmarks/_inputs.py)."""
    ap = Parser(prog="smollm2_engines.py")
    ap.add_argument("n_prompts", nargs="?", type=positive_int, default=16)
    ap.add_argument("new_tokens", nargs="?", type=positive_int, default=32)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse(argv)
    import torch

    from sharpo_train.generation.hf import HFEngine
    from sharpo_train.generation.vllm_engine import VLLMEngine
    from sharpo_train.models.policy import build_policy
    from sharpo_train.step.rollout import chat_prompt_ids
    from sharpo_train.step.scoring import tree_logprobs

    n, new = args.n_prompts, args.new_tokens
    torch.manual_seed(0)
    t = time.perf_counter()
    model, tok = build_policy({"path": "smollm2-135m-instruct"})
    res = {"load_s": time.perf_counter() - t, "prompts": n, "new_tokens": new,
           "threads": torch.get_num_threads(), "loadavg": os.getloadavg()[0]}
    rooms = ["kitchen", "bedroom", "bathroom", "living room"]
    prompts = [chat_prompt_ids(tok, f"You are in the {rooms[i % 4]}. Looking quickly around you, "
                                    f"you see a cabinet {i}, a countertop {i + 1}, a drawer "
                                    f"{i + 2} and a fridge 1. Your task is to: put a clean mug "
                                    f"in the coffeemachine. Reply <think>...</think>"
                                    f"<action>...</action>.")
               for i in range(n)]
    res["prompt_tokens_mean"] = sum(map(len, prompts)) / n
    stops = [tok.eos_token_id]
    hf = HFEngine(model, tok, batch_size=n, autocast_bf16=False)
    t = time.perf_counter()
    out = hf.generate(prompts, max_new_tokens=new, temperature=1.0, stop_ids=stops, seed=0)
    dt = time.perf_counter() - t
    res.update(hf_s=dt, hf_new_tok_per_s=sum(map(len, out.token_ids)) / dt)
    t = time.perf_counter()
    eng = VLLMEngine(model, tok, model_path=None, max_model_len=1024, seed=0, cpu_kv_cache_gb=1)
    res["vllm_start_s"] = time.perf_counter() - t
    eng.generate(prompts[:2], max_new_tokens=4, temperature=1.0, stop_ids=stops, seed=0)  # warm
    t = time.perf_counter()
    out = eng.generate(prompts, max_new_tokens=new, temperature=1.0, stop_ids=stops, seed=0)
    dt = time.perf_counter() - t
    res.update(vllm_s=dt, vllm_new_tok_per_s=sum(map(len, out.token_ids)) / dt)
    with torch.no_grad():
        scored = tree_logprobs(model, [p + r for p, r in zip(prompts, out.token_ids)],
                               [len(r) for r in out.token_ids], autocast_bf16=False)
    d = torch.cat([s - torch.tensor(lp) for s, lp in zip(scored, out.logprobs)])
    res.update(logp_mismatch_mean_abs=float(d.abs().mean()), logp_mismatch_max_abs=float(d.abs().max()))
    t = time.perf_counter()
    eng.sync_weights(model)
    res["vllm_sync_s"] = time.perf_counter() - t
    eng.close()
    print(json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in res.items()}))


if __name__ == "__main__":
    main()
