"""The policy update: the registered policy loss (``loss.policy_loss``, default PPO-clip,
losses.py) on per-token advantages with micro-batched gradient accumulation (independent
of the credit method; verl's actor update, in a few functions).

``policy_logprobs`` runs the decoder body on ``prompt | response`` rows (right-padded, so
no attention mask is needed for a causal model) and scores only the response positions
with ``sharpo_kernels.linear_logprobs`` against the lm_head (differentiable; entropy too).
With ``loss.fused`` the update step instead hands the hidden states to
``sharpo_kernels.linear_policy_loss`` (``fused_policy_loss``), which returns the micro-batch's
whole PPO-clip + KL + entropy loss with its gradients formed in the forward.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from .losses import AUX_LOSSES, POLICY_LOSSES, aggregate, kl_low_var, token_weights
from ..models.policy import split_lm
from ..models.device import autocast
from .scoring import tree_logprobs


def policy_logprobs(model, prompt_ids: list[list[int]], response_ids: list[list[int]], width: int,
                    *, temperature: float = 1.0, autocast_bf16: bool = True,
                    with_entropy: bool = True, shared_prefix: Optional[dict] = None,
                    entropy_grad: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (logp [b, width], entropy [b, width]) fp32 on the model's device, 0 at padding.
    Gradients flow to the model (to the entropy only with ``entropy_grad``: without it, a
    frozen lm_head, as under LoRA, takes linear_logprobs' two-matmul path). ``shared_prefix`` (tree_logprobs options): run prompts
    that rows share once (the same gradient; rows of a micro-batch with one prompt)."""
    from sharpo_kernels import linear_logprobs

    if shared_prefix is not None:
        seqs = [p + r for p, r in zip(prompt_ids, response_ids)]
        logps, ents = tree_logprobs(model, seqs, [len(r) for r in response_ids],
                                    temperature=temperature, autocast_bf16=autocast_bf16,
                                    return_entropy=True, entropy_grad=entropy_grad,
                                    **shared_prefix)
        lp = torch.stack([torch.nn.functional.pad(x, (0, width - x.numel())) for x in logps])
        en = torch.stack([torch.nn.functional.pad(x, (0, width - x.numel())) for x in ents])
        return lp, en

    h, weight, bias, labels, rows_t, dst_t = response_hidden(model, prompt_ids, response_ids,
                                                             autocast_bf16)
    # check_finite=False: the trainer checks the loss
    out = linear_logprobs(h, weight, labels, bias=bias, temperature=temperature,
                          return_entropy=with_entropy, check_finite=False,
                          entropy_grad=entropy_grad)
    logp, ent = out if with_entropy else (out, torch.zeros_like(out))
    shape = (len(prompt_ids), width)
    return _scatter_rows(logp, rows_t, dst_t, shape), _scatter_rows(ent, rows_t, dst_t, shape)


def response_hidden(model, prompt_ids: list[list[int]], response_ids: list[list[int]],
                    autocast_bf16: bool = True):
    """The decoder body on ``prompt | response`` rows (right-padded) -> (h [N, H] the hidden
    states that predict the N response tokens, in the lm_head's dtype; weight [V, H]; bias
    [V] or None; labels [N]; rows_t, dst_t [N]: each token's row and response position)."""
    body, weight, bias = split_lm(model)
    device = weight.device
    seqs = [p + r for p, r in zip(prompt_ids, response_ids)]
    T = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), T), dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, :len(s)] = torch.tensor(s)
    ids = ids.to(device)
    with autocast(device, autocast_bf16):
        hidden = body(input_ids=ids, use_cache=False).last_hidden_state      # [b, T, H]
    rows, cols, dst = [], [], []
    for b, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        n = len(r)
        rows += [b] * n
        cols += range(len(p) - 1, len(p) - 1 + n)       # hidden at t predicts token t+1
        dst += range(n)
    rows_t = torch.tensor(rows, device=device)
    h = hidden[rows_t, torch.tensor(cols, device=device)].to(weight.dtype)     # [N, H]
    labels = torch.cat([torch.tensor(r, dtype=torch.long) for r in response_ids]).to(device)
    return h, weight, bias, labels, rows_t, torch.tensor(dst, device=device)


