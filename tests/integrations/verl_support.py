"""Shared by the verl integration tests: the skip marker (they run in .venv-verl, which
`make test` builds; verl 0.9.1 needs transformers<5.11, so it is not in the main venv),
a CPU stand-in for the actor worker group, verl-agent-shaped rollout rows and their
expected SHARPO advantages."""
import importlib.util

import pytest

HAVE_VERL = importlib.util.find_spec("verl") is not None
needs_verl = pytest.mark.skipif(
    not HAVE_VERL, reason="verl is not installed in this venv; the verl integration tests run in "
                          ".venv-verl (`make test` builds it from constraints-verl.txt)")


# ------------------------------------------------------------ shared by the verl tests
def row_log_probs(model, ids, pos=None, temperature=1.0):
    """[L] log p(ids[t+1] | ids[:t+1]) at t (0 at the last position), and entropy [L]."""
    import torch

    with torch.no_grad():
        kw = {} if pos is None else {"position_ids": pos[None]}
        logits = model(input_ids=ids[None], **kw).logits[0].float() / temperature
    logp = torch.log_softmax(logits, -1)
    lp = torch.zeros(len(ids))
    lp[:-1] = logp[:-1].gather(-1, ids[1:, None])[:, 0]
    ent = -(logp.exp() * logp).sum(-1)
    return lp, ent


class CpuActorWorkerGroup:
    """Stand-in for a legacy verl / verl-agent ``actor_rollout_wg`` (its FSDP workers need
    GPUs): ``compute_log_prob(DataProto)`` scores the response tokens of every row with a
    ``transformers`` model, row by row on the unpadded tokens, and returns
    ``old_log_probs`` / ``entropys`` [n, T] as verl-agent's worker does. Like verl's
    DP_COMPUTE_PROTO dispatch, it refuses a batch that does not split over ``world_size``.
    Every call's input is kept in ``calls``."""

    def __init__(self, model, world_size=2, temperature=1.0):
        self.model, self.world_size, self.temperature, self.calls = model, world_size, temperature, []

    def compute_log_prob(self, data):
        import torch

        n = len(data)
        if n % self.world_size:
            raise AssertionError(f"batch of {n} rows does not split over {self.world_size} workers")
        self.calls.append(data)
        b = data.batch
        T = b["responses"].shape[1]
        lps, ents = torch.zeros(n, T), torch.zeros(n, T)
        for r in range(n):
            real = b["attention_mask"][r].bool()
            p, m = int(real[:-T].sum()), int(real[-T:].sum())
            lp, ent = row_log_probs(self.model, b["input_ids"][r][real], b["position_ids"][r][real], self.temperature)
            lps[r, :m], ents[r, :m] = lp[p - 1:p - 1 + m], ent[p - 1:p - 1 + m]
        return type(data).from_dict(tensors={"old_log_probs": lps, "entropys": ents})


# verl-agent's ALFWorld layout: rewards 10/0; uid, traj_uid, episode reward, then each step's
# (observation, response, action valid)
AGENT_EPISODES = [
    ("g1", "t0", 10.0, [("Task: heat an egg. You are in the kitchen.", "<think>find egg</think><action>go to fridge 1</action>", True),
                        ("Task: heat an egg. You see an egg.", "<think>take it</think><action>take egg 1</action>", True)]),
    ("g1", "t1", 0.0, [("Task: heat an egg. You are in the kitchen.", "<action>look around</action>", False),
                       ("Task: heat an egg. Nothing happens.", "<think>hmm</think><action>go to fridge 1</action>", True)]),
    ("g1", "t2", 10.0, [("Task: heat an egg. You are in the kitchen.", "<think>egg in fridge</think><action>open fridge 1</action>", True)]),
    ("g2", "t3", 0.0, [("Task: cool a pan.", "<think>pan</think><action>go to stove 1</action>", True)]),
    ("g2", "t4", 10.0, [("Task: cool a pan.", "<think>stove</think><action>take pan 1</action>", False),
                        ("Task: cool a pan. You hold a pan.", "<action>go to fridge 1</action>", True),
                        ("Task: cool a pan. At the fridge.", "<think>cool</think><action>cool pan 1 with fridge 1</action>", True)]),
    ("g3", "t5", 0.0, [("Task: clean a mug.", "<action>inventory</action>", False)]),
]
AGENT_PEERS = {"t0": "t2", "t1": "t0", "t2": "t0", "t3": "t4", "t4": None, "t5": None}


# groups of one episode (docs/method.md §1): t6 with two steps, t7 with one
AGENT_SOLO = [
    ("g4", "t6", 10.0, [("Task: find a key. You are in a hall.", "<think>key</think><action>open drawer 1</action>", True),
                        ("Task: find a key. The drawer is open.", "<think>got it</think><action>take key 1</action>", True)]),
    ("g5", "t7", 10.0, [("Task: open the door.", "<think>door</think><action>open door 1</action>", True)]),
]


