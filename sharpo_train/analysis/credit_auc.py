"""Credit quality, the per-step metric: does a method's per-token credit land on the right
actions? (docs/credit_quality.md; offline rescoring of saved batches: rescoring.py)

An environment that can label actions offers a labeller (``EnvSpec.plan_labels``;
ALFWorld's planner: envs/alfworld/plan_labels.py): every action of a rollout is **on-plan**
(it deserves credit) or **off-plan** (invalid actions, detours, undoing progress).
``action_credit`` turns a method's [B, L] advantages into one
coefficient per action (advantage / A_i); ``credit_auc`` scores how well the coefficients
separate the actions that deserve credit from those that do not:

- in a successful rollout (A_i > 0) an on-plan action should get the larger coefficient
  (more credit), in a failed one (A_i < 0) an off-plan action should (more blame: its
  advantage is more negative);
- AUC = over all pairs (deserving, undeserving) of actions *of the same rollout*, the
  fraction where the deserving one has the larger coefficient, ties counting 1/2. GRPO
  gives every token of a rollout A_i, so every coefficient is 1, every pair ties and its
  AUC is 0.5 by construction. The interval is a percentile bootstrap over groups.

Shapes: N episodes, B rows (one per generated turn), L the longest response, S labelled
action segments.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

# counts of a labeller's ``stats`` logged per step as credit_quality/<key> (when present)
LABELLER_COUNTS = ("planner_calls", "cache_hits", "mismatches")
TIE_TOLERANCE = 1e-6        # |c_p - c_q| <= tol * max(1, |c_p|, |c_q|) counts as a tie


# ------------------------------------------------------------------------- coefficients
@dataclasses.dataclass
class Segments:
    """S labelled action segments with A_i != 0: one entry per turn."""
    coeff: np.ndarray       # [S] float64 mean advantage over the action's tokens / A_i
    on_plan: np.ndarray     # [S] bool
    success: np.ndarray     # [S] bool: the rollout succeeded (A_i > 0 in a mixed group)
    rollout: np.ndarray     # [S] int64 rollout id (unique within what is scored together)
    group: np.ndarray       # [S] int64 group id (unit of the bootstrap)
    coeff_sum: np.ndarray = None   # [S] float64 summed advantage over the action's tokens / A_i

    @staticmethod
    def concat(parts: list["Segments"]) -> "Segments":
        if not parts:
            z = np.zeros(0)
            return Segments(z, z.astype(bool), z.astype(bool), z.astype(np.int64),
                            z.astype(np.int64), z)
        return Segments(*(np.concatenate([getattr(p, f.name) for p in parts])
                          for f in dataclasses.fields(Segments)))


def action_credit(batch, advantages: torch.Tensor, labels, *, offset: int = 0
                         ) -> Segments:
    """The labelled action segments of a ``StepBatch`` under ``advantages`` [B, L].

    Per row b (episode e, turn t) with A_e = ``batch.episode_adv[e]`` != 0 and a label:
    coefficient = mean of advantages[b] over the tokens of the turn's action span
    (step/segments.py), or over all its response tokens when it has none (an unparsable reply,
    executed as an invalid action), divided by A_e (the per-token credit); coeff_sum = the
    same sum without dividing by the span's length (the segment's total credit, what
    SHARPO's length factor balances: docs/method.md §4). ``labels`` [N][turns];
    ``offset`` is added to episode and group ids (to pool several steps)."""
    adv = advantages.detach().double().cpu()
    ea = batch.episode_adv.double().cpu()
    rows = []
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        lab = labels[e][t] if t < len(labels[e]) else None
        a_e = float(ea[e])
        if lab is None or a_e == 0.0:
            continue
        turn = batch.episodes[e].turns[t]
        span = next((s for s in turn.spans if s.kind == "action"), None)
        lo, hi = (span.start, span.end) if span else (0, len(turn.response_ids))
        if hi <= lo:
            continue
        total = float(adv[b, lo:hi].sum()) / a_e
        rows.append((total / (hi - lo), bool(lab), bool(batch.episodes[e].success), offset + e,
                     offset + int(batch.group_of[e]), total))
    if not rows:
        return Segments.concat([])
    c, lab, succ, roll, grp, tot = zip(*rows)
    return Segments(np.array(c, dtype=np.float64), np.array(lab), np.array(succ),
                    np.array(roll, dtype=np.int64), np.array(grp, dtype=np.int64),
                    np.array(tot, dtype=np.float64))


# ------------------------------------------------------------------------- AUC
def _pair_scores(deserving: np.ndarray, other: np.ndarray) -> float:
    """Sum over pairs of [c_p > c_q] + 1/2 [tie] (c_p from ``deserving``)."""
    if not deserving.size or not other.size:
        return 0.0
    d = deserving[:, None] - other[None, :]
    tol = TIE_TOLERANCE * np.maximum(1.0, np.maximum(np.abs(deserving)[:, None], np.abs(other)[None, :]))
    return float(np.where(np.abs(d) <= tol, 0.5, (d > 0).astype(np.float64)).sum())


def credit_auc(coeffs, labels, success, rollout, group=None, *, n_boot: int = 1000,
               seed: int = 0, level: float = 0.95) -> dict:
    """Within-rollout credit AUC (module docstring, docs/credit_quality.md).

    coeffs [S] float (advantage / A_i per action segment), labels [S] bool (on-plan),
    success [S] bool (the segment's rollout succeeded), rollout [S] int (pairs only form
    within one rollout), group [S] int (bootstrap unit; None: no interval).
    Returns auc, auc_success, auc_failure (NaN without pairs), lo/hi (the ``level``
    percentile bootstrap interval over groups, NaN without groups), pairs, segments,
    on_plan_frac."""
    c = np.asarray(coeffs, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(success, dtype=bool)
    r = np.asarray(rollout, dtype=np.int64)
    S = c.shape[0]
    for name, v in (("labels", y), ("success", s), ("rollout", r)):
        if v.shape != (S,):
            raise ValueError(f"{name}: expected shape ({S},) like coeffs, got {v.shape}")
    if c.ndim != 1:
        raise ValueError(f"coeffs: expected a 1-D array, got shape {c.shape}")
    if not np.isfinite(c).all():
        raise ValueError("coeffs: must be finite")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    g = None if group is None else np.asarray(group, dtype=np.int64)
    if g is not None and g.shape != (S,):
        raise ValueError(f"group: expected shape ({S},) like coeffs, got {g.shape}")
    # per rollout: wins and pairs, split by outcome
    stats = []   # (group, success, wins, pairs)
    for rid in np.unique(r):
        m = r == rid
        succ = bool(s[m][0])
        if (s[m] != succ).any():
            raise ValueError(f"success: rollout {rid} has segments with both outcomes")
        deserving = y[m] if succ else ~y[m]
        n_p, n_q = int(deserving.sum()), int((~deserving).sum())
        if n_p and n_q:
            stats.append((int(g[m][0]) if g is not None else 0, succ,
                          _pair_scores(c[m][deserving], c[m][~deserving]), n_p * n_q))
    nan = float("nan")

    def ratio(rows):
        p = sum(x[3] for x in rows)
        return sum(x[2] for x in rows) / p if p else nan
    out = {"auc": ratio(stats), "auc_success": ratio([x for x in stats if x[1]]),
           "auc_failure": ratio([x for x in stats if not x[1]]),
           "lo": nan, "hi": nan, "pairs": int(sum(x[3] for x in stats)), "segments": S,
           "on_plan_frac": float(y.mean()) if S else nan,
           "groups": int(len(np.unique(g))) if g is not None and S else 0}
    if g is not None and stats and n_boot > 0:
        groups = np.unique(g)
        idx = {k: i for i, k in enumerate(groups)}
        wins = np.zeros(len(groups))
        pairs = np.zeros(len(groups))
        for grp, _, w, p in stats:
            wins[idx[grp]] += w
            pairs[idx[grp]] += p
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, len(groups), size=(n_boot, len(groups)))
        pw, pp = wins[draws].sum(1), pairs[draws].sum(1)
        boots = pw[pp > 0] / pp[pp > 0]
        if boots.size:
            out["lo"] = float(np.quantile(boots, (1 - level) / 2))
            out["hi"] = float(np.quantile(boots, 1 - (1 - level) / 2))
    return out


def step_credit_quality(batch, advantages: torch.Tensor, labels, *, n_boot: int = 200,
                        seed: int = 0) -> dict:
    """The ``credit_quality/*`` metrics of one step (docs/run_directory.md)."""
    seg = action_credit(batch, advantages, labels)
    res = credit_auc(seg.coeff, seg.on_plan, seg.success, seg.rollout, seg.group,
                     n_boot=n_boot, seed=seed)
    res_sum = credit_auc(seg.coeff_sum, seg.on_plan, seg.success, seg.rollout, n_boot=0)
    flat = [x for ep in labels for x in ep]
    known = [x for x in flat if x is not None]
    return {"credit_quality/auc": res["auc"], "credit_quality/auc_lo": res["lo"],
            "credit_quality/auc_hi": res["hi"], "credit_quality/auc_success": res["auc_success"],
            "credit_quality/auc_failure": res["auc_failure"],
            "credit_quality/auc_sum": res_sum["auc"], "credit_quality/pairs": res["pairs"],
            "credit_quality/segments": res["segments"],
            "credit_quality/labelled_frac": len(known) / max(len(flat), 1),
            "credit_quality/on_plan_frac": (sum(known) / len(known)) if known else float("nan")}
