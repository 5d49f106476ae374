"""The field's credit methods (sharpo_train/estimators/: GiGPO, RLSD, SERL, OPSD, SDAR,
EMPG; docs/estimators.md): hand-computed float64 cases from each paper's formula, and the
vectorised math against plain loops on random odd-size inputs."""
import math
import random

import pytest
import torch

from sharpo_train.step.batch import StepBatch
from sharpo_train.loops.train_config import load_config
from sharpo_train.estimators import EstimatorConfig
from sharpo_train.envs.base import Task
from sharpo_train.step.group_norm import grouped_normalise
from sharpo_train.estimators import ESTIMATORS
from sharpo_train.step.batch import segment_kind_mask
from sharpo_train.estimators.empg import empg_step_advantages, next_rows, step_entropy
from sharpo_train.estimators.gigpo import gigpo_row_advantages
from sharpo_train.estimators.self_distill import (opsd_token_advantages, rlsd_lambda,
                                                  rlsd_token_advantages, sdar_gate)
from sharpo_train.step.losses import AUX_LOSSES, sdar_distill
from sharpo_train.step.rollout import Episode, Turn
from sharpo_train.step.segments import Span

F64 = dict(dtype=torch.float64)


def close(a, b, tol=1e-12):
    torch.testing.assert_close(torch.as_tensor(a, **F64), torch.as_tensor(b, **F64),
                               rtol=0, atol=tol)


# ------------------------------------------------------------------ a batch from episodes

def turn(n_tokens, obs_after, spans=()):
    return Turn("u", [1, 2, 3], list(range(10, 10 + n_tokens)), "", "a", obs_after,
                spans=list(spans))


def batch_of(spec):
    """spec: [(group, reward, [turn, ...]), ...] -> StepBatch.from_episodes."""
    eps = [Episode(Task(f"t{g}", "Pick"), g, i, turns, reward=r, success=r > 0)
           for i, (g, r, turns) in enumerate(spec)]
    return StepBatch.from_episodes(eps)


# ------------------------------------------------------------------ GiGPO

def gigpo_hand_batch():
    # one group of three: ep0 (R=1) turns 0,1; ep1 (R=0) turns 0,1; ep2 (R=1) turn 0.
    # ep0 and ep1 both reach observation "A" before their second turn.
    return batch_of([(0, 1.0, [turn(3, "A"), turn(2, "won")]),
                     (0, 0.0, [turn(4, "A"), turn(3, "lost")]),
                     (0, 1.0, [turn(2, "won")])])


def test_gigpo_by_hand_mean_norm():
    batch = gigpo_hand_batch()
    cfg = EstimatorConfig(gigpo_gamma=0.5, gigpo_step_weight=1.0, gigpo_mode="mean_norm")
    out = ESTIMATORS["gigpo"].fn(batch, cfg)
    # rows: (ep0,t0) (ep0,t1) (ep1,t0) (ep1,t1) (ep2,t0); R per row 1 1 0 0 1, mean 0.6
    a_e = [0.4, 0.4, -0.6, -0.6, 0.4]
    # step returns gamma^(T-1-t) R: 0.5, 1, 0, 0, 1
    # anchor "initial" = rows 0, 2, 4 (returns 0.5, 0, 1; mean 0.5) -> 0, -0.5, 0.5
    # anchor "A"       = rows 1, 3    (returns 1, 0; mean 0.5)      -> 0.5, -0.5
    a_s = [0.0, 0.5, -0.5, -0.5, 0.5]
    want = torch.tensor([e + s for e, s in zip(a_e, a_s)])
    close(out.advantages.double(), want[:, None].float().double() * batch.response_mask.double(),
          1e-6)
    # the reference base is GRPO's A_i for every method
    close(out.base, grouped_normalise(batch.rewards.float(), batch.group_of)[batch.traj_index], 1e-7)
    assert out.stats["gigpo/anchor_groups"] == 2
    # omega = 0: the episode term alone
    out0 = ESTIMATORS["gigpo"].fn(batch, EstimatorConfig(gigpo_gamma=0.5, gigpo_step_weight=0.0))
    close(out0.advantages[:, 0].double(), torch.tensor(a_e, **F64), 1e-6)


