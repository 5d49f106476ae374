"""Per-turn prompts, replies and hints of the corridor (the wording is the project's own).

One turn's USER message (``render_turn_prompt``)::

    You walk a corridor of doors.
    Your task is to: reach the exit of the corridor. Where a lamp glows, its colour shows the safe door.
    You have taken 2 step(s) so far. Your last 1 observation(s) and action(s):
    [Observation 2: 'You went left. Turn 2 of 10. No lamp here.', Action 2: 'right']
    Current observation (turn 3 of 10): You went right. Turn 3 of 10. A red lamp glows above the doors.
    Admissible actions: 'left', 'right'
    Think inside <think> </think>, then give exactly one admissible action inside <action> </action>.

The reply is ``<think>a red lamp</think><action>left</action>`` (``format_response``;
the demonstrations' think text names what the turn shows, ``turn_think``); it is parsed
as for ALFWorld (``parse_action``: the last <action>...</action>).

The hint (``render_hint``, docs/method.md §3) lists a successful peer's turns, one line per
turn, numbered as the observations number them, with the lamp it passed under before the
door it took there::

    A successful attempt at this task:
    turn 1: right
    turn 2: red lamp -> left
    ...
"""
from __future__ import annotations

import re
from typing import Sequence

from ...hint import HINT_DEFAULTS, one_line, render_steps
from ..turn_prompt import format_response, history_lines, parse_action, parse_think

__all__ = ["render_turn_prompt", "parse_action", "parse_think", "format_response",
           "render_hint", "turn_think", "DEFAULT_HISTORY_LENGTH"]

DEFAULT_HISTORY_LENGTH = 1
INTRO = "You walk a corridor of doors."
FORMAT_INSTRUCTION = ("Think inside <think> </think>, then give exactly one admissible action "
                      "inside <action> </action>.")
_LAMP = re.compile(r"\bA (\w+) lamp glows\b")
_UNDER = re.compile(r"\bunder the (\w+) lamp\b")
_TURN = re.compile(r"\bTurn (\d+) of (\d+)\.")


def render_turn_prompt(task_text: str, history: Sequence[tuple[str, str]], observation: str,
                       admissible: Sequence[str],
                       history_length: int = DEFAULT_HISTORY_LENGTH) -> str:
    """The USER message of one turn (same arguments as the ALFWorld prompt)."""
    history = list(history)
    obs = one_line(observation)
    m = _TURN.search(obs)
    where = f"turn {m.group(1)} of {m.group(2)}" if m else f"step {len(history) + 1}"
    lines = [INTRO, one_line(task_text), *history_lines(history, history_length),
             f"Current observation ({where}): {obs}"]
    if admissible:
        lines.append("Admissible actions: " + ", ".join(repr(str(a)) for a in admissible))
    lines.append(FORMAT_INSTRUCTION)
    return "\n".join(lines)


def turn_think(observation: str) -> str:
    """The demonstrations' think text: what the turn shows ("a red lamp" / "no lamp")."""
    m = _LAMP.search(observation or "")
    return f"a {m.group(1)} lamp" if m else "no lamp"


def lamp_line(i: int, action: str, observation: str, max_observation_chars: int) -> str:
    """One turn of the corridor's hint: ``turn i: <door>``, or ``turn i: <colour> lamp ->
    <door>`` where the observation after it says it passed under a lamp."""
    m = _UNDER.search(observation or "")
    lamp = f"{m.group(1)} lamp -> " if m else ""
    return f"turn {i}: {lamp}{one_line(action)}"


def render_hint(steps: Sequence,
                max_observation_chars: int = HINT_DEFAULTS.max_observation_chars) -> str:
    """'A successful attempt at this task:' and one ``lamp_line`` per turn of the peer
    (``hint.render_steps``). steps: (action, observation-after-it) pairs or plain actions,
    in order (as ALFWorld's render_hint); ``max_observation_chars`` is accepted for the
    common signature (the corridor's hint shows only the lamp, never the observation
    text)."""
    return render_steps(steps, max_observation_chars, line=lamp_line)
