"""What SHARPO costs in TRL, counted at ``GRPOTrainer._get_per_token_logps_and_entropies``
(every policy forward TRL and the drop-in make): at lam = 0 exactly GRPOTrainer's passes;
at lam > 0 one more pass per step, over the rows that have a teacher only. The student
log-probs are the ones TRL computes anyway: its loss pass in its on-policy default (TRL
skips the old-log-prob pass), its old-log-prob pass when it runs one."""
import pytest
import torch

from integrations.trl_support import check_step, config, needs_trl, record_steps, script_sampling, tiny_policy

pytestmark = needs_trl

SUCCESS = "<think>the door is closed</think><action>open door</action>"
FAIL = "<think>hmm</think><action>look around</action>"


def reward_open(completions, **kw):
    return [1.0 if "open door" in c[-1]["content"] else 0.0 for c in completions]


def chat_data(n=8):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: get out of the room."}]}
                              for i in range(n)])


def run(tmp_path, monkeypatch, trainer_cls, **kw):
    """3 steps; -> (rows of each forward pass, in order; the recorded SHARPO steps or None)."""
    from trl import GRPOTrainer

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    passes, where = [], []
    inner = GRPOTrainer._get_per_token_logps_and_entropies
    inner_adv = SharpoGRPOTrainer._sharpo_advantages

    def counted(self, model, input_ids, *args, **kwargs):
        passes.append((int(input_ids.shape[0]), bool(where)))   # (rows, made by SHARPO's step)
        return inner(self, model, input_ids, *args, **kwargs)

    def advantages(self, out):
        where.append(True)
        try:
            return inner_adv(self, out)
        finally:
            where.pop()

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", counted)
    monkeypatch.setattr(SharpoGRPOTrainer, "_sharpo_advantages", advantages)
    model, tok = tiny_policy()
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    args = config(tmp_path, plain_trl=trainer_cls is GRPOTrainer, **kw)   # plain TRL: the same run
    trainer = trainer_cls(model=model, reward_funcs=reward_open, args=args, train_dataset=chat_data(),
                          processing_class=tok)
    steps = record_steps(trainer)[0] if trainer_cls is not GRPOTrainer else None
    trainer.train()
    monkeypatch.undo()
    return passes, steps, tok


@pytest.mark.parametrize("old_logps", [False, True])
def test_sharpo_adds_one_teacher_pass_over_teacher_rows_only(tmp_path, monkeypatch, old_logps):
    from trl import GRPOTrainer

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    # old_logps: steps_per_generation 2 > gradient_accumulation_steps 1, so TRL scores old
    # log-probs at generation time (its own pass) and SHARPO reads those
    kw = dict(steps_per_generation=2, per_device_train_batch_size=4) if old_logps else {}
    grpo, _, _ = run(tmp_path / "grpo", monkeypatch, GRPOTrainer, **kw)
    zero, _, _ = run(tmp_path / "zero", monkeypatch, SharpoGRPOTrainer, lam=0.0, **kw)
    some, steps, tok = run(tmp_path / "some", monkeypatch, SharpoGRPOTrainer, lam=0.5, **kw)
    assert zero == grpo and not any(by_sharpo for _, by_sharpo in grpo)   # lam = 0: GRPOTrainer's passes
    teacher = [len(s["teacher_rows"]) for s in steps]
    assert all(t > 0 for t in teacher)                   # a teacher pass on every step
    assert [n for n, by_sharpo in some if by_sharpo] == teacher   # one pass of the teacher rows ...
    assert [p for p in some if not p[1]] == grpo          # ... and else TRL's own passes, unchanged
    for s in steps:
        check_step(s, tok, 4)