def test_gigpo_by_hand_mean_std_norm():
    r = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0], **F64)
    g = torch.zeros(5, dtype=torch.long)
    ret = torch.tensor([0.5, 1.0, 0.0, 0.0, 1.0], **F64)
    anchor = torch.tensor([0, 1, 0, 1, 0])
    adv, a_s = gigpo_row_advantages(r, g, ret, anchor, step_weight=1.0, mode="mean_std_norm",
                                    eps=0.0)
    std_e = math.sqrt((3 * 0.4 ** 2 + 2 * 0.6 ** 2) / 4)
    a_e = torch.tensor([0.4, 0.4, -0.6, -0.6, 0.4], **F64) / std_e
    # anchor 0: 0.5, 0, 1 (mean 0.5, std 0.5); anchor 1: 1, 0 (mean 0.5, std sqrt(0.5))
    want_s = torch.tensor([0.0, 0.5 / math.sqrt(0.5), -1.0, -0.5 / math.sqrt(0.5), 1.0], **F64)
    close(a_s, want_s)
    close(adv, a_e + want_s)


def plain_grouped(values, keys, std, eps):
    out = []
    for v, k in zip(values, keys):
        grp = [x for x, kk in zip(values, keys) if kk == k]
        if len(grp) < 2:
            out.append(0.0)
            continue
        m = sum(grp) / len(grp)
        s = math.sqrt(sum((x - m) ** 2 for x in grp) / (len(grp) - 1))
        out.append((v - m) / (s + eps) if std else v - m)
    return out


@pytest.mark.parametrize("n", [1, 7, 31])
def test_grouped_normalise_matches_a_loop(n):
    rng = random.Random(n)
    for std in (False, True):
        vals = [rng.choice([0.0, 1.0, rng.random()]) for _ in range(n)]
        keys = [rng.randrange(max(1, n // 3)) for _ in range(n)]
        got = grouped_normalise(torch.tensor(vals, **F64), torch.tensor(keys), std=std, eps=1e-6)
        close(got, plain_grouped(vals, keys, std, 1e-6))


def test_gigpo_random_batches_keep_its_invariants():
    rng = random.Random(3)
    obs = ["A", "B", "C"]
    for trial in range(5):
        spec = [(g, float(rng.random() < 0.5),
                 [turn(rng.randrange(1, 6), rng.choice(obs)) for _ in range(rng.randrange(1, 4))])
                for g in range(3) for _ in range(rng.choice([2, 3, 5]))]
        batch = batch_of(spec)
        cfg = EstimatorConfig(gigpo_gamma=0.9)
        out = ESTIMATORS["gigpo"].fn(batch, cfg)
        a = out.advantages.double()
        assert torch.all(a[batch.response_mask == 0] == 0)
        row = torch.tensor([a[b, 0] for b in range(len(batch))], **F64)
        # plain reference: the row-level loops
        e, t = batch.episode, batch.turn
        R = [spec[i][1] for i in e]
        grp = [spec[i][0] for i in e]
        ret = [R[b] * 0.9 ** (len(spec[e[b]][2]) - 1 - t[b]) for b in range(len(batch))]
        key = [(grp[b], "init" if t[b] == 0 else spec[e[b]][2][t[b] - 1].observation_after)
               for b in range(len(batch))]
        want = [x + y for x, y in zip(plain_grouped(R, grp, False, 0),
                                      plain_grouped(ret, key, False, 0))]
        close(row, want, 1e-6)


def test_gigpo_needs_the_episodes():
    batch = gigpo_hand_batch()
    batch.episodes = []
    with pytest.raises(ValueError, match="gigpo"):
        ESTIMATORS["gigpo"].fn(batch, EstimatorConfig())
    with pytest.raises(ValueError, match="mode"):
        gigpo_row_advantages(torch.ones(2), torch.zeros(2, dtype=torch.long), torch.ones(2),
                             torch.zeros(2, dtype=torch.long), mode="z")


# ------------------------------------------------------------------ RLSD / SERL / OPSD

def test_rlsd_by_hand():
    base = torch.tensor([1.0, -0.5], **F64)
    S = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -3.0, -1.0]], **F64)
    delta = torch.tensor([[0.1, -1.0, 0.5], [0.1, 2.0, -0.05]], **F64)
    mask = torch.ones(2, 3, **F64)
    mask[1, 2] = 0
    adv, w = rlsd_token_advantages(base, S + delta, S, mask, mask.bool(), lam=0.5, clip_eps=0.2)
    # row 0, A > 0: w = exp(delta) clipped: exp(0.1), 0.8 (exp(-1) < 0.8), 1.2 (exp(.5) > 1.2)
    w0 = [math.exp(0.1), 0.8, 1.2]
    # row 1, A < 0: w = exp(-delta): exp(-0.1), 0.8 (exp(-2)), padding
    w1 = [math.exp(-0.1), 0.8]
    close(w[0], w0)
    close(w[1, :2], w1)
    close(adv[0], [1.0 * (0.5 + 0.5 * x) for x in w0])
    close(adv[1], [-0.5 * (0.5 + 0.5 * x) for x in w1] + [0.0])
    # lambda 0: GRPO
    adv0, _ = rlsd_token_advantages(base, S + delta, S, mask, mask.bool(), lam=0.0)
    close(adv0, base[:, None] * mask)


