"""Shared helpers for the trainer tests (no tests here; imported by tests/train/test_trainer*.py)."""
from __future__ import annotations

import random

import torch

from sharpo_train.step.batch import StepBatch
from sharpo_train.loops.train_config import config_from_dict
from sharpo_train.envs import env_prompts, make_suite
from sharpo_train.models.policy import build_policy, save_policy
from sharpo_train.step.rollout import chat_prompt_ids
from sharpo_train.step.scoring import tree_logprobs
from sharpo_train.step.update import policy_logprobs, update_policy

SYNTHETIC = {"name": "synthetic", "num_train": 8, "num_eval": 2, "max_steps": 3, "max_distance": 1}


def small_config(run_dir, **over) -> "Config":
    data = {
        "method": "sharpo", "seed": 0, "total_steps": 2, "run_dir": str(run_dir),
        "env": dict(SYNTHETIC),
        "model": {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "device": "cpu",
                  "cpu_threads": 1},
        "rollout": {"tasks_per_step": 2, "group_size": 4, "max_turns": 3, "max_new_tokens": 24},
        "optim": {"lr": 1e-3, "micro_batch_size": 8},
        "log": {"progress": False},
        "eval": {"at_end": False, "num_tasks": 2},
    }
    for key, value in over.items():
        section, _, leaf = key.partition("__")
        if leaf:
            data.setdefault(section, {})[leaf] = value
        else:
            data[key] = value
    return config_from_dict(data)


def format_warm_start(out_dir, model_cfg: dict, steps: int = 60, seed: int = 0) -> str:
    """Teach a tiny random policy the reply format on the synthetic task (supervised, a
    few seconds) so that rollouts parse, some succeed and some fail: what the SHARPO path
    needs (successful peers). Returns the saved directory (for init_from)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # tiny matrices: one thread is faster on 2 busy cores
    try:
        return _warm_start(out_dir, model_cfg, steps, seed)
    finally:
        torch.set_num_threads(threads)


def _warm_start(out_dir, model_cfg: dict, steps: int, seed: int) -> str:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model, tok = build_policy(model_cfg)
    suite = make_suite(dict(SYNTHETIC))
    prompts = env_prompts(dict(SYNTHETIC))
    examples = []
    for task in suite.train_tasks[:4]:
        start, target = (int(x) for x in task.source.split(":"))
        for n_hist in (0, 2):
            history = [(f"The counter shows {start}.", rng.choice(["increase", "decrease"]))] * n_hist
            text = prompts.render_turn_prompt(f"Your task is to: make the counter show {target}.",
                                              history, f"You see a counter. The counter shows {start}.",
                                              ["increase", "decrease"])
            p = chat_prompt_ids(tok, text)
            for action in ("increase", "decrease"):     # both: the policy stays uncertain
                r = tok(f"<think>I press {action}.</think><action>{action}</action>")["input_ids"]
                examples.append((p, r + [tok.eos_token_id]))
    # one padded batch of every example; loss on the response tokens only
    T = max(len(p) + len(r) for p, r in examples)
    ids = torch.zeros(len(examples), T, dtype=torch.long)
    labels = torch.full((len(examples), T), -100, dtype=torch.long)
    for b, (p, r) in enumerate(examples):
        ids[b, :len(p) + len(r)] = torch.tensor(p + r)
        labels[b, len(p) - 1:len(p) - 1 + len(r)] = torch.tensor(r)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    save_policy(model, tok, out_dir)
    return str(out_dir)


# ---------------------------------------------------------------- one update on two rows
def two_rows(tok):
    """A StepBatch of two rows of one group (row 0 rewarded, ending in EOS; row 1 longer, no
    EOS) on one prompt; returns (batch, (response ids 0, response ids 1))."""
    p = chat_prompt_ids(tok, "Your task is to: make the counter show 3.")
    r0 = tok("<think>up</think><action>increase</action>")["input_ids"] + [tok.eos_token_id]
    r1 = tok("<think>down</think><action>decrease</action> and more words")["input_ids"]
    L = max(len(r0), len(r1))
    mask = torch.zeros(2, L)
    mask[0, :len(r0)] = 1
    mask[1, :len(r1)] = 1
    return StepBatch(rewards=torch.tensor([1.0, 0.0]), group_of=torch.tensor([0, 0]),
                     traj_index=torch.tensor([0, 1]), response_mask=mask,
                     segment_ids=torch.full((2, L), -1), prompt_ids=[p, p],
                     response_ids=[r0, r1], turn=[0, 0]), (r0, r1)


def sampled_logprobs(model, rows) -> torch.Tensor:
    """[B, width] log-probs of each row's response tokens under model (0 on padding)."""
    out = torch.zeros(len(rows.response_ids), rows.width)
    with torch.no_grad():
        for b, lp in enumerate(tree_logprobs(model, rows.sequences(), rows.response_lengths())):
            out[b, :len(lp)] = lp
    return out


def sgd_step(model, rows, cfg):
    """One update_policy step with SGD (lr 0.5, constant schedule, sampling seed 0) on rows
    (old_logp and advantages set); returns (its stats, the [B, width] log-probs after it)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    stats = update_policy(model, opt, sched, rows, cfg, temperature=1.0,
                          generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        new, _ = policy_logprobs(model, rows.prompt_ids, rows.response_ids, rows.width)
    return stats, new
