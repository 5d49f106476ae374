"""Report fixtures: a synthetic run directory with one credit record (docs/method.md §4)
and a metrics.jsonl, for the credit-quality, table and explain tests."""
import json
import math
from pathlib import Path

import pytest

# ---------------------------------------------------------------- report fixtures
# A synthetic run directory for the report tests: one credit record with a mixed group whose
# numbers follow docs/method.md §4, and a metrics.jsonl with train and eval rows.

_LAM, _ALPHA, _TAU, _RHO_MIN, _RHO_MAX = 0.2, 0.5, 1.0, 0.25, 4.0


def _u(z):
    return max(-_ALPHA, min(_ALPHA, 2 / (1 + math.exp(-z / _TAU)) - 1))


def _make_rollout(index, success, adv, gaps_tokens, hint_from):
    """gaps_tokens: per turn, [(think_gap, think_tokens), (action_gap, action_tokens)]."""
    sizes = [m for turn in gaps_tokens for _, m in turn]
    mbar = sum(sizes) / len(sizes)
    has_teacher = hint_from is not None
    turns = []
    for t, turn in enumerate(gaps_tokens):
        segments, texts = [], []
        for (gap, m), kind in zip(turn, ("think", "action")):
            text = (f"<think>step {t} plan {index}</think>" if kind == "think"
                    else f"<action>go to shelf {t + 1}</action>")
            texts.append(text)
            if has_teacher:
                w = 1 + math.copysign(1, adv) * _u(gap) if adv else 1.0
                rho = max(_RHO_MIN, min(_RHO_MAX, mbar / m))
                a_tilde = adv * ((1 - _LAM) + _LAM * rho * w)
                seg = {"gap": gap, "weight": w, "length_factor": rho}
            else:
                a_tilde = adv
                seg = {"gap": None, "weight": None, "length_factor": None}
            seg.update(kind=kind, text=text, num_tokens=m, advantage_grpo=adv, advantage=a_tilde)
            segments.append(seg)
        turns.append({"user": f"Turn {t}: you are in a room. <b>escape me</b>",
                      "response": "".join(texts), "observation_after": f"You arrive at shelf {t + 1}.",
                      "segments": segments})
    return {"index": index, "reward": 1.0 if success else 0.0, "success": success,
            "advantage_grpo": adv, "has_teacher": has_teacher, "hint_from": hint_from,
            "hint": None if hint_from is None else f"go to shelf 1 (from rollout {hint_from})",
            "turns": turns}


def _credit_record(step=3):
    a_pos, a_neg = 0.8660254, -0.8660254
    mixed = {"task_id": "gen/pick_0001", "family": "Pick", "rollouts": [
        _make_rollout(0, True, a_pos, [[(0.4, 12), (1.3, 5)], [(-0.2, 9), (0.05, 6)]], 3),
        _make_rollout(1, False, a_neg, [[(0.7, 14), (-1.1, 4)], [(0.3, 20), (-2.5, 7)]], 0),
        _make_rollout(2, False, a_neg, [[(-0.6, 10), (0.9, 5)]], 3),
        _make_rollout(3, True, a_pos, [[(0.1, 11), (0.2, 6)]], 0),
    ]}
    uniform = {"task_id": "gen/cool_0002", "family": "Cool", "rollouts": [
        _make_rollout(0, False, 0.0, [[(0.0, 8), (0.0, 4)]], None),
        _make_rollout(1, False, 0.0, [[(0.0, 9), (0.0, 4)]], None)]}
    return {"step": step, "method": "sharpo",
            "estimator_config": {"lam": _LAM, "alpha": _ALPHA, "tau": _TAU,
                                 "rho_min": _RHO_MIN, "rho_max": _RHO_MAX},
            "groups": [uniform, mixed]}


def _write_run(run_dir: Path, steps=(1, 2, 3, 4), eval_every=2) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "credit").mkdir(exist_ok=True)
    (run_dir / "credit" / "step_00003.json").write_text(json.dumps(_credit_record(3)))
    rows = []
    for s in steps:
        rows.append({"step": s, "kind": "train", "method": "sharpo", "success": 0.1 * s,
                     "success/Pick": 0.2 * s})
        if s % eval_every == 0:
            rows.append({"step": s, "kind": "eval", "eval/success": 0.05 * s,
                         "eval/success/Pick": 0.1 * s, "eval/episodes": 6})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


@pytest.fixture
def credit_record():
    """credit_record(step=3) -> a fresh credit record: group 0 uniform (no teacher), group 1
    mixed (4 rollouts, teachers, gaps/weights/length factors/A~ per docs/method.md §4)."""
    return _credit_record


@pytest.fixture
def write_run():
    """write_run(run_dir, steps=(1, 2, 3, 4), eval_every=2) -> run_dir holding
    credit/step_00003.json (credit_record(3)) and metrics.jsonl."""
    return _write_run
