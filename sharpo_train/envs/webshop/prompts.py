"""Per-turn prompts for WebShop in the verl-agent layout (the wording is the project's own).

One turn's USER message: the role, the instruction, the step count and the last
``history_length`` (observation, action) pairs, the current page, the admissible actions
one per line, then the reply format::

    You are a shopping agent in WebShop, a text version of an online store.
    Your task is to: i need a long lasting perfume, and price lower than 40.00 dollars.
    You have taken 2 step(s) so far. Your last 2 observation(s) and action(s):
    [Observation 1: ''Search'', Action 1: 'search[long lasting perfume]']
    [Observation 2: ''Back to Search' [SEP] ...', Action 2: 'click[b07xyz1234]']
    Current observation (step 3): 'Back to Search' [SEP] '< Prev' [SEP] ...
    Admissible actions:
    'click[back to search]',
    'click[< prev]',
    ...
    Think step by step inside <think> </think> about which admissible action brings you
    closest to buying the right product, then give exactly one action inside
    <action> </action>. In 'search[<your query>]' write your own keywords in the brackets.

(The instruction is one line in the prompt; it is wrapped here.)
Replies are parsed as for ALFWorld (``parse_action``: the last <action>...</action>).
"""
from __future__ import annotations

from typing import Sequence

# the reply format and the hint are every text environment's (re-exported here)
from ..turn_prompt import (TASK_PREFIX, format_response, history_lines, one_line, parse_action,
                          parse_think, render_hint)

__all__ = ["render_turn_prompt", "task_sentence", "parse_action", "parse_think",
           "format_response", "render_hint", "DEFAULT_HISTORY_LENGTH"]

DEFAULT_HISTORY_LENGTH = 2
INTRO = "You are a shopping agent in WebShop, a text version of an online store."
FORMAT_INSTRUCTION = (
    "Think step by step inside <think> </think> about which admissible action brings you "
    "closest to buying the right product, then give exactly one action inside "
    "<action> </action>. In 'search[<your query>]' write your own keywords in the brackets."
)


def task_sentence(task_text: str) -> str:
    t = one_line(task_text).rstrip(".")
    if t.lower().startswith(TASK_PREFIX.lower()):
        t = t[len(TASK_PREFIX):]
    return f"{TASK_PREFIX}{t}."


def render_turn_prompt(task_text: str, history: Sequence[tuple[str, str]], observation: str,
                       admissible: Sequence[str],
                       history_length: int = DEFAULT_HISTORY_LENGTH) -> str:
    """The USER message of one turn (same arguments as the ALFWorld prompt)."""
    history = list(history)
    lines = [INTRO, task_sentence(task_text), *history_lines(history, history_length)]
    n = len(history)
    lines.append(f"Current observation (step {n + 1}): {one_line(observation)}")
    if admissible:
        lines.append("Admissible actions:")
        lines.append("\n".join(f"'{a}'," for a in admissible))
    lines.append(FORMAT_INSTRUCTION)
    return "\n".join(lines)

