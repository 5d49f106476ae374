"""The RL rows of benchmarks/gpu.py (issue 45, item 5): the lm_head's log-probs as RL training
uses them, each timed forward + backward with a random per-token upstream gradient (not the
uniform one of `logp.sum()`), next to Liger-Kernel and Cut Cross-Entropy in the same process.

Suites (one input set each; bf16; the same rows at every shape):

    rl logprobs   random inputs; backward of logp with a per-token gradient g:
                  trainable head, frozen head (weight.requires_grad False: whatever
                  linear_logprobs does then), entropy on (g . logp + g2 . entropy), bias;
                  naive torch for each, Liger's fused linear cross-entropy with
                  reduction="none" (its per-token path), Cut Cross-Entropy with
                  reduction="none" and its filter off (exact)
    rl peaked     real-model-like logits (`peaked_inputs`: a Zipf frequency prior shared by
                  every row plus per-row noise, labels sampled from the softmax), the case
                  Cut Cross-Entropy's gradient filter relies on: sharpo exact and with
                  grad_filter=2^-12 (CCE's bf16 threshold), naive, Liger, CCE with
                  filter_eps="high" (its default) and None
    rl policy loss  the trainer's PPO-clip loss (sharpo_train/step/losses.py) on per-token
                  advantages, a scalar: unfused (naive torch or sharpo linear_logprobs, then
                  the loss), fused (sharpo linear_policy_loss), each with a trainable and a
                  frozen head, with the entropy bonus; Liger's fused GRPO loss (loss_type
                  "dapo", its per-sequence advantages: T = 256 tokens a sequence)

A competitor that is not installed gets a row whose note says "not installed". Wheels:
`make gpu-wheels` (pip download --no-deps liger-kernel==0.8.5 cut-cross-entropy==25.1.1
-d benchmarks/wheels); benchmarks/gpu_session.sh installs them with --no-index.

`rl_cases` builds every case as a plain callable on any device (the tests run them on CPU
tensors at a tiny shape, the sharpo rows through the Triton interpreter); `run_rl_timings`
times them on the GPU, within a time budget (rows past it get a "skipped" note).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional

SEQ_LEN = 256             # Liger GRPO's [B, T] layout: T tokens a sequence
PEAK_ZIPF, PEAK_NOISE = 1.5, 3.0
LIGER = "liger-kernel 0.8.5"
CCE = "cut-cross-entropy 25.1.1"


@dataclass
class RLCase:
    """suite, impl: the table's row; fn: one forward + backward, None when not runnable;
    note: why not ("not installed: ..."), or what is special about the row; leaves: the
    tensors whose .grad fn fills (cleared after timing, so rows do not pile up gradients)."""
    suite: str
    impl: str
    fn: Optional[Callable[[], None]]
    note: str = ""
    leaves: tuple = ()

    def release(self) -> None:
        for t in self.leaves:
            if t is not None:
                t.grad = None


# ---------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------

def random_inputs(n: int, h: int, v: int, dtype, device, seed: int = 1) -> dict:
    """hidden [n, h], weight [v, h] (logits of std ~ 1.9, as gpu.py's other linear rows),
    bias [v], labels [n], per-token g, g2 [n], and the loss inputs (advantages, old log-probs
    near the current ones, token-mean weights) [n]."""
    import torch
    gen = torch.Generator(device=device).manual_seed(seed)
    hid = torch.randn(n, h, device=device, generator=gen).to(dtype)
    w = (torch.randn(v, h, device=device, generator=gen) * 0.03).to(dtype)
    y = torch.randint(0, v, (n,), device=device, generator=gen)
    return _finish(hid, w, y, gen, dtype)


def peaked_inputs(n: int, h: int, v: int, dtype, device, seed: int = 2,
                  zipf: float = PEAK_ZIPF, noise: float = PEAK_NOISE) -> dict:
    """As `random_inputs`, with logits like a language model's: z_iv = prior_v + noise_iv,
    prior_v = -zipf ln(1 + rank_v) (one random frequency ranking of the vocabulary, carried
    by hidden[:, 0] = 4 and weight[:, 0] = prior / 4), noise ~ N(0, noise^2) from the other
    coordinates; labels sampled from softmax(z) (RL scores its own samples). At V=151936:
    mean entropy ~2.8 nats, median p(label) ~0.2, 99.9% of the probabilities below 2^-12."""
    import torch
    gen = torch.Generator(device=device).manual_seed(seed)
    hid = torch.randn(n, h, device=device, generator=gen)
    w = torch.randn(v, h, device=device, generator=gen) * (noise / math.sqrt(max(h - 1, 1)))
    rank = torch.randperm(v, device=device, generator=gen).float()
    anchor = 4.0
    hid[:, 0] = anchor
    w[:, 0] = -zipf * torch.log1p(rank) / anchor
    hid, w = hid.to(dtype), w.to(dtype)
    y = torch.empty(n, dtype=torch.long, device=device)
    step = max(1, (1 << 28) // (4 * v))                  # rows per 256 MiB of fp32 logits
    wf = w.float()
    for r0 in range(0, n, step):
        p = torch.softmax(hid[r0:r0 + step].float() @ wf.t(), -1)
        y[r0:r0 + step] = torch.multinomial(p, 1, generator=gen).squeeze(1)
    return _finish(hid, w, y, gen, dtype)


def _finish(hid, w, y, gen, dtype) -> dict:
    import torch
    n, v, dev = hid.shape[0], w.shape[0], hid.device
    return dict(
        hidden=hid, weight=w, labels=y,
        bias=torch.randn(v, device=dev, generator=gen).to(dtype),
        g=torch.randn(n, device=dev, generator=gen), g2=torch.randn(n, device=dev, generator=gen),
        adv=torch.randn(n, device=dev, generator=gen),
        old_shift=0.1 * torch.randn(n, device=dev, generator=gen),
        weights=torch.full((n,), 1.0 / n, device=dev))


def logit_stats(inputs: dict, rows: int = 256) -> dict:
    """Of the first `rows` rows: mean entropy (nats), median p(label), share of the
    probabilities below 2^-12 (what a bf16 gradient filter can skip): the peakedness the
    report prints next to the filter rows."""
    import torch
    hid, w, y = inputs["hidden"][:rows].float(), inputs["weight"].float(), inputs["labels"][:rows]
    p = torch.softmax(hid @ w.t(), -1)
    ent = -(p * p.clamp_min(1e-30).log()).sum(-1)
    return dict(entropy=ent.mean().item(), p_label=p.gather(1, y[:, None]).median().item(),
                below=(p < 2.0 ** -12).float().mean().item())


# ---------------------------------------------------------------------------------------
# implementations
# ---------------------------------------------------------------------------------------

def _naive_logp(h, w, y, b=None, entropy=False):
    import torch
    z = h @ w.t()
    if b is not None:
        z = z + b
    lsm = torch.log_softmax(z.float(), -1)
    lp = lsm.gather(1, y[:, None]).squeeze(1)
    if not entropy:
        return lp
    return lp, -(lsm.exp() * lsm).sum(-1)


def _liger_flce():
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
    except Exception as exc:  # not installed / not importable here
        return None, f"not installed ({LIGER}: {type(exc).__name__})"
    return (lambda h, w, y, b=None: -liger_fused_linear_cross_entropy(
        h, w, y, bias=b, reduction="none")), ""


def _cce(filter_eps):
    try:
        from cut_cross_entropy import linear_cross_entropy
    except Exception as exc:
        return None, f"not installed ({CCE}: {type(exc).__name__})"
    return (lambda h, w, y, b=None: -linear_cross_entropy(
        h, w, y, reduction="none", filter_eps=filter_eps)), ""


def _liger_grpo(clip_low, clip_high):
    try:
        from liger_kernel.chunked_loss import LigerFusedLinearGRPOLoss
    except Exception as exc:
        return None, f"not installed ({LIGER}: {type(exc).__name__})"
    return LigerFusedLinearGRPOLoss(beta=0.0, use_ref_model=False, epsilon_low=clip_low,
                                    epsilon_high=clip_high, loss_type="dapo"), ""


def _leaves(inputs, frozen: bool, bias: bool):
    h = inputs["hidden"].detach().requires_grad_()
    w = inputs["weight"].detach().requires_grad_(not frozen)
    b = inputs["bias"].detach().requires_grad_(not frozen) if bias else None
    return h, w, b


def _logprob_case(suite, impl, logp_fn, inputs, *, frozen=False, bias=False, entropy=False,
                  note=""):
    """Forward + backward of logp_fn(h, w, y, b) with the per-token gradient g (and g2 on
    the entropy when entropy=True); logp_fn None: an "not installed" row."""
    if logp_fn is None:
        return RLCase(suite, impl, None, note)
    h, w, b = _leaves(inputs, frozen, bias)
    y, g, g2 = inputs["labels"], inputs["g"], inputs["g2"]

    def fn():
        h.grad = w.grad = None
        if b is not None:
            b.grad = None
        out = logp_fn(h, w, y, b)
        if entropy:
            lp, ent = out
            (lp * g + ent * g2).sum().backward()
        else:
            out.backward(g.to(out.dtype))
    return RLCase(suite, impl, fn, note, (h, w, b))


def _loss_case(suite, impl, inputs, *, mode, frozen=False, entropy_coef=0.0,
               clip=(0.2, 0.28), backend="triton"):
    """The trainer's PPO-clip loss (token-mean weights) forward + backward. mode: "naive"
    or "sharpo" (log-probs, then sharpo_train's loss), "fused" (linear_policy_loss)."""
    import torch
    from sharpo_kernels import linear_logprobs, linear_policy_loss
    from sharpo_train.step.losses import aggregate, ppo_clip_loss
    h, w, _ = _leaves(inputs, frozen, False)
    y, adv, wts = inputs["labels"], inputs["adv"], inputs["weights"]
    with torch.no_grad():   # old log-probs near the current policy: some ratios clipped
        old = linear_logprobs(inputs["hidden"], inputs["weight"], y, backend=backend) \
            + inputs["old_shift"]

    def fn():
        h.grad = w.grad = None
        if mode == "fused":
            out = linear_policy_loss(h, w, y, adv, old, weights=wts, clip_low=clip[0],
                                     clip_high=clip[1], entropy_coef=entropy_coef,
                                     return_entropy=True, backend=backend)
            out.loss.backward()
            return
        if mode == "naive":
            lp, ent = _naive_logp(h, w, y, entropy=True)
        else:
            lp, ent = linear_logprobs(h, w, y, return_entropy=True, backend=backend,
                                      entropy_grad=bool(entropy_coef))     # as the trainer
        pg, _ = ppo_clip_loss(lp, old, adv, clip[0], clip[1])
        loss = aggregate(pg, wts)
        if entropy_coef:
            loss = loss - entropy_coef * aggregate(ent, wts)
        loss.backward()
    return RLCase(suite, impl, fn, "", (h, w))


def _liger_grpo_case(suite, inputs, clip=(0.2, 0.28)):
    import torch
    from sharpo_kernels import linear_logprobs
    loss_mod, note = _liger_grpo(*clip)
    impl = "liger GRPO loss (dapo)"
    n = inputs["hidden"].shape[0]
    if loss_mod is None:
        return RLCase(suite, impl, None, note)
    t = min(SEQ_LEN, n)
    bsz = n // t
    h, w, _ = _leaves(inputs, False, False)
    y = inputs["labels"][:bsz * t].view(bsz, t)
    mask = torch.ones(bsz, t, device=y.device, dtype=torch.long)
    adv = inputs["adv"][:bsz]
    with torch.no_grad():
        old = (linear_logprobs(inputs["hidden"], inputs["weight"], inputs["labels"])
               + inputs["old_shift"])[:bsz * t].view(bsz, t)

    def fn():
        h.grad = w.grad = None
        out = loss_mod(h[:bsz * t].view(bsz, t, -1), w, y, mask, adv,
                       old_per_token_logps=old)
        (out[0] if isinstance(out, tuple) else out).backward()
    return RLCase(suite, impl, fn, f"one advantage per sequence of {t} tokens (token-level "
                                   f"in sharpo)", (h, w))


def rl_cases(inputs_random: dict, inputs_peaked: dict, tag: str, backend: str = "triton"):
    """Every RL row at one shape (`tag` names it in the suite), as RLCase; sharpo's rows use
    `backend` (tests: "triton" on CPU tensors through the interpreter)."""
    from sharpo_kernels import linear_logprobs

    def sharpo(entropy=False, grad_filter=0.0):
        return lambda h, w, y, b=None: linear_logprobs(h, w, y, bias=b, backend=backend,
                                                       return_entropy=entropy,
                                                       grad_filter=grad_filter)
    liger, liger_note = _liger_flce()
    cce_exact, cce_note = _cce(None)
    cce_filter, _ = _cce("high")
    s = f"rl logprobs {tag}"
    cases = []
    for head, frozen in (("trainable head", False), ("frozen head", True)):
        cases += [
            _logprob_case(s, f"sharpo triton, {head}", sharpo(), inputs_random, frozen=frozen),
            _logprob_case(s, f"naive torch, {head}", _naive_logp, inputs_random, frozen=frozen),
            _logprob_case(s, f"liger fused linear CE none, {head}", liger, inputs_random,
                          frozen=frozen, note=liger_note),
            _logprob_case(s, f"cut cross-entropy none filter off, {head}", cce_exact,
                          inputs_random, frozen=frozen, note=cce_note)]
    cases += [
        _logprob_case(s, "sharpo triton, entropy on", sharpo(True), inputs_random, entropy=True),
        _logprob_case(s, "naive torch, entropy on",
                      lambda h, w, y, b=None: _naive_logp(h, w, y, entropy=True),
                      inputs_random, entropy=True),
        _logprob_case(s, "sharpo triton, bias", sharpo(), inputs_random, bias=True),
        _logprob_case(s, "naive torch, bias", _naive_logp, inputs_random, bias=True),
    ]
    s = f"rl peaked {tag}"
    cases += [
        _logprob_case(s, "sharpo triton", sharpo(), inputs_peaked),
        _logprob_case(s, "sharpo triton, grad_filter 2^-12", sharpo(grad_filter=2.0 ** -12),
                      inputs_peaked, note="approximate: skips blocks with every p <= 2^-12"),
        _logprob_case(s, "naive torch", _naive_logp, inputs_peaked),
        _logprob_case(s, "liger fused linear CE none", liger, inputs_peaked, note=liger_note),
        _logprob_case(s, "cut cross-entropy none filter off", cce_exact, inputs_peaked,
                      note=cce_note),
        _logprob_case(s, "cut cross-entropy none filter high", cce_filter, inputs_peaked,
                      note=cce_note or "approximate: skips tiles below bf16 resolution"),
    ]
    s = f"rl policy loss {tag}"
    for head, frozen in (("trainable head", False), ("frozen head", True)):
        cases += [
            _loss_case(s, f"sharpo fused linear_policy_loss, {head}", inputs_random,
                       mode="fused", frozen=frozen, backend=backend),
            _loss_case(s, f"sharpo linear_logprobs then loss, {head}", inputs_random,
                       mode="sharpo", frozen=frozen, backend=backend),
            _loss_case(s, f"naive torch then loss, {head}", inputs_random, mode="naive",
                       frozen=frozen, backend=backend)]
    cases += [
        _loss_case(s, "sharpo fused linear_policy_loss, entropy bonus", inputs_random,
                   mode="fused", entropy_coef=0.01, backend=backend),
        _loss_case(s, "sharpo linear_logprobs then loss, entropy bonus", inputs_random,
                   mode="sharpo", entropy_coef=0.01, backend=backend),
        _liger_grpo_case(s, inputs_random),
    ]
    return cases


class Stopped(Exception):
    """Raised by the SIGTERM handler `run_rl_timings` installs (gpu_session.sh's `timeout`):
    the rows timed so far are kept and the report is still written."""


def _stop(signum, frame):
    raise Stopped()


def run_rl_timings(shapes, deadline: float, bench, peak_extra, row_cls) -> tuple:
    """Times every RL case at each (n, h, v) of `shapes` on the GPU, bf16, until the
    `deadline` (time.time()); bench(fn, grads_to_none) -> ms and peak_extra(fn) -> bytes
    are gpu.py's. A SIGTERM (the session's time limit) ends the rows early with a note.
    Returns (rows [row_cls], notes [str]: the peaked inputs' statistics)."""
    import signal
    rows, notes = [], []
    before = signal.signal(signal.SIGTERM, _stop)
    try:
        _time_shapes(shapes, deadline, bench, peak_extra, row_cls, rows, notes)
    except Stopped:
        rows.append(row_cls("rl", "-", note="stopped: SIGTERM (time limit); rows above kept"))
    finally:
        signal.signal(signal.SIGTERM, before)
    return rows, notes


def _time_shapes(shapes, deadline, bench, peak_extra, row_cls, rows, notes) -> None:
    import torch
    dev = torch.device("cuda")
    for (n, h, v) in shapes:
        if time.time() > deadline:
            rows.append(row_cls(f"rl N={n} H={h} V={v}", "-", note="skipped: time budget"))
            continue
        rand = random_inputs(n, h, v, torch.bfloat16, dev)
        peak = peaked_inputs(n, h, v, torch.bfloat16, dev)
        st = logit_stats(peak)
        notes.append(f"rl peaked N={n} H={h} V={v}: mean entropy {st['entropy']:.2f} nats, "
                     f"median p(label) {st['p_label']:.3f}, {100 * st['below']:.2f}% of "
                     f"probabilities below 2^-12")
        for case in rl_cases(rand, peak, f"N={n} H={h} V={v} bf16"):
            row = row_cls(case.suite, case.impl, note=case.note)
            if case.fn is not None and time.time() > deadline:
                row.note = "skipped: time budget"
            elif case.fn is not None:
                try:
                    row.ms = bench(case.fn, None)
                    row.extra_bytes = peak_extra(case.fn)
                except Exception as exc:  # a competitor that fails is reported, not fatal
                    row.note = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
            case.release()
            rows.append(row)
            print(f"timed {case.suite} {case.impl}: {row.ms} ms {row.note}", flush=True)
            torch.cuda.empty_cache()
        del rand, peak
        torch.cuda.empty_cache()