def test_rlsd_schedule_is_the_official_linear_warmdown():
    assert rlsd_lambda(0, 0.5, 50) == 0.5
    assert rlsd_lambda(1, 0.5, 50) == pytest.approx(0.49)
    assert rlsd_lambda(25, 0.5, 50) == pytest.approx(0.25)
    assert rlsd_lambda(50, 0.5, 50) == 0.0 and rlsd_lambda(80, 0.5, 50) == 0.0


def teacher_batch(step=1):
    """Two groups; rows with think + action segments; a teacher on some rows."""
    spans = [Span("think", 0, 3), Span("action", 3, 5)]
    b = batch_of([(0, 1.0, [turn(6, "x", spans), turn(5, "y", spans)]),
                  (0, 0.0, [turn(6, "x", spans)]),
                  (0, 0.0, [turn(4, "x", [Span("action", 1, 3)])]),
                  (1, 1.0, [turn(3, "x")]), (1, 0.0, [turn(5, "x", spans)])])
    g = torch.Generator().manual_seed(0)
    b.old_logp = -torch.rand(len(b), b.width, generator=g) * 3 * b.response_mask
    b.teacher_logp = b.old_logp + torch.randn(len(b), b.width, generator=g) * b.response_mask
    b.has_teacher = torch.tensor([False, False, True, True, False, True])
    b.step = step
    return b


def test_rlsd_and_serl_estimators_by_hand():
    b = teacher_batch(step=10)
    cfg = EstimatorConfig(rlsd_lam=0.5, rlsd_warmdown_steps=50, rlsd_clip_eps=0.2)
    A = grouped_normalise(b.rewards.float(), b.group_of)[b.traj_index].double()
    lam = 0.5 * (1 - 10 / 50)
    delta = (b.teacher_logp - b.old_logp).double()
    action = segment_kind_mask(b, "action", "test")
    for name in ("rlsd", "serl"):
        out = ESTIMATORS[name].fn(b, cfg)
        assert ESTIMATORS[name].needs_teacher(cfg)
        assert out.stats[f"{name}/lambda"] == pytest.approx(lam)
        for r in range(len(b)):
            for t in range(b.width):
                if b.response_mask[r, t] == 0:
                    assert out.advantages[r, t] == 0
                    continue
                on = bool(b.has_teacher[r]) and (name == "rlsd" or bool(action[r, t]))
                a = A[r].item()
                w = min(1.2, max(0.8, math.exp(math.copysign(1, a) * delta[r, t].item()))) \
                    if a != 0 else 1.0
                want = a * ((1 - lam) + lam * w) if on else a
                assert out.advantages[r, t].item() == pytest.approx(want, abs=1e-6), (name, r, t)
    # the action mask is exactly the action span of each row's turn
    assert action[0].tolist() == [False] * 3 + [True] * 2 + [False]
    assert action[3].tolist()[:4] == [False, True, True, False]
    assert not action[4].any()                       # a turn without spans
    with pytest.raises(ValueError, match="step"):
        b.step = None
        ESTIMATORS["rlsd"].fn(b, cfg)


