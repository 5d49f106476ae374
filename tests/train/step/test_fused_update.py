"""`loss.fused` (sharpo_kernels.linear_policy_loss in the update step): the same update as
the unfused path, with and without the KL and entropy terms, under each aggregation, with
micro-batching; the statistics agree too; the setting's refusals."""
import pytest
import torch

from sharpo_train.errors import ConfigError
from sharpo_train.models.policy import build_policy
from sharpo_train.step.update import update_policy

from train.loops.test_trainer_support import sampled_logprobs, small_config, two_rows

MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}


def _step(cfg, fused: bool, kl: bool):
    torch.manual_seed(0)
    model, tok = build_policy(MODEL)
    rows, _ = two_rows(tok)
    old = sampled_logprobs(model, rows)
    gen = torch.Generator().manual_seed(1)
    # old log-probs off the current ones: some ratios leave the clip range
    rows.old_logp = old + 0.3 * torch.randn(old.shape, generator=gen) * rows.response_mask
    rows.advantages = torch.randn(old.shape, generator=gen) * rows.response_mask
    if kl:
        rows.ref_logp = old + 0.5 * torch.randn(old.shape, generator=gen) * rows.response_mask
    cfg.loss.fused = fused
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    stats = update_policy(model, opt, sched, rows, cfg, temperature=0.9,
                          generator=torch.Generator().manual_seed(0))
    return model, stats


@pytest.mark.parametrize("agg,micro,kl,entropy_coef", [
    ("token-mean", 8, False, 0.0),
    ("seq-mean-token-mean", 1, True, 0.01),
    ("traj-mean-token-mean", 2, True, -0.02),
])
def test_fused_update_equals_unfused(tmp_path, monkeypatch, agg, micro, kl, entropy_coef):
    import sharpo_kernels
    calls = []
    real = sharpo_kernels.linear_policy_loss

    def counted(*a, **k):
        calls.append(k["ref_logp"] is not None)
        return real(*a, **k)
    monkeypatch.setattr(sharpo_kernels, "linear_policy_loss", counted)
    cfg = small_config(tmp_path, loss__agg=agg, loss__use_kl=kl, loss__kl_coef=0.3,
                       loss__entropy_coef=entropy_coef, loss__clip_ratio_high=0.28,
                       optim__micro_batch_size=micro)
    a, sa = _step(cfg, False, kl)
    assert not calls
    b, sb = _step(cfg, True, kl)
    assert calls and all(c == kl for c in calls), "the fused op ran, with the KL when on"
    moved = 0.0
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=2e-6, msg=name)
    torch.manual_seed(0)
    start, _ = build_policy(MODEL)
    with torch.no_grad():
        for p, q in zip(start.parameters(), a.parameters()):
            moved = max(moved, float((p - q).abs().max()))
    assert moved > 1e-4, "the step must move the parameters for the comparison to mean much"
    for k in ("loss", "pg_loss", "pg_clipfrac", "kl", "entropy", "grad_norm"):
        assert sb[k] == pytest.approx(sa[k], rel=1e-5, abs=1e-7), k
    assert sa["pg_clipfrac"] > 0, "some ratios must be clipped"


def test_fused_needs_ppo_clip(tmp_path, monkeypatch):
    from sharpo_train.step import losses
    monkeypatch.setitem(losses.POLICY_LOSSES, "other", losses.ppo_clip_policy_loss)
    cfg = small_config(tmp_path)
    cfg.loss.policy_loss = "other"
    cfg.loss.validate()                      # another registered loss, unfused: fine
    cfg.loss.fused = True
    with pytest.raises(ConfigError, match="^policy_loss: expected ppo_clip with fused"):
        cfg.loss.validate()