def _scatter_rows(values: torch.Tensor, rows_t: torch.Tensor, dst_t: torch.Tensor,
                  shape: tuple) -> torch.Tensor:
    """[N] per-token values -> [b, width] fp32, 0 where no token is."""
    return torch.zeros(shape, device=values.device).index_put((rows_t, dst_t), values.float())


def fused_policy_loss(model, prompt_ids, response_ids, width: int, old_logp, advantages,
                      weights, ref_logp, loss_cfg, *, temperature: float,
                      autocast_bf16: bool = True):
    """The micro-batch's whole loss (PPO-clip + KL + entropy bonus, aggregated by
    ``weights``) by ``sharpo_kernels.linear_policy_loss``: its gradients w.r.t. the lm_head
    and the hidden states are formed in the forward, chunk by chunk, with no [N, V] tensor
    (``loss.fused``, docs/api.md "linear_policy_loss"). [b, width] inputs on the model's
    device (ref_logp None: no KL). -> (loss, logp [b, width], entropy [b, width]): the
    log-probs and entropy detached, for the statistics."""
    from sharpo_kernels import linear_policy_loss

    h, weight, bias, labels, rows_t, dst_t = response_hidden(model, prompt_ids, response_ids,
                                                             autocast_bf16)
    pick = (lambda t: None if t is None else t[rows_t, dst_t])
    out = linear_policy_loss(h, weight, labels, pick(advantages), pick(old_logp),
                             weights=pick(weights), bias=bias, clip_low=loss_cfg.clip_ratio,
                             clip_high=loss_cfg.clip_ratio_high, ref_logp=pick(ref_logp),
                             kl_coef=loss_cfg.kl_coef if ref_logp is not None else 0.0,
                             entropy_coef=loss_cfg.entropy_coef, temperature=temperature,
                             return_entropy=True, check_finite=False)
    shape = (len(prompt_ids), width)
    return out.loss, _scatter_rows(out.logp, rows_t, dst_t, shape), \
        _scatter_rows(out.entropy, rows_t, dst_t, shape)