def test_opsd_by_hand_and_rows_without_teacher():
    base = torch.tensor([0.5, -1.0, 0.0], **F64)
    S = torch.tensor([[-1.0, -2.0], [-0.5, -0.1], [-1.0, -1.0]], **F64)
    T = torch.tensor([[-0.5, -3.0], [-1.5, -0.1], [0.0, 0.0]], **F64)
    mask = torch.tensor([[1, 1], [1, 0], [1, 1]], **F64)
    has = torch.tensor([True, True, False])
    adv = opsd_token_advantages(base, T, S, mask, has, coef=0.1)
    close(adv, [[0.5 + 0.05, 0.5 - 0.1], [-1.0 - 0.1, 0.0], [0.0, 0.0]])
    b = teacher_batch()
    out = ESTIMATORS["opsd"].fn(b, EstimatorConfig(opsd_coef=0.25))
    A = grouped_normalise(b.rewards.float(), b.group_of)[b.traj_index]
    want = (A[:, None] + 0.25 * b.has_teacher[:, None] * (b.teacher_logp - b.old_logp)) * b.response_mask
    close(out.advantages.double(), want.double(), 1e-6)


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (9, 13)])
def test_token_weights_match_a_loop(shape):
    B, L = shape
    g = torch.Generator().manual_seed(B * L)
    base = torch.randn(B, generator=g, **F64)
    base[::3] = 0
    S = -torch.rand(B, L, generator=g, **F64) * 4
    T = S + torch.randn(B, L, generator=g, **F64) * 2
    mask = (torch.rand(B, L, generator=g) < 0.8).double()
    re = torch.rand(B, L, generator=g) < 0.6
    lam, eps = 0.37, 0.15
    adv, _ = rlsd_token_advantages(base, T, S, mask, re, lam=lam, clip_eps=eps)
    has = torch.rand(B, generator=g) < 0.5
    adv_o = opsd_token_advantages(base, T, S, mask, has, coef=0.3)
    for r in range(B):
        a = base[r].item()
        s = (a > 0) - (a < 0)
        for t in range(L):
            w = min(1 + eps, max(1 - eps, math.exp(s * (T[r, t] - S[r, t]).item())))
            want = (a * ((1 - lam) + lam * w) if re[r, t] else a) * mask[r, t].item()
            assert adv[r, t].item() == pytest.approx(want, abs=1e-12)
            d = (T[r, t] - S[r, t]).item() if has[r] else 0.0
            assert adv_o[r, t].item() == pytest.approx((a + 0.3 * d) * mask[r, t].item(), abs=1e-12)


def test_shape_errors_name_the_argument():
    with pytest.raises(ValueError, match="teacher_logp"):
        rlsd_token_advantages(torch.ones(2), torch.ones(2, 4), torch.ones(2, 3), torch.ones(2, 3),
                              torch.ones(2, 3, dtype=torch.bool), lam=0.5)
    with pytest.raises(ValueError, match="has_teacher"):
        opsd_token_advantages(torch.ones(2), torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3),
                              torch.ones(3, dtype=torch.bool), coef=0.1)
    with pytest.raises(ValueError, match="weight"):
        sdar_distill(torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 2))
    with pytest.raises(ValueError, match="next_row"):
        empg_step_advantages(torch.ones(3), torch.ones(3), torch.tensor([5, -1, -1]))


# ------------------------------------------------------------------ SDAR

def test_sdar_loss_term_value_and_gradient_by_hand():
    x = torch.tensor([[-1.0, -0.2], [-2.0, -0.7]], **F64, requires_grad=True)
    t = torch.tensor([[-0.5, -0.4], [-2.0, -3.0]], **F64)
    w = torch.tensor([[1.0, 1.0], [1.0, 0.0]], **F64)
    term = AUX_LOSSES["sdar_distill"](x, t, w, beta=5.0)
    sig = lambda z: 1 / (1 + math.exp(-z))
    want = [[sig(2.5) * 0.5, sig(-1.0) * -0.2], [sig(0.0) * 0.0, 0.0]]
    close(term.detach(), want)
    term.sum().backward()
    # the gate is detached: d/dx g (t - x) = -g
    close(x.grad, [[-sig(2.5), -sig(-1.0)], [-0.5, 0.0]])


