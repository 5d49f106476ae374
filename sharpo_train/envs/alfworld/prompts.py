"""Per-turn prompts for ALFWorld in the verl-agent layout, and the reply format.

Pure functions (no alfworld import); the trainer imports them.

Layout of one turn's USER message (after verl-agent's ALFWorld prompt: the task, a window
of recent (observation, action) pairs, the current observation, the admissible actions,
then the format instruction; the wording here is the project's own)::

    You are a household agent in a text version of the ALFRED environment.
    Your task is to: put a mug in cabinet.
    You have taken 3 step(s) so far. Your last 2 observation(s) and action(s):
    [Observation 2: '...', Action 2: 'go to countertop 1']
    [Observation 3: '...', Action 3: 'take mug 1 from countertop 1']
    Current observation (step 4): You pick up the mug 1 from the countertop 1.
    Admissible actions: 'go to cabinet 1', 'inventory', 'look', ...
    Think step by step inside <think> </think>, then give exactly one admissible action
    inside <action> </action>.

The agent replies ``<think>...</think><action>COMMAND</action>``; ``parse_action`` returns
COMMAND (or None when there is no usable <action> tag; the environment then answers
"Nothing happens.").
"""
from __future__ import annotations

from typing import Sequence

# the reply format and the hint are shared by every text environment (turn_prompt.py);
# re-exported here
from ..turn_prompt import (TASK_PREFIX, HintStep, format_response, history_lines,
                          parse_action, parse_think, render_hint)

__all__ = ["render_turn_prompt", "task_sentence", "parse_action", "parse_think",
           "format_response", "render_hint", "HintStep", "INTRO",
           "FORMAT_INSTRUCTION", "DEFAULT_HISTORY_LENGTH"]

DEFAULT_HISTORY_LENGTH = 2

INTRO = "You are a household agent in a text version of the ALFRED environment."
FORMAT_INSTRUCTION = (
    "Think step by step inside <think> </think>, then give exactly one admissible action "
    "inside <action> </action>."
)


def task_sentence(task_text: str) -> str:
    """'Your task is to: X.' whatever form task_text has ('X', 'X.', the full line)."""
    t = " ".join(str(task_text).split())
    if t.lower().startswith(TASK_PREFIX.lower()):
        t = t[len(TASK_PREFIX):]
    return TASK_PREFIX + t if t else TASK_PREFIX.strip()


def render_turn_prompt(task_text: str, history: Sequence[tuple[str, str]], observation: str,
                       admissible: Sequence[str],
                       history_length: int = DEFAULT_HISTORY_LENGTH) -> str:
    """The USER message of one turn.

    task_text: the goal (Observation.task_text). history: every earlier turn of this
    episode as (observation the agent saw, action it took), oldest first; only the last
    ``history_length`` are shown, but the step count covers all of them. observation: the
    current observation text. admissible: the admissible commands (may be empty).
    """
    history = list(history)
    lines = [INTRO, task_sentence(task_text), *history_lines(history, history_length)]
    n = len(history)
    lines.append(f"Current observation (step {n + 1}): {str(observation).strip()}")
    if admissible:
        lines.append("Admissible actions: " + ", ".join(repr(str(a)) for a in admissible))
    lines.append(FORMAT_INSTRUCTION)
    return "\n".join(lines)
