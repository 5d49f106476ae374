"""The log-prob head of each engine against sharpo's fused path, on SmolLM2-135M-Instruct's
head (V=49152, H=576, tied embeddings, fp32) on the CPU: the extra peak memory and time of
one teacher scoring pass (no grad) and one student forward+backward (grad to the hidden
states and the head's weight), T tokens in one row, every token scored. Each case runs in a
fresh process (benchmarks/_memory.py: peak RSS above the RSS before the pass).

The weight is the model's own; the hidden states are its final RMSNorm applied to standard
normal [T, H] inputs (the head's input scale; the values do not change the memory or the
work of any path, and running the backbone at T=4096 would dominate the setup time). The
pass measured is the head's: what the drop-ins change (the backbone is the same code on
both paths, and so is its memory). Paths:

    trl    engine  TRL 1.16's fused head (``ChunkedLogProbFunction``, as ``add_fused_lm_head``
                   calls it on a CPU: every position, log-probs and entropy)
           sharpo  ``linear_logprobs`` (sharpo_train/integrations/fused_head.py; entropy on
                   the student pass, as TRL's loss pass asks for it)
    verl   engine  verl 0.9.1 without fused kernels: the full logits, then
                   ``logprobs_from_logits`` (teacher), + ``entropy_from_logits`` (student)
           verl    verl's own ``use_fused_kernels`` torch path (``FusedLinearForPPO``)
           sharpo  ``linear_logprobs`` under verl's fused path (``fused_verl.py``)

Run (TRL in the main venv, verl in .venv-verl), one JSON line per case:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/engine_heads.py trl [T ...]
    PYTHONPATH=$PWD .venv-verl/bin/python benchmarks/engine_heads.py verl [T ...]

T defaults to 2048 4096. Results: benchmarks/results/engine_heads.md. With ``--time``: no
memory, the time of each path against the engine path in one process, interleaved
(engine, then each fused path, ``--rounds`` times), one JSON line per (T, pass) with the
per-round ratios.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inputs import Parser, positive_int  # noqa: E402

PATHS = {"trl": ("engine", "sharpo"), "verl": ("engine", "verl", "sharpo")}
PASSES = ("teacher", "student")


def parse(argv=None):
    """ENGINE [T ...] [--threads N]."""
    ap = Parser(prog="engine_heads.py")
    ap.add_argument("engine", choices=sorted(PATHS))
    ap.add_argument("tokens", nargs="*", type=positive_int, default=[2048, 4096])
    ap.add_argument("--threads", type=positive_int, default=1)
    ap.add_argument("--time", action="store_true", help="interleaved timing instead of memory")
    ap.add_argument("--rounds", type=positive_int, default=3)
    return ap.parse_args(argv)


def time_pairs(engine: str, T: int, pass_: str, threads: int, rounds: int) -> dict:
    """Seconds of each path, interleaved in this process; ratios = path / engine per round."""
    import time

    inputs = make_inputs(T, engine, "engine", pass_, threads)
    secs = {p: [] for p in PATHS[engine]}
    for _ in range(rounds):
        for path in PATHS[engine]:
            inputs["path"] = path
            t = time.perf_counter()
            run_case(inputs)
            secs[path].append(round(time.perf_counter() - t, 3))
    ratios = {p: [round(a / b, 3) for a, b in zip(secs[p], secs["engine"])] for p in PATHS[engine] if p != "engine"}
    return {"engine": engine, "T": T, "pass": pass_, "seconds": secs, "ratio_to_engine": ratios,
            "threads": threads, "loadavg": round(os.getloadavg()[0], 2)}


def make_inputs(T: int, engine: str, path: str, pass_: str, threads: int = 1):
    """SmolLM2's head weight [V, H] and hidden states [T, H] at its final norm's scale (fp32)."""
    import torch

    from sharpo_train.models.policy import build_policy

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, _ = build_policy({"path": "smollm2-135m-instruct"})
    model.eval()
    ids = torch.randint(0, model.config.vocab_size, (1, T + 1))
    with torch.no_grad():
        hidden = model.model.norm(torch.randn(T, model.config.hidden_size)).contiguous()
    weight = model.get_output_embeddings().weight.detach().clone()
    del model
    grad = pass_ == "student"
    return {"hidden": hidden.requires_grad_(grad), "weight": weight.requires_grad_(grad),
            "labels": ids[0, 1:].clone(), "engine": engine, "path": path, "pass": pass_}


def _trl_engine(h, w, y, entropy):
    from trl.kernels import ChunkedLogProbFunction

    from trl.trainer.utils import _CHUNKED_LOGPROB_CHUNK_SIZE

    out = ChunkedLogProbFunction.apply(h, w, None, y, 1.0, _CHUNKED_LOGPROB_CHUNK_SIZE, None, 1.0,
                                       ("log_probs", "entropy"))
    return out[0], out[1]


def _verl_engine(h, w, y, entropy):
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    logits = h @ w.t()
    return logprobs_from_logits(logits, y), (entropy_from_logits(logits) if entropy else None)


def _verl_fused(h, w, y, entropy):
    from verl.utils.experimental.torch_functional import FusedLinearForPPO

    return FusedLinearForPPO()(h, w, y, 1.0)


def _sharpo(h, w, y, entropy):
    from sharpo_kernels import linear_logprobs

    out = linear_logprobs(h, w, y, return_entropy=entropy)
    return out if entropy else (out, None)


def run_case(inputs):
    """One pass; returns the bytes of what it must keep (log-probs, gradients)."""
    import torch

    fn = {("trl", "engine"): _trl_engine, ("trl", "sharpo"): _sharpo, ("verl", "engine"): _verl_engine,
          ("verl", "verl"): _verl_fused, ("verl", "sharpo"): _sharpo}[inputs["engine"], inputs["path"]]
    h, w, y = inputs["hidden"], inputs["weight"], inputs["labels"]
    h.grad = w.grad = None                # the warm-up's gradients: counted again
    if inputs["pass"] == "teacher":
        with torch.no_grad():
            logp, _ = fn(h, w, y, False)
        return logp.numel() * 4
    logp, _ = fn(h, w, y, True)
    (-logp.sum()).backward()
    return (logp.numel() + h.numel() + w.numel()) * 4


def main(argv=None) -> None:
    from _memory import peak_rss_subprocess

    args = parse(argv)
    if args.time:
        for T in args.tokens:
            for pass_ in PASSES:
                print(json.dumps(time_pairs(args.engine, T, pass_, args.threads, args.rounds)), flush=True)
        return
    for T in args.tokens:
        for pass_ in PASSES:
            for path in PATHS[args.engine]:
                kw = {"T": T, "engine": args.engine, "path": path, "pass_": pass_, "threads": args.threads}
                res = peak_rss_subprocess(__file__, "make_inputs", "run_case", kw)
                print(json.dumps({"engine": args.engine, "path": path, "pass": pass_, "T": T,
                                  "extra_MiB": round(res.extra_bytes / 2**20, 1),
                                  "working_MiB": round(res.working_bytes / 2**20, 1),
                                  "seconds": round(res.seconds, 3), "threads": args.threads,
                                  "loadavg": round(os.getloadavg()[0], 2), "method": res.method}), flush=True)


if __name__ == "__main__":
    main()