def test_sdar_estimator_keeps_grpo_and_hands_the_loss_to_the_update():
    b = teacher_batch()
    out = ESTIMATORS["sdar"].fn(b, EstimatorConfig(sdar_coef=0.01, sdar_beta=5.0))
    A = grouped_normalise(b.rewards.float(), b.group_of)[b.traj_index]
    close(out.advantages.double(), (A[:, None] * b.response_mask).double(), 1e-7)
    aux = out.aux_loss
    assert aux.name == "sdar_distill" and aux.coef == 0.01 and aux.params == {"beta": 5.0}
    want_w = b.has_teacher[:, None].float() * b.response_mask
    close(aux.inputs["weight"].double(), want_w.double())
    gate = sdar_gate(b.teacher_logp, b.old_logp, 5.0)[want_w.bool()]
    assert out.stats["sdar/gate_mean"] == pytest.approx(gate.mean().item())


# ------------------------------------------------------------------ EMPG

def test_empg_by_hand():
    base = torch.tensor([1.0, 1.0, -1.0], **F64)
    H = torch.tensor([0.0, 1.0, 2.0], **F64)
    nxt = torch.tensor([1, -1, -1])                     # rows 0 -> 1 one trajectory
    adv, g = empg_step_advantages(base, H, nxt, k=1.0, k_future=1.0, zeta=0.1, eps=0.0)
    e = [1.0, math.exp(-0.5), math.exp(-1.0)]           # exp(-Hn), Hn = 0, .5, 1
    m = sum(e) / 3
    gs = [x / m for x in e]
    mod = [gs[0] * 1 + 0.1 * e[1], gs[1] * 1, gs[2] * -1]
    mu = sum(mod) / 3
    close(g, gs)
    close(adv, [x - mu for x in mod])


def test_empg_matches_a_loop_on_random_odd_sizes():
    rng = random.Random(5)
    for B in (1, 7, 19):
        base = [rng.choice([0.0, 1.3, -0.7, rng.gauss(0, 1)]) for _ in range(B)]
        H = [rng.random() * 3 for _ in range(B)]
        nxt = [rng.choice([-1, rng.randrange(B)]) for _ in range(B)]
        k, kf, z = 0.7, 1.9, 0.3
        lo, hi = min(H), max(H)
        hn = [(h - lo) / (hi - lo + 1e-8) for h in H]
        gu = [math.exp(-k * x) for x in hn]
        gm = sum(gu) / B
        mod = [gu[b] / gm * base[b] + (z * math.exp(-kf * hn[nxt[b]]) if nxt[b] >= 0 else 0)
               for b in range(B)]
        mu = sum(mod) / B
        adv, _ = empg_step_advantages(torch.tensor(base, **F64), torch.tensor(H, **F64),
                                      torch.tensor(nxt), k=k, k_future=kf, zeta=z)
        close(adv, [x - mu for x in mod], 1e-12)
        assert abs(adv.sum().item()) < 1e-9


def test_empg_estimator_uses_the_step_entropy_and_the_next_turn():
    b = batch_of([(0, 1.0, [turn(3, "a"), turn(2, "b"), turn(4, "c")]),
                  (0, 0.0, [turn(5, "a")]), (1, 1.0, [turn(2, "a"), turn(2, "b")]),
                  (1, 0.0, [turn(3, "a")])])
    assert next_rows(b.traj_index, b.turn).tolist() == [1, 2, -1, -1, 5, -1, -1]
    g = torch.Generator().manual_seed(1)
    b.old_entropy = torch.rand(len(b), b.width, generator=g) * b.response_mask
    cfg = EstimatorConfig(empg_k=1.0, empg_k_future=1.0, empg_zeta=0.1)
    out = ESTIMATORS["empg"].fn(b, cfg)
    assert ESTIMATORS["empg"].needs_entropy and not ESTIMATORS["empg"].needs_teacher(cfg)
    H = step_entropy(b.old_entropy.double(), b.response_mask)
    close(H[1], b.old_entropy[1, :2].double().mean(), 1e-7)
    A = grouped_normalise(b.rewards.float(), b.group_of)[b.traj_index].double()
    want, _ = empg_step_advantages(A, H, next_rows(b.traj_index, b.turn), k=1.0, k_future=1.0,
                                   zeta=0.1)
    close(out.advantages.double(), want[:, None] * b.response_mask.double(), 1e-6)
    b.old_entropy = None
    with pytest.raises(ValueError, match="old_entropy"):
        ESTIMATORS["empg"].fn(b, cfg)


