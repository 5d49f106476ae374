"""Update-phase cost on SmolLM2-135M-Instruct: forward+backward of policy_logprobs over
8 random rows, all layers vs model.trainable_layers=4 (benchmarks/RESULTS.md). Run:

    PYTHONPATH=$PWD python benchmarks/smollm2_update.py

Prints one JSON line (seconds, best of 2; trained parameter counts; load average).
"""
import json
import os
import time


def main() -> None:
    import torch

    from sharpo_train.models.policy import build_policy
    from sharpo_train.step.update import policy_logprobs

    torch.set_num_threads(2)
    rows, plen, rlen = 8, 256, 32
    g = torch.Generator().manual_seed(0)
    out = {"rows": rows, "prompt": plen, "response": rlen, "loadavg": os.getloadavg()[0]}
    for tl in (0, 4):
        torch.manual_seed(0)
        model, _ = build_policy({"path": "smollm2-135m-instruct", "trainable_layers": tl})
        prompts = [torch.randint(3, 49152, (plen,), generator=g).tolist() for _ in range(rows)]
        resp = [torch.randint(3, 49152, (rlen,), generator=g).tolist() for _ in range(rows)]
        times = []
        for _ in range(2):
            t = time.perf_counter()
            lp, _ = policy_logprobs(model, prompts, resp, rlen, autocast_bf16=False)
            lp.sum().backward()
            times.append(time.perf_counter() - t)
            model.zero_grad(set_to_none=True)
        out[f"fwd_bwd_s_trainable_layers_{tl}"] = min(times)
        out[f"trained_params_{tl}"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