def agent_step_rows(tok, episodes=AGENT_EPISODES):
    """One dict per environment step in verl-agent's order (episode by episode, steps in
    order): prompt / response ids (unpadded), uid, traj_uid, episode reward, action valid,
    and ``anchor``: the observation text of the step (verl-agent's ``anchor_obs``)."""
    rows = []
    for uid, traj, reward, steps in episodes:
        for obs, resp, valid in steps:
            s = tok.apply_chat_template([{"role": "user", "content": obs}], tokenize=False, add_generation_prompt=True)
            rows.append({"prompt": tok(s, add_special_tokens=False)["input_ids"],
                         "response": tok(resp + tok.eos_token, add_special_tokens=False)["input_ids"],
                         "uid": uid, "traj_uid": traj, "reward": reward, "valid": valid, "anchor": obs,
                         "text": resp})
    return rows


def step_grpo(rows, coef, batch_rows=None, norm=True):
    """[len(rows)] float64: verl-agent's GRPO (compute_mean_std_cross_steps, its default)
    read as written: each row of the batch (``batch_rows``: rollout row of every batch row,
    copies included; default each once) scores episode reward - coef on an invalid step;
    mean and unbiased std over the batch rows of its uid group (one row: 0 and 1)."""
    from integrations.reference import grpo_verl

    batch_rows = list(range(len(rows))) if batch_rows is None else list(batch_rows)
    score = [rows[r]["reward"] - (0.0 if rows[r]["valid"] else coef) for r in batch_rows]
    adv = grpo_verl(score, [rows[r]["uid"] for r in batch_rows], norm=norm)
    out = [None] * len(rows)
    for r, a in zip(batch_rows, adv):
        out[r] = a
    return out


def agent_hint(rows, peer):
    """The hint body written from docs/method.md §3: the peer's steps in order, each its
    action with the next step's observation (none after the last)."""
    import re

    steps = [r for r in rows if r["traj_uid"] == peer]
    lines = []
    for k, r in enumerate(steps):
        act = re.findall(r"<action>(.*?)</action>", r["text"])[-1]
        after = f" -> {steps[k + 1]['anchor']}" if k + 1 < len(steps) else ""
        lines.append(f"{k + 1}. {act}{after}")
    return "\n".join(lines)


def expected_agent_advantages(model, tok, rows, *, base, lam, alpha, tau, max_prompt_length, max_hint_tokens,
                              width, peers=AGENT_PEERS, penalty=None):
    """[len(rows), width] float64 SHARPO advantages written from docs/method.md for rows in
    episode/step order (no copies): ``base`` [len(rows)] the A_i of each row, full forward
    passes for student and teacher log-probs, the peer's steps with their observations as
    the hint; ``penalty`` [len(rows)] (base=episode_grpo) added on the row's tokens. Also
    returns the expected teacher prompts (or None)."""
    import torch

    from integrations.reference import sharpo_rows
    from sharpo_train.integrations.common import generation_suffix_ids, insert_hint
    from sharpo_train.integrations.verl import build_segment_ids

    episodes = list(dict.fromkeys(r["traj_uid"] for r in rows))
    ep_of = [episodes.index(r["traj_uid"]) for r in rows]
    suffix = generation_suffix_ids(tok)
    B = len(rows)
    old, teacher, mask = torch.zeros(B, width), torch.zeros(B, width), torch.zeros(B, width)
    has = torch.zeros(B, dtype=torch.bool)
    t_prompts = []
    for b, row in enumerate(rows):
        p, n = len(row["prompt"]), len(row["response"])
        mask[b, :n] = 1
        old[b, :n] = row_log_probs(model, torch.tensor(row["prompt"] + row["response"]))[0][p - 1:p - 1 + n]
        peer = peers.get(row["traj_uid"])
        tp = None
        if peer is not None:
            tp = insert_hint(tok, row["prompt"], agent_hint(rows, peer), max_prompt_length=max_prompt_length,
                             max_hint_tokens=max_hint_tokens, suffix_ids=suffix)
        t_prompts.append(tp)
        if tp is not None:
            seq = torch.tensor(tp + row["response"])
            teacher[b, :n] = row_log_probs(model, seq)[0][len(tp) - 1:len(tp) - 1 + n]
            has[b] = True
    seg = build_segment_ids(tok, [r["response"] for r in rows], width)
    ref = sharpo_rows(teacher, old, seg, mask, torch.tensor(base, dtype=torch.float64), has, torch.tensor(ep_of),
                      lam=lam, alpha=alpha, tau=tau)
    if penalty is not None:
        ref = ref + torch.tensor(penalty, dtype=torch.float64)[:, None] * mask.double()
    return ref, t_prompts