# ------------------------------------------------------------------ registry and config

def test_every_method_is_registered_with_its_needs():
    need = {"grpo": (False, False), "sharpo": (True, False), "gigpo": (False, False),
            "rlsd": (True, False), "serl": (True, False), "opsd": (True, False),
            "sdar": (True, False), "empg": (False, True)}
    for name, (teacher, entropy) in need.items():
        est = ESTIMATORS[name]
        params = est.params()
        assert (est.needs_teacher(params), est.needs_entropy) == (teacher, entropy), name
        assert load_config(None, [f"method={name}"]).method == name


@pytest.mark.parametrize("override", ["estimator.gigpo_mode=std", "estimator.rlsd_lam=1.5",
                                      "estimator.rlsd_warmdown_steps=0",
                                      "estimator.rlsd_clip_eps=1", "estimator.sdar_beta=-1",
                                      "estimator.gigpo_gamma=1.2"])
def test_bad_method_parameters_name_the_key(override):
    with pytest.raises(ValueError, match=override.split("=")[0].replace(".", r"\.")):
        load_config(None, [override])


def test_compare_parses_every_registered_method():
    from sharpo_train.errors import ConfigError
    from sharpo_train.recipes.recipe_config import parse_methods
    runs = parse_methods("grpo,sharpo:0.05,gigpo,rlsd:0.3,serl,opsd:0.2,sdar,empg:0.05")
    assert [r[1] for r in runs] == ["grpo", "sharpo-lam0.05", "gigpo", "rlsd-0.3", "serl",
                                    "opsd-0.2", "sdar", "empg-0.05"]
    assert runs[3][2] == ["method=rlsd", "estimator.rlsd_lam=0.3"]
    assert runs[2][2] == ["method=gigpo"] and runs[2][0] == "GiGPO"
    for label, slug, overrides in runs:       # every run's overrides load
        load_config(None, overrides)
    for bad, what in (("ppo", "unknown method"), ("rlsd:x", "rlsd"), ("rlsd:1.5", "rlsd_lam"),
                      ("grpo:1", "no knob"), ("sdar:-1", "sdar_coef")):
        with pytest.raises(ConfigError, match=f"^--methods: .*{what}"):
            parse_methods(bad)



def test_compare_arm_may_set_a_reward_setting_but_no_task_setting():
    """An arm's @env.<key> is allowed for an environment's reward settings only
    (EnvSpec.reward_settings: the corridor's format_penalty), never for what draws tasks."""
    from sharpo_train.errors import ConfigError
    from sharpo_train.recipes.recipe_config import parse_methods
    (label, slug, overrides), = parse_methods("grpo@env.format_penalty=0.5")
    assert slug == "grpo-format_penalty0.5" and overrides == ["method=grpo",
                                                              "env.format_penalty=0.5"]
    cfg = load_config(None, ["env.name=corridor", *overrides[1:]])
    assert cfg.env["format_penalty"] == 0.5
    for bad in ("grpo@env.num_turns=5", "grpo@env.seed=1", "grpo@env.name=alfworld"):
        with pytest.raises(ConfigError, match="reward setting .*env.format_penalty"):
            parse_methods(bad)

# ------------------------------------------------------------------ SHARPO weight_segments

