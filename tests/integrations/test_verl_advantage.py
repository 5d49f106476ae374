"""compute_sharpo_advantage on DataProto batches in the per-step layout (verl-agent's):
equal to sharpo_kernels.segment_advantage on the same numbers and to a float64 reference."""
import numpy as np
import pytest
import torch

from integrations.reference import grpo_verl, sharpo_rows
from integrations.verl_support import needs_verl

pytestmark = needs_verl


def per_step_batch(seed: int, T: int = 13):
    """3 groups (one holds a single episode); episodes of 1-4 step rows; odd T."""
    from verl.protocol import DataProto

    g = torch.Generator().manual_seed(seed)
    uid, traj, ep_reward = [], [], []
    episodes = [("a", 3), ("a", 1), ("a", 2), ("a", 4), ("b", 2), ("b", 1), ("b", 3), ("c", 2)]
    ep_r = [1.0, 0.0, 1.0, 0.0, 0.0, 10.0, 0.0, 1.0]
    for e, ((u, steps), r) in enumerate(zip(episodes, ep_r)):
        for _ in range(steps):
            uid.append(u)
            traj.append(f"ep{e}")
            ep_reward.append(r)
    B = len(uid)
    lens = torch.randint(3, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lens[:, None]).float()
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), lens - 1] = torch.tensor(ep_reward)
    seg = torch.full((B, T), -1, dtype=torch.long)
    for b in range(B):               # random contiguous runs 0..K-1 inside the response
        pos, k = 0, 0
        while pos < int(lens[b]):
            n = int(torch.randint(1, 5, (1,), generator=g))
            if torch.rand(1, generator=g) < 0.7:
                seg[b, pos:min(pos + n, int(lens[b]))] = k
                k += 1
            pos += n
    seg[2, 1] = -1 if seg[2, 0] != seg[2, 2] else seg[2, 1]   # keep runs contiguous
    old = -torch.rand(B, T, generator=g) * 3
    teacher = old + torch.randn(B, T, generator=g)
    has_teacher = torch.rand(B, generator=g) < 0.8
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask, "old_log_probs": old,
                 "teacher_log_probs": teacher, "sharpo_segment_ids": seg, "sharpo_has_teacher": has_teacher},
        non_tensors={"uid": np.array(uid, dtype=object), "traj_uid": np.array(traj, dtype=object)})
    return data, ep_r, [u for u, _ in episodes]


def _contiguous(seg):
    out = seg.clone()
    for b in range(seg.shape[0]):
        k, prev, ids = -1, None, {}
        for j in range(seg.shape[1]):
            v = int(seg[b, j])
            if v < 0:
                prev = None
                continue
            if v != prev:
                k += 1
                prev = v
            out[b, j] = k
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("norm", [True, False])
def test_equals_segment_advantage_and_float64_reference(seed, norm):
    from sharpo_kernels import SharpoCoefficients, segment_advantage
    from sharpo_train.integrations.verl import compute_sharpo_advantage

    data, ep_r, ep_group = per_step_batch(seed)
    data.batch["sharpo_segment_ids"] = _contiguous(data.batch["sharpo_segment_ids"])
    b = data.batch
    traj = torch.tensor([int(t[2:]) for t in data.non_tensor_batch["traj_uid"]])
    a_ep = grpo_verl(ep_r, ep_group, norm=norm)
    base = torch.tensor([a_ep[int(t)] for t in traj], dtype=torch.float64)
    kw = dict(lam=0.3, alpha=0.4, tau=0.7, rho_min=0.5, rho_max=2.0)
    inputs = {k: b[k].clone() for k in b.keys()}

    out = compute_sharpo_advantage(data, SharpoCoefficients(**kw), norm_adv_by_std=norm)

    for k, v in inputs.items():                                   # inputs untouched
        assert torch.equal(out.batch[k], v), k
    teacher = torch.where(b["sharpo_has_teacher"][:, None], b["teacher_log_probs"], b["old_log_probs"])
    kernel = segment_advantage(teacher, b["old_log_probs"], b["sharpo_segment_ids"], base.float(),
                               has_teacher=b["sharpo_has_teacher"], response_mask=b["response_mask"],
                               traj_index=traj, **kw).advantages
    ref = sharpo_rows(b["teacher_log_probs"], b["old_log_probs"], b["sharpo_segment_ids"], b["response_mask"],
                      base, b["sharpo_has_teacher"], traj, **kw)
    torch.testing.assert_close(out.batch["advantages"], kernel, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.batch["advantages"].double(), ref, rtol=1e-5, atol=1e-6)
    assert torch.equal(out.batch["returns"], out.batch["advantages"])
    assert (out.batch["advantages"][b["response_mask"] == 0] == 0).all()
    # the singleton group "c": verl's GRPO gives A = r (mean 0, std 1), not 0
    c_rows = [i for i, u in enumerate(data.non_tensor_batch["uid"]) if u == "c"]
    assert abs(float(base[c_rows[0]]) - (1.0 / (1 + 1e-6) if norm else 1.0)) < 1e-9
    m = out.meta_info["sharpo_metrics"]
    assert set(m) >= {"sharpo/teacher_coverage", "sharpo/gap_mean", "sharpo/weight_mean"}


