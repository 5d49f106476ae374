"""One whole v1 advantage step of SharpoPPOTrainerSync (verl's real PPOTrainer code paths
`_compute_old_log_prob` and the mixin's `_compute_advantage`), driven on CPU.

Stand-ins, and the only ones: verl's actor workers need GPUs (FSDP/Megatron engines on
Ray), so `CpuLogProbWorker` plays `actor_rollout_wg.compute_log_prob`, scoring with a
`transformers` model; TransferQueue (the v1 data plane, Ray actors) is replaced by the
in-memory `FakeTQ` with the same `kv_batch_get/kv_batch_put/kv_clear` calls. The trainer
object is made without `__init__` (which starts Ray workers).
"""
import numpy as np
import pytest
import torch

from integrations.reference import grpo_verl, sharpo_rows
from integrations.verl_support import needs_verl, row_log_probs

pytestmark = needs_verl


class FakeTQ:
    """In-memory TransferQueue: per partition, per key, per field one row tensor."""

    def __init__(self):
        self.store: dict[str, dict[str, dict]] = {}

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None, data_parser=None):
        from transfer_queue import KVBatchMeta

        part = self.store.setdefault(partition_id, {})
        names = list(fields.keys()) if fields is not None else []
        for i, k in enumerate(keys):
            row = part.setdefault(k, {})
            for name in names:
                row[name] = fields[name][i].clone()
        return KVBatchMeta(keys=list(keys), tags=list(tags) if tags else [{} for _ in keys],
                           partition_id=partition_id, fields=names)

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        from tensordict import TensorDict

        part = self.store[partition_id]
        names = select_fields or list(part[keys[0]].keys())
        out = {}
        for name in names:
            rows = [part[k][name] for k in keys]
            out[name] = (torch.stack(rows) if rows[0].dim() == 0
                         else torch.nested.as_nested_tensor(rows, layout=torch.jagged))
        return TensorDict(out, batch_size=len(keys))

    def kv_clear(self, keys, partition_id):
        for k in keys:
            self.store[partition_id].pop(k)


class CpuLogProbWorker:
    """Stand-in for verl's actor worker group (see the module docstring)."""

    def __init__(self, model, tq):
        self.model, self.tq, self.calls = model, tq, 0

    def compute_log_prob(self, meta):
        self.calls += 1
        td = self.tq.kv_batch_get(meta.keys, meta.partition_id, ["input_ids", "position_ids"])
        lps, ents = [], []
        for ids, pos in zip(td["input_ids"].unbind(0), td["position_ids"].unbind(0)):
            lp, ent = row_log_probs(self.model, ids, pos, meta.extra_info.get("temperature", 1.0))
            lps.append(lp)
            ents.append(ent)
        from tensordict import TensorDict
        fields = TensorDict({"log_probs": torch.nested.as_nested_tensor(lps, layout=torch.jagged),
                             "entropy": torch.nested.as_nested_tensor(ents, layout=torch.jagged)},
                            batch_size=len(meta.keys))
        self.tq.kv_batch_put(meta.keys, meta.partition_id, fields=fields)
        return meta


ROWS = [  # uid, session, index, reward, user text, response text
    ("u1", 0, 0, 1.0, "Task: heat an egg. You are in the kitchen.", "<think>find egg</think><action>go to fridge 1</action>"),
    ("u1", 0, 1, 1.0, "Task: heat an egg. You see an egg.", "<think>take it</think><action>take egg 1</action>"),
    ("u1", 1, 0, 0.0, "Task: heat an egg. You are in the kitchen.", "<action>look</action>"),
    ("u1", 2, 0, 1.0, "Task: heat an egg. You are in the kitchen.", "<think>egg in fridge</think><action>open fridge 1</action>"),
    ("u2", 0, 0, 0.0, "Task: cool a pan.", "<think>pan</think><action>go to stove 1</action>"),
    ("u2", 1, 0, 1.0, "Task: cool a pan.", "<think>stove</think><action>take pan 1</action>"),
    ("u2", 1, 1, 1.0, "Task: cool a pan. You hold a pan.", "<action>go to fridge 1</action>"),
]