def test_sharpo_weight_segments_action_keeps_w_1_on_reasoning_only():
    """estimator.weight_segments=action: think segments get the w = 1 coefficient (the
    value with gap 0), action segments the method's (``all``) value; rho unchanged."""
    b = teacher_batch()
    kw = dict(lam=1.0, alpha=0.9, tau=0.1)
    run = lambda batch, seg: ESTIMATORS["sharpo"].fn(
        batch, EstimatorConfig(weight_segments=seg, **kw).params("sharpo")).advantages
    full, action_only = run(b, "all"), run(b, "action")
    neutral = teacher_batch()
    neutral.teacher_logp = neutral.old_logp.clone()          # gap 0 everywhere: w = 1
    w1 = run(neutral, "all")
    think, action = segment_kind_mask(b, "think", "t"), segment_kind_mask(b, "action", "t")
    assert think.any() and action.any()
    torch.testing.assert_close(action_only[think], w1[think], rtol=0, atol=1e-6)
    torch.testing.assert_close(action_only[action], full[action], rtol=0, atol=1e-6)
    other = ~(think | action)
    torch.testing.assert_close(action_only[other], full[other], rtol=0, atol=1e-6)
    # the setting matters: the full weight departs from 1 on some reasoning token
    assert (full[think] - w1[think]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="weight_segments"):
        EstimatorConfig(weight_segments="think").params("sharpo").validate()


# ------------------------------------------------------------------ SHARPO weight_side

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sharpo_weight_side_down_caps_w_at_1_and_keeps_the_rest(seed):
    """estimator.weight_side=down: every token gets A_i * ((1 - lam) + lam * rho * min(w, 1))
    with w, rho the method's (``both``) values, read back segment by segment in float64;
    the records keep the teacher's own gap."""
    b = teacher_batch()
    g = torch.Generator().manual_seed(seed)
    b.teacher_logp = b.old_logp + torch.randn(len(b), b.width, generator=g) * b.response_mask
    kw = dict(lam=0.7, alpha=0.8, tau=0.3)
    run = lambda side: ESTIMATORS["sharpo"].fn(
        b, EstimatorConfig(weight_side=side, **kw).params("sharpo"))
    both, down = run("both"), run("down")
    A = both.base.double()                                             # [B]
    expected = both.advantages.double().clone()
    raised = 0
    for i in range(len(b)):
        for k in range(int(both.segments.num_segments[i])):
            w = float(both.segments.weight[i, k])
            rho = float(both.segments.length_factor[i, k])
            tok = (b.segment_ids[i] == k) & (b.response_mask[i] != 0)
            raised += w > 1
            expected[i, tok] = float(A[i]) * ((1 - 0.7) + 0.7 * rho * min(w, 1.0))
    assert raised > 0                                       # the setting matters here
    torch.testing.assert_close(down.advantages.double(), expected, rtol=0, atol=1e-5)
    w_down = down.segments.weight
    assert bool((w_down[~w_down.isnan()] <= 1).all())
    torch.testing.assert_close(down.segments.gap, both.segments.gap, equal_nan=True)
    with pytest.raises(ValueError, match="weight_side"):
        EstimatorConfig(weight_side="up").params("sharpo").validate()


def test_sharpo_weight_side_down_is_both_where_no_weight_exceeds_1():
    """weight_side=down changes nothing where the method's weight never exceeds 1: rows
    without a teacher (gap NaN), and a teacher that never agrees more with A_i's sign."""
    b = teacher_batch()
    run = lambda side: ESTIMATORS["sharpo"].fn(
        b, EstimatorConfig(weight_side=side, lam=1.0, alpha=0.9, tau=0.5).params("sharpo"))
    b.has_teacher = torch.zeros(len(b), dtype=torch.bool)              # no teacher anywhere
    torch.testing.assert_close(run("down").advantages, run("both").advantages, rtol=0, atol=0)
    b = teacher_batch()
    A = run("both").base
    # every token's gap has the opposite sign of A_i: w = 1 - u <= 1 on every segment
    b.teacher_logp = b.old_logp - torch.sign(A)[:, None] * 0.3 * b.response_mask
    both, down = run("both"), run("down")
    assert bool((both.segments.weight[~both.segments.weight.isnan()] <= 1).all())
    torch.testing.assert_close(down.advantages, both.advantages, rtol=0, atol=0)
