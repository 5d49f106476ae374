"""Reading what a run directory holds: metrics.jsonl rows and credit records
(schemas in docs/run_directory.md)."""
from __future__ import annotations

import re
from pathlib import Path

from ...errors import UsageError
from ...io import loads_json, read_jsonl

_CREDIT_NAME = re.compile(r"^step_(\d+)\.json$")


class CreditRecordError(UsageError):
    """A credit record is missing or does not follow the documented schema (a user error:
    `sharpo explain` reports it on one line)."""


def read_metrics(run_dir: str | Path) -> tuple[list[dict], list[dict]]:
    """(train rows, eval rows) of RUN/metrics.jsonl. A torn last line (a run killed while
    writing) is skipped; a torn line elsewhere is an error naming the file and line."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"run_dir: no metrics.jsonl in {run_dir}")
    train, evals = [], []
    for row in read_jsonl(path):
        is_eval = row.get("kind") == "eval" or (row.get("kind") is None and "eval/success" in row)
        (evals if is_eval else train).append(row)
    return train, evals


def list_credit_steps(run_dir: str | Path) -> list[int]:
    folder = Path(run_dir) / "credit"
    if not folder.is_dir():
        return []
    steps = [int(m.group(1)) for p in folder.iterdir() if (m := _CREDIT_NAME.match(p.name))]
    return sorted(steps)


def credit_record_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / "credit" / f"step_{step:05d}.json"


def load_credit_record(run_dir: str | Path, step: int) -> dict:
    path = credit_record_path(run_dir, step)
    if path.exists() and not path.is_file():
        raise CreditRecordError(f"--step {step}: {path} is not a regular file (a fifo, device "
                                f"or folder); move it away")
    if not path.is_file():
        have = list_credit_steps(run_dir)
        raise CreditRecordError(f"--step {step}: no credit record {path} "
                                f"(steps with records: {have or 'none'})")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        record = loads_json(text, path)
    except UsageError as exc:       # not JSON, or nested too deeply
        raise CreditRecordError(str(exc)) from None
    bad = _non_finite_token(text)
    if bad:                 # sharpo writes non-finite numbers as null: a statistic is never
        raise CreditRecordError(f"{path}: holds the non-finite number {bad} (sharpo writes "
                                f"null); refusing to render it")
    validate_credit_record(record, str(path))
    return record


def _non_finite_token(text: str) -> str | None:
    """'NaN', 'Infinity' or '-Infinity' when the JSON ``text`` holds one as a value."""
    import json
    found = []

    def constant(name):
        found.append(name)
        return None
    try:
        json.loads(text, parse_constant=constant)
    except (ValueError, RecursionError):
        return None
    return found[0] if found else None


def validate_credit_record(record: dict, where: str = "credit record") -> None:
    """Check the keys the report reads; raise CreditRecordError naming the first missing one."""
    def need(obj, key, at):
        if not isinstance(obj, dict) or key not in obj:
            raise CreditRecordError(f"{where}: missing {at}{key!r}")
        return obj[key]

    for group_no, group in enumerate(need(record, "groups", "")):
        for r_no, rollout in enumerate(need(group, "rollouts", f"groups[{group_no}].")):
            at = f"groups[{group_no}].rollouts[{r_no}]."
            for key in ("reward", "advantage_grpo", "turns"):
                need(rollout, key, at)
            for t_no, turn in enumerate(rollout["turns"]):
                for s_no, seg in enumerate(need(turn, "segments", f"{at}turns[{t_no}].")):
                    for key in ("kind", "text", "num_tokens", "advantage"):
                        need(seg, key, f"{at}turns[{t_no}].segments[{s_no}].")


def rollout_succeeded(rollout: dict) -> bool:
    if "success" in rollout and rollout["success"] is not None:
        return bool(rollout["success"])
    return float(rollout["reward"]) >= 1.0


def is_mixed_group(group: dict) -> bool:
    """A group with both successes and failures: the only kind with non-zero advantages."""
    outcomes = {rollout_succeeded(r) for r in group["rollouts"]}
    return outcomes == {True, False}


def find_mixed_group(run_dir: str | Path, step: int | None = None,
                     group: int | None = None) -> tuple[int, int, dict]:
    """(step, group index, record) of the group to show. Defaults: the latest step that has
    a mixed group, and the first mixed group of that step (else group 0)."""
    steps = list_credit_steps(run_dir)
    if not steps:
        raise CreditRecordError(f"run_dir: no credit records under {Path(run_dir) / 'credit'}")
    if step is None:
        for s in reversed(steps):
            record = load_credit_record(run_dir, s)
            mixed = [k for k, g in enumerate(record["groups"]) if is_mixed_group(g)]
            if mixed and (group is None or group in mixed):
                return s, (mixed[0] if group is None else group), record
        step = steps[-1]
    record = load_credit_record(run_dir, step)
    groups = record["groups"]
    if not groups:
        raise CreditRecordError(f"--step {step}: the credit record has no groups")
    if group is None:
        mixed = [k for k, g in enumerate(groups) if is_mixed_group(g)]
        group = mixed[0] if mixed else 0
    if not 0 <= group < len(groups):
        raise CreditRecordError(f"--episode {group}: step {step} has groups 0..{len(groups) - 1}")
    return step, group, record


def training_outcomes(run_dir: str | Path) -> dict:
    """What the RL steps had to learn from: training episodes, successes among them, and
    groups with mixed outcomes (the only ones with non-zero advantages), from metrics.jsonl
    and the credit records."""
    train, _ = read_metrics(run_dir)
    episodes = sum(int(r.get("episodes", 0)) for r in train)
    successes = sum(round(float(r.get("success", 0.0)) * int(r.get("episodes", 0))) for r in train)
    groups = mixed = 0
    for step in list_credit_steps(run_dir):
        for group in load_credit_record(run_dir, step)["groups"]:
            groups += 1
            mixed += is_mixed_group(group)
    return {"steps": len(train), "episodes": episodes, "successes": successes,
            "groups_recorded": groups, "mixed_groups": mixed}


def outcomes_sentence(o: dict) -> str:
    text = (f"Training rollouts: {o['successes']} successes in {o['episodes']} episodes over "
            f"{o['steps']} steps; {o['mixed_groups']} of {o['groups_recorded']} recorded groups "
            f"mixed successes and failures.")
    if o["mixed_groups"] == 0:
        text += (" With no mixed group every advantage is zero (GRPO and SHARPO alike), so the "
                 "RL steps changed nothing: the warm start must first succeed sometimes.")
    return text


def _is_run_dir(path: Path) -> bool:
    return any((path / name).exists() for name in ("config.yaml", "metrics.jsonl", "checkpoints"))


def find_run_dir(path: str | Path, arg: str = "RUN_DIR") -> Path:
    """The training run directory ``path`` names: ``path`` itself when it holds a run
    (config.yaml, metrics.jsonl or checkpoints/), else the RL run of a `sharpo demo`
    directory (``path/rl``). FileNotFoundError naming ``arg`` and ``path`` otherwise (a `sharpo compare`
    directory lists its runs in the message)."""
    from ...runs.run_files import refuse_special_files

    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"{arg}: {p}: no such run directory")
    if _is_run_dir(p):
        refuse_special_files(p)         # a fifo there would hang the reader
        return p
    if _is_run_dir(p / "rl"):
        refuse_special_files(p / "rl")
        return p / "rl"
    runs = sorted(d.name for d in (p / "runs").iterdir() if _is_run_dir(d)) \
        if (p / "runs").is_dir() else []
    if runs:
        raise FileNotFoundError(f"{arg}: {p} is a `sharpo compare` directory; name one of its runs: "
                                + ", ".join(f"{p / 'runs' / r}" for r in runs))
    raise FileNotFoundError(f"{arg}: {p} is not a run directory (no config.yaml, metrics.jsonl or "
                            f"checkpoints/, and no rl/ run inside)")