def test_defaults_and_step_metrics_are_the_trainers():
    """compute_sharpo_advantage's defaults are sharpo_kernels.SHARPO_DEFAULTS, and its
    metrics are the trainer's sharpo_step_stats of the same segments (coverage over the
    episodes, traj_uid)."""
    import dataclasses
    import inspect

    from sharpo_kernels import SHARPO_DEFAULTS, segment_advantage
    from sharpo_train.estimators.sharpo_stats import sharpo_step_stats
    from sharpo_train.integrations.verl import DEFAULTS, compute_sharpo_advantage

    assert inspect.signature(compute_sharpo_advantage).parameters["coefficients"].default is SHARPO_DEFAULTS
    for k, v in dataclasses.asdict(SHARPO_DEFAULTS).items():
        assert v == DEFAULTS[k], k
    data, ep_r, ep_group = per_step_batch(4)
    data.batch["sharpo_segment_ids"] = _contiguous(data.batch["sharpo_segment_ids"])
    b = data.batch
    traj = torch.tensor([int(t[2:]) for t in data.non_tensor_batch["traj_uid"]])
    a_ep = grpo_verl(ep_r, ep_group, norm=True)
    base = torch.tensor([a_ep[int(t)] for t in traj], dtype=torch.float32)
    ht = b["sharpo_has_teacher"]
    seg = segment_advantage(torch.where(ht[:, None], b["teacher_log_probs"], b["old_log_probs"]),
                            b["old_log_probs"], b["sharpo_segment_ids"], base, has_teacher=ht,
                            response_mask=b["response_mask"], traj_index=traj)
    want = sharpo_step_stats(seg, base, ht, alpha=SHARPO_DEFAULTS.alpha, tau=SHARPO_DEFAULTS.tau,
                             traj_index=traj)
    m = compute_sharpo_advantage(data).meta_info["sharpo_metrics"]
    assert want["sharpo/segments_scored"] > 0 and m.keys() == want.keys()
    for k in want:
        assert m[k] == pytest.approx(want[k], rel=1e-5, nan_ok=True), k


def test_episode_counted_once_per_group():
    """An episode with 4 step rows weighs as much as one with 1 row in the group statistics."""
    from sharpo_train.integrations.verl import episode_advantages

    rewards = torch.zeros(5, 3)
    rewards[:, -1] = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0])
    uid = np.array(["g"] * 5, dtype=object)
    traj = np.array(["x", "x", "x", "x", "y"], dtype=object)
    idx, a, r, _ = episode_advantages(rewards, uid, traj)
    assert idx.tolist() == [0, 0, 0, 0, 1]
    std = (0.5) ** 0.5
    torch.testing.assert_close(a, torch.tensor([0.5 / (std + 1e-6), -0.5 / (std + 1e-6)]))


def test_bad_inputs_name_the_field():
    from sharpo_train.integrations.verl import compute_sharpo_advantage

    data, _, _ = per_step_batch(0)
    data.batch["sharpo_segment_ids"] = _contiguous(data.batch["sharpo_segment_ids"])
    bad = data.batch["token_level_rewards"].clone()
    bad[0, 0] += 5.0                       # rows of one episode disagree on the reward
    data.batch["token_level_rewards"] = bad
    with pytest.raises(ValueError, match="token_level_rewards"):
        compute_sharpo_advantage(data)
    data2, _, _ = per_step_batch(0)
    data2.batch.pop("teacher_log_probs")
    with pytest.raises(ValueError, match="teacher_log_probs"):
        compute_sharpo_advantage(data2)
    data3, _, _ = per_step_batch(0)
    data3.non_tensor_batch.pop("traj_uid")
    with pytest.raises(ValueError, match="traj_uid"):
        compute_sharpo_advantage(data3)


def test_sharpo_is_a_registered_estimator_that_points_to_the_trainer():
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1 import get_trainer_cls

    import sharpo_train.integrations.verl as integ

    fn = core_algos.get_adv_estimator_fn("sharpo")
    with pytest.raises(RuntimeError, match="SharpoTrainerMixin"):
        fn(token_level_rewards=torch.zeros(2, 3), response_mask=torch.ones(2, 3), index=np.array(["a", "a"]))
    cls = get_trainer_cls("sharpo_sync")
    assert issubclass(cls, integ.SharpoTrainerMixin)
    integ.register()                       # idempotent