def update_policy(model, optimizer, scheduler, batch, cfg, *, temperature: float,
                  generator: torch.Generator) -> dict:
    """PPO epochs x mini-batches of optimizer steps over the rows of ``batch`` (a scored
    StepBatch, batch.py); returns mean metrics. Reads ``batch.old_logp``,
    ``batch.advantages`` and ``batch.ref_logp``: [B, L] CPU fp32 (ref_logp may be None),
    and ``batch.aux_loss`` (the estimator's extra loss term, estimators.AuxLoss, or None;
    its mean appears as ``aux_loss``). With ``cfg.log.update_norm``: ``update_norm``, the L2
    norm of the step's whole change of the trainable weights (every optimizer step of the
    call, weight decay included; benchmarks/results/gated.md: the step-matched control)."""
    lo, op = cfg.loss, cfg.optim
    policy_loss = POLICY_LOSSES[lo.policy_loss]
    device = next(model.parameters()).device
    old_logp, advantages, ref_logp = batch.old_logp, batch.advantages, batch.ref_logp
    mask_all = batch.response_mask
    B = len(batch)
    sums = {"loss": 0.0, "pg_loss": 0.0, "pg_clipfrac": 0.0, "kl": 0.0, "entropy": 0.0,
            "grad_norm": 0.0}
    aux = getattr(batch, "aux_loss", None)     # the estimator's extra loss term (SDAR)
    if aux is not None:
        sums["aux_loss"] = 0.0
    n_opt = 0
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    before = ([p.detach().float().clone() for p in params]
              if getattr(cfg.log, "update_norm", False) else None)
    # loss.fused: the fused op computes PPO-clip + KL + entropy itself; an estimator's extra
    # loss term (aux) and shared-prefix forwards need the log-probs with their graph
    fused = lo.fused and aux is None and not op.shared_prefix_update
    shared = None
    if op.shared_prefix_update:
        sc = cfg.scoring
        shared = dict(min_shared_tokens=sc.min_shared_tokens, max_batch_tokens=sc.max_batch_tokens,
                      chunk_tokens=sc.chunk_tokens)
    for _ in range(op.ppo_epochs):
        order = torch.randperm(B, generator=generator) if op.ppo_epochs * op.mini_batches > 1 \
            else torch.arange(B)
        for mb in order.chunk(min(op.mini_batches, B)):
            mb = mb.tolist()
            ntok = float(mask_all[mb].sum().clamp(min=1))
            optimizer.zero_grad(set_to_none=True)
            stats = {k: 0.0 for k in sums if k != "grad_norm"}
            # similar rows together: less padding (plain) / shared prompts (shared prefix)
            mb.sort(key=(lambda r: batch.prompt_ids[r]) if op.shared_prefix_update else
                    (lambda r: len(batch.prompt_ids[r]) + len(batch.response_ids[r])))
            weights = token_weights(mask_all[mb], lo.agg, batch.traj_index[mb])   # [b, L]
            for k in range(0, len(mb), op.micro_batch_size):
                idx = mb[k:k + op.micro_batch_size]
                mask = mask_all[idx].to(device)
                w = weights[k:k + op.micro_batch_size].to(device)
                adv = advantages[idx].to(device)
                old = old_logp[idx].to(device)
                ref = ref_logp[idx].to(device) if lo.use_kl and ref_logp is not None else None
                prompts = [batch.prompt_ids[r] for r in idx]
                responses = [batch.response_ids[r] for r in idx]
                if fused:                       # loss and gradients in one pass (loss.fused)
                    loss, logp, ent = fused_policy_loss(
                        model, prompts, responses, batch.width, old, adv, w, ref, lo,
                        temperature=temperature, autocast_bf16=cfg.model.autocast_bf16)
                    loss.backward()
                    with torch.no_grad():       # the statistics, from the detached log-probs
                        pg, clipped = policy_loss(logp, old, adv, lo)
                        pg_loss = aggregate(pg, w)
                        if ref is not None:
                            kl = kl_low_var(logp, ref)
                            stats["kl"] += float((kl * mask).sum()) / ntok
                else:
                    logp, ent = policy_logprobs(
                        model, prompts, responses, batch.width, temperature=temperature,
                        autocast_bf16=cfg.model.autocast_bf16, shared_prefix=shared,
                        entropy_grad=bool(lo.entropy_coef))
                    pg, clipped = policy_loss(logp, old, adv, lo)
                    loss = pg_loss = aggregate(pg, w)
                    loss = _unfused_terms(loss, logp, ent, w, mask, ntok, ref, aux, idx, lo,
                                          stats, device)
                    loss.backward()
                stats["loss"] += loss.item()
                stats["pg_loss"] += pg_loss.item()
                stats["pg_clipfrac"] += float((clipped.float() * mask).sum()) / ntok
                stats["entropy"] += float((ent.detach() * mask).sum()) / ntok
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, op.grad_clip))
            if math.isfinite(grad_norm):
                optimizer.step()
            scheduler.step()
            for k, v in stats.items():
                sums[k] += v
            sums["grad_norm"] += grad_norm
            n_opt += 1
    out = {k: v / max(n_opt, 1) for k, v in sums.items()}
    out["optimizer_steps"] = n_opt
    if before is not None:
        out["update_norm"] = update_norm(params, before)
    return out


def update_norm(params, before) -> float:
    """sqrt(sum over ``params`` of ||p - p_before||^2): how far one training step moved the
    weights (``before``: fp32 copies taken before it, in the same order)."""
    with torch.no_grad():
        total = sum(float((p.detach().float() - b).pow(2).sum()) for p, b in zip(params, before))
    return math.sqrt(total)


def _unfused_terms(loss, logp, ent, w, mask, ntok, ref, aux, idx, lo, stats, device):
    """The unfused path's terms after PPO-clip: the estimator's aux loss, KL, entropy."""
    if aux is not None:             # the one generic hook: estimators.AuxLoss
        term = AUX_LOSSES[aux.name](
            logp, **{n: v[idx].to(device) for n, v in aux.inputs.items()}, **aux.params)
        aux_loss = aggregate(term, w)
        loss = loss + aux.coef * aux_loss
        stats["aux_loss"] += aux_loss.item()
    if ref is not None:
        kl = kl_low_var(logp, ref)
        loss = loss + lo.kl_coef * aggregate(kl, w)
        stats["kl"] += float((kl.detach() * mask).sum()) / ntok
    if lo.entropy_coef:
        loss = loss - lo.entropy_coef * aggregate(ent, w)
    return loss
