"""What the text environments' turn prompts share (verl-agent layout; the wording is the
project's own):

- the task line (``TASK_PREFIX``; the teacher puts an ``after_task`` hint after the line
  that starts with ``TASK_LINE_PREFIX``, hint.task_end);
- the reply format: ``<think>...</think><action>COMMAND</action>`` (``format_response``,
  ``parse_action``, ``parse_think``);
- the teacher's hint, a successful peer's trajectory (``render_hint``: one numbered line
  per turn, its action and the observation after it; sharpo_train/hint.py, docs/method.md §3);
- the history block: a step count and the last ``history_length`` (observation, action)
  pairs, e.g. ::

    You have taken 3 step(s) so far. Your last 2 observation(s) and action(s):
    [Observation 2: '...', Action 2: 'go to countertop 1']
    [Observation 3: '...', Action 3: 'take mug 1 from countertop 1']
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..checks import check_int
from ..hint import HINT_DEFAULTS, HintStep, one_line, render_steps
from ..tags import tag_spans

TASK_PREFIX = "Your task is to: "     # the task line every built-in prompt opens with
TASK_LINE_PREFIX = TASK_PREFIX.strip().lower()   # how the teacher finds it (hint.task_end)


def history_lines(history: Sequence[tuple[str, str]], history_length: int) -> list[str]:
    """The history block as lines; [] before the first step.

    history: every earlier turn of the episode as (observation the agent saw, action it
    took), oldest first; only the last ``history_length`` (an int >= 0) are shown, but the
    step count covers all of them."""
    check_int(history_length, "history_length", 0)
    history = list(history)
    for i, pair in enumerate(history):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"history[{i}]: expected an (observation, action) pair, got {pair!r}")
    n = len(history)
    if not n:
        return []
    shown = history[max(0, n - history_length):] if history_length else []
    if not shown:
        return [f"You have taken {n} step(s) so far."]
    lines = [f"You have taken {n} step(s) so far. Your last {len(shown)} observation(s) "
             f"and action(s):"]
    for k, (obs, act) in enumerate(shown, start=n - len(shown) + 1):
        lines.append(f"[Observation {k}: {one_line(obs)!r}, Action {k}: {one_line(act)!r}]")
    return lines


def parse_action(response_text: Optional[str]) -> Optional[str]:
    """The command inside the last complete <action>...</action> of a reply, with
    whitespace collapsed; None when there is none or it is empty."""
    if not isinstance(response_text, str):
        return None
    found = tag_spans(response_text, "action")          # linear scan (tags.py)
    if not found:
        return None
    action = " ".join(response_text[found[-1][1]:found[-1][2]].split())
    return action or None


def parse_think(response_text: Optional[str]) -> Optional[str]:
    """The text of the first <think>...</think>, stripped; None when absent."""
    if not isinstance(response_text, str):
        return None
    m = tag_spans(response_text, "think", limit=1)
    return response_text[m[0][1]:m[0][2]].strip() if m else None


def format_response(think: str, action: str) -> str:
    """The reply format the agent is asked for (used for expert demonstrations)."""
    return f"<think>{str(think).strip()}</think><action>{str(action).strip()}</action>"


def render_hint(steps: Sequence[HintStep],
                max_observation_chars: int = HINT_DEFAULTS.max_observation_chars) -> str:
    """The 'A successful attempt at this task: ...' text for the teacher (docs/method.md
    §3): ``hint.render_steps``, one numbered line per turn, its action and the observation
    after it cut to ``max_observation_chars`` (0 = left out)."""
    return render_steps(steps, max_observation_chars)