def make_trainer(tq_fake, monkeypatch, estimator="sharpo", lam=0.3):
    from omegaconf import OmegaConf
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1 import get_trainer_cls, trainer_base

    import sharpo_train.integrations.verl as integ
    from sharpo_train.models.policy import build_policy

    monkeypatch.setattr(trainer_base, "tq", tq_fake)
    monkeypatch.setattr(integ, "tq", tq_fake)
    torch.manual_seed(0)
    model, tok = build_policy(None)
    model.eval()
    trainer = object.__new__(get_trainer_cls("sharpo_sync"))
    trainer.config = OmegaConf.create({
        "algorithm": {"adv_estimator": estimator, "use_kl_in_reward": False, "norm_adv_by_std_in_grpo": True,
                      "gamma": 1.0, "lam": 1.0,
                      "sharpo": {"lam": lam, "alpha": 0.5, "tau": 0.5, "max_hint_tokens": 48}},
        "data": {"max_prompt_length": 256},
        "actor_rollout_ref": {"rollout": {"temperature": 1.0, "calculate_log_probs": False, "n": 3},
                              "actor": {"loss_agg_mode": "token-mean", "loss_scale_factor": None}},
    })
    trainer.tokenizer = tok
    trainer.actor_rollout_wg = CpuLogProbWorker(model, tq_fake)

    from tensordict import TensorDict
    keys, rows = [], []
    for uid, sess, idx, r, user, resp in ROWS:
        s = tok.apply_chat_template([{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True)
        p = torch.tensor(tok(s, add_special_tokens=False)["input_ids"])
        a = torch.tensor(tok(resp + tok.eos_token, add_special_tokens=False)["input_ids"])
        ids = torch.cat([p, a])
        rm = torch.zeros(len(a))
        rm[-1] = r
        keys.append(f"{uid}_{sess}_{idx}")
        rows.append({"prompts": p, "responses": a, "response_mask": torch.ones(len(a), dtype=torch.long),
                     "input_ids": ids, "attention_mask": torch.ones(len(ids), dtype=torch.long),
                     "position_ids": torch.arange(len(ids)), "rm_scores": rm})
    fields = TensorDict({k: torch.nested.as_nested_tensor([r[k] for r in rows], layout=torch.jagged)
                         for k in rows[0]}, batch_size=len(rows))
    tq_fake.kv_batch_put(keys, "train", fields=fields)
    meta = KVBatchMeta(keys=keys, tags=[{"seq_len": len(r["input_ids"])} for r in rows], partition_id="train")
    return trainer, meta, model, tok, rows


def test_one_step_advantages_equal_the_reference(monkeypatch):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from sharpo_train.integrations.common import generation_suffix_ids, insert_hint
    from sharpo_train.integrations.verl import build_segment_ids, peer_hint_text

    fake = FakeTQ()
    trainer, meta, model, tok, rows = make_trainer(fake, monkeypatch)
    metrics: dict = {}
    meta = PPOTrainer._compute_old_log_prob(trainer, meta, metrics)       # verl's own code
    assert trainer.actor_rollout_wg.calls == 1 and "actor/entropy" in metrics
    trainer._compute_advantage(meta, metrics)                               # the mixin
    assert trainer.actor_rollout_wg.calls == 2                              # one teacher pass
    assert sorted(fake.store["train"]) == sorted(meta.keys)                 # teacher rows removed
    for k in ("sharpo/teacher_coverage", "sharpo/gap_mean", "sharpo/weight_mean"):
        assert k in metrics

    # independent expectation: full forward passes, GRPO per episode, float64 SHARPO
    B, R = len(rows), max(len(r["responses"]) for r in rows)
    episodes = sorted({(u, s) for u, s, *_ in ROWS}, key=[(u, s) for u, s, *_ in ROWS].index)
    ep_of = [episodes.index((u, s)) for u, s, *_ in ROWS]
    ep_r = [next(r for (u, s, _, r, *_) in ROWS if (u, s) == e) for e in episodes]
    a_ep = grpo_verl(ep_r, [u for u, _ in episodes])
    peer = {0: 2, 1: 0, 2: 0, 3: 4, 4: None}       # first other success in the uid group
    suffix = generation_suffix_ids(tok)
    old = torch.zeros(B, R)
    teacher = torch.zeros(B, R)
    has = torch.zeros(B, dtype=torch.bool)
    for b, row in enumerate(rows):
        n, P = len(row["responses"]), len(row["prompts"])
        old[b, :n] = row_log_probs(model, row["input_ids"])[0][P - 1:P - 1 + n]
        e = peer[ep_of[b]]
        if e is None:
            continue
        hint = peer_hint_text(tok, [rows[j]["responses"].tolist() for j in range(B) if ep_of[j] == e])
        tp = insert_hint(tok, row["prompts"].tolist(), hint, max_prompt_length=256 + 48, max_hint_tokens=48,
                         suffix_ids=suffix)
        assert tp is not None and len(tp) > P
        seq = torch.tensor(tp + row["responses"].tolist())
        teacher[b, :n] = row_log_probs(model, seq)[0][len(tp) - 1:len(tp) - 1 + n]
        has[b] = True
    mask = torch.zeros(B, R)
    for b, row in enumerate(rows):
        mask[b, :len(row["responses"])] = 1
    seg = build_segment_ids(tok, [r["responses"].tolist() for r in rows], R)
    base = torch.tensor([a_ep[e] for e in ep_of], dtype=torch.float64)
    ref = sharpo_rows(teacher, old, seg, mask, base, has, torch.tensor(ep_of), lam=0.3, alpha=0.5, tau=0.5)
    assert (teacher[has] - old[has]).abs().max() > 1e-3          # the hint changes the scores
    assert not torch.allclose(ref, base[:, None] * mask.double())   # and so the advantages

    got = fake.kv_batch_get(meta.keys, "train", ["advantages", "returns", "old_log_probs"])
    adv = torch.zeros(B, R)
    for b, v in enumerate(got["advantages"].unbind(0)):
        adv[b, :len(v)] = v
    torch.testing.assert_close(adv.double(), ref, rtol=1e-4, atol=1e-5)
    for b, v in enumerate(got["old_log_probs"].unbind(0)):
        torch.testing.assert_close(v, old[b, :len(v)], rtol=1e-4, atol=1e-5)
    from sharpo_train.step.teacher_rule import teacher_coverage      # episodes with a teacher row
    assert abs(metrics["sharpo/teacher_coverage"] - teacher_coverage(has, torch.tensor(ep_of))) < 1e-6


def test_other_estimators_go_to_verl(monkeypatch):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    fake = FakeTQ()
    trainer, meta, *_ = make_trainer(fake, monkeypatch, estimator="grpo")
    called = []
    monkeypatch.setattr(PPOTrainer, "_compute_advantage", lambda self, b, m: called.append(b) or b)
    trainer._compute_advantage(meta, {})
    assert called == [meta] and trainer.actor_rollout_wg.calls == 0


def test_lam_zero_runs_no_teacher_pass_and_gives_grpo(monkeypatch):
    """lam = 0 costs nothing beyond verl's own GRPO step: no teacher batch, no
    compute_log_prob call after verl's old-log-prob pass; the advantages are GRPO's over
    episodes and the dashboard says so (coverage 0, weight 1)."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    fake = FakeTQ()
    trainer, meta, model, tok, rows = make_trainer(fake, monkeypatch, lam=0.0)
    metrics: dict = {}
    meta = PPOTrainer._compute_old_log_prob(trainer, meta, metrics)
    assert trainer.actor_rollout_wg.calls == 1
    trainer._compute_advantage(meta, metrics)
    assert trainer.actor_rollout_wg.calls == 1                              # no teacher pass
    assert sorted(fake.store["train"]) == sorted(meta.keys)
    assert metrics["sharpo/teacher_coverage"] == 0.0 and metrics["sharpo/weight_mean"] == 1.0
    assert metrics["sharpo/segments_scored"] == 0

    episodes = sorted({(u, s) for u, s, *_ in ROWS}, key=[(u, s) for u, s, *_ in ROWS].index)
    ep_of = [episodes.index((u, s)) for u, s, *_ in ROWS]
    ep_r = [next(r for (u, s, _, r, *_) in ROWS if (u, s) == e) for e in episodes]
    a_ep = grpo_verl(ep_r, [u for u, _ in episodes])
    got = fake.kv_batch_get(meta.keys, "train", ["advantages", "returns"])
    for b, (adv, ret) in enumerate(zip(got["advantages"].unbind(0), got["returns"].unbind(0))):
        want = torch.full_like(adv, float(a_ep[ep_of[b]]))
        torch.testing.assert_close(adv, want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ret, want, rtol=1e-5, atol=1e-6)
