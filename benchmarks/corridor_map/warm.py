"""What a cell's warm start knows, and what its SFT data held (benchmarks/RESULTS.md,
"Where SHARPO helps", item 4: where the warm start fails, measured why).

* ``play_diagnosis``: the warm start plays the held-out tasks exactly as the compare's
  eval/warm-start does (the same config, tasks, episodes per task and torch seed: its
  success is the recorded one), and the lamp turns of those episodes give the right-door
  rate and the invalid-reply rate at a lamp;
* ``data_diagnosis``: the SFT examples as the SFT run builds them (the plain turns of
  demos.jsonl and a hinted copy of every lamp turn, loops/sft.py), tokenized: the longest
  example against ``sft.max_length`` (and how many the SFT cut), the share of the trained
  (target) tokens and of all tokens that come from lamp turns, and the demonstrations' own
  right-door rate at a lamp.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path


def lamp_rates(episodes) -> dict:
    """{"lamp_turns", "right_door", "invalid"} over the lamp turns of corridor episodes
    (step/rollout.py Episodes): right door = the lamp's door, invalid = no door parsed."""
    from sharpo_train.envs.corridor.engine import task_spec
    n = right = invalid = 0
    for ep in episodes:
        decisive = task_spec(ep.task)["decisive"]
        doors = set(task_spec(ep.task)["actions"])
        for t, turn in enumerate(ep.turns, start=1):
            lamp = decisive.get(str(t))
            if lamp is None:
                continue
            n += 1
            right += turn.action == lamp[1]
            invalid += turn.action not in doors
    return {"lamp_turns": n, "right_door": right / n if n else None,
            "invalid": invalid / n if n else None}


def play_diagnosis(sft_dir: Path, cfg, tasks) -> dict:
    """The warm start on ``tasks`` as evaluate_checkpoint plays them (loops/evaluate.py):
    success, and lamp_rates of the same episodes."""
    import torch

    from sharpo_train.envs import env_prompts, make_suite
    from sharpo_train.loops.evaluate import eval_only_env
    from sharpo_train.models.device import resolve_device
    from sharpo_train.models.policy import build_policy
    from sharpo_train.step.rollout import collect_rollouts

    cfg = copy.deepcopy(cfg)
    cfg.env = eval_only_env(cfg.env, None)
    suite = make_suite(cfg.env)
    r, ev = cfg.rollout, cfg.eval
    threads = torch.get_num_threads()
    if cfg.model.cpu_threads:
        torch.set_num_threads(cfg.model.cpu_threads)
    pool = suite.make_pool(r.num_env_workers)
    try:
        torch.manual_seed(cfg.seed)
        model, tokenizer = build_policy(cfg.model, weights_from=sft_dir, weights_key=str(sft_dir))
        model.to(resolve_device(cfg.model.device)).eval()
        episodes = collect_rollouts(
            model, tokenizer, pool, list(tasks), ev.episodes_per_task, env_prompts(cfg.env),
            max_turns=ev.max_turns or r.max_turns, max_new_tokens=r.max_new_tokens,
            temperature=ev.temperature, top_p=r.top_p, history_length=r.history_length,
            max_prompt_tokens=r.max_prompt_tokens, generation_batch_size=r.generation_batch_size,
            autocast_bf16=cfg.model.autocast_bf16)
    finally:
        pool.close()
        torch.set_num_threads(threads)
    out = {"episodes": len(episodes),
           "success": sum(bool(ep.success) for ep in episodes) / max(len(episodes), 1)}
    out.update(lamp_rates(episodes))
    return out


def demo_lamp_rate(records, train_tasks) -> dict:
    """The demonstrations' own right-door rate at a lamp: over the records whose turn has a
    lamp (``hint_informative``), the share whose action is the lamp's door. A record's turn
    is its ``step`` + 1 (demos.py numbers the turns from 0)."""
    from sharpo_train.envs.corridor.engine import task_spec
    by_id = {t.id: task_spec(t) for t in train_tasks}
    n = right = 0
    for rec in records:
        if not rec.get("hint_informative"):
            continue
        lamp = by_id[rec["task_id"]]["decisive"].get(str(int(rec["step"]) + 1))
        if lamp is None:
            raise ValueError(f"demos: record {rec.get('episode')} step {rec['step']} is marked "
                             f"a lamp turn but its task has no lamp there")
        n += 1
        right += rec["action"] == lamp[1]
    return {"demo_lamp_turns": n, "demo_right_door": right / n if n else None}


def token_shares(kinds_and_examples, max_length: int) -> dict:
    """``kinds_and_examples``: [(kind, (input ids, labels))] with kind "lamp", "lamp_hinted"
    or "free", encoded untruncated. -> the longest example, how many exceed ``max_length``,
    and each kind's share of the target tokens (labels != -100) and of all tokens."""
    target = {"lamp": 0, "lamp_hinted": 0, "free": 0}
    total = dict(target)
    longest = over = 0
    for kind, (ids, labels) in kinds_and_examples:
        if kind not in target:
            raise ValueError(f"token_shares: unknown kind {kind!r}")
        target[kind] += sum(1 for x in labels if x != -100)
        total[kind] += len(ids)
        longest = max(longest, len(ids))
        over += len(ids) > max_length
    t_all, n_all = sum(target.values()), sum(total.values())
    return {"examples": len(kinds_and_examples), "longest": longest, "max_length": max_length,
            "over_max_length": over,
            "lamp_target_share": (target["lamp"] + target["lamp_hinted"]) / t_all if t_all else None,
            "plain_lamp_target_share": target["lamp"] / t_all if t_all else None,
            "lamp_token_share": (total["lamp"] + total["lamp_hinted"]) / n_all if n_all else None}


def data_diagnosis(demos_path: Path, sft_cfg, train_tasks) -> dict:
    """token_shares of the SFT examples the run built from ``demos_path`` (plain turns and
    the hinted copies, loops/sft.py) and demo_lamp_rate of the demonstrations."""
    from sharpo_train.loops.sft import encode_example, end_of_turn_ids, hinted_demos
    from sharpo_train.models.policy import build_policy

    records = [json.loads(line) for line in Path(demos_path).read_text().splitlines()
               if line.strip()]
    examples = [("lamp" if r.get("hint_informative") else "free", r["messages"]) for r in records]
    if sft_cfg.hint_fraction > 0:
        if sft_cfg.hint_every_turn:
            raise ValueError("data_diagnosis: sft.hint_every_turn copies are not split by kind")
        examples += [("lamp_hinted", m) for m in hinted_demos(
            demos_path, sft_cfg.hint_fraction, sft_cfg.seed, sft_cfg.hint_settings(),
            sft_cfg.hint_env, sft_cfg.hint_every_turn)]
    _model, tokenizer = build_policy(sft_cfg.model)
    eot = end_of_turn_ids(tokenizer)
    encoded = [(k, encode_example(tokenizer, m, eot, 10 ** 9)) for k, m in examples]
    out = token_shares(encoded, sft_cfg.max_length)
    out.update(demo_lamp_rate(records, train_tasks))
    return out
