"""The teacher's hint (docs/method.md §3), in one place: what it says, how much of the peer
it shows, where it goes in the prompt and how it is cut. Every caller builds its hint here:
the trainer (step/teacher.py), SFT's hint-aware warm start (loops/sft.py), the teacher probes
(analysis/teacher_probe.py, envs/corridor/door_probe.py), the environments' ``render_hint`` and the engine
integrations (verl, verl-agent, TRL). Plain strings and token ids; of the project it
imports only errors.py, checks.py and ``setting`` (settings/loader.py, torch-free), so any
layer may use it.

- ``HintSettings``: placement, scope, max_observation_chars, max_hint_tokens, template,
  with their one set of defaults and checks; ``HintKeys``: the same first three as the
  ``hint_*`` keys of a settings section (``teacher.*`` of the trainer, ``sft.*``).
- ``HINT_TEMPLATE``: the hint's one template (``{hint}`` = the rendered peer).
- ``render_steps`` / ``render_lines``: a peer's turns as hint text: each action with the
  observation that followed it, one line per turn (``numbered_line`` by default; a caller
  may pass its own line: the corridor's lamp and door, verl's ``response_line``), then
  the template.
- ``scoped``: the ``to_turn`` cut: the peer's first t + 1 turns for a row at turn t.
- ``place_hint`` / ``task_end``: where the hint goes in a turn's user text (placement).
- ``fit_hint`` (text: the trainer's teacher prompt, cut until the whole prompt fits) and
  ``cut_hint_ids`` (token ids: the integrations' hint budget): the hint is cut, never the
  task; its tail becomes ``TRUNCATION_MARK``; fewer than ``MIN_HINT_TOKENS`` left: no hint.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, fields
from typing import Callable, Optional, Sequence, Union

from .checks import is_int
from .errors import ConfigError
from .settings.loader import setting

__all__ = ["HINT_TEMPLATE", "HINT_SEPARATOR", "TRUNCATION_MARK", "MIN_HINT_TOKENS",
           "INVALID_ACTION", "SCOPE_TRAJECTORY", "SCOPE_TO_TURN", "HINT_SCOPES",
           "PLACEMENT_AFTER_TASK", "PLACEMENT_AFTER_OBSERVATION", "HINT_PLACEMENTS",
           "HintSettings", "HINT_DEFAULTS", "HintKeys", "check_template",
           "check_max_hint_tokens", "HintStep", "one_line", "hint_pairs", "numbered_line",
           "response_line", "render_lines", "render_steps", "apply_template", "scoped",
           "task_end", "place_hint", "fit_hint", "cut_hint_ids"]

HINT_TEMPLATE = "A successful attempt at this task:\n{hint}"
HINT_SEPARATOR = "\n\n"      # between the prompt text and the hint
TRUNCATION_MARK = " ..."     # ends a hint cut to fit; the hint is cut, never the task
MIN_HINT_TOKENS = 8          # fewer hint tokens than this fit: the row gets no teacher
INVALID_ACTION = "(invalid action)"   # a peer turn whose reply had no parsable action

SCOPE_TRAJECTORY = "trajectory"       # every row sees the peer's whole trajectory (§3)
SCOPE_TO_TURN = "to_turn"             # row (e, t) sees the peer's first t + 1 turns
HINT_SCOPES = (SCOPE_TRAJECTORY, SCOPE_TO_TURN)
PLACEMENT_AFTER_TASK = "after_task"   # right after the task sentence (§3's layout)
PLACEMENT_AFTER_OBSERVATION = "after_observation"   # after the whole turn prompt
HINT_PLACEMENTS = (PLACEMENT_AFTER_TASK, PLACEMENT_AFTER_OBSERVATION)
MAX_OBSERVATION_CHARS_LIMIT = 1 << 20



@dataclass
class HintSettings:
    """How a hint looks and where it goes; the one home of these defaults."""
    placement: str = setting(PLACEMENT_AFTER_TASK, "where the hint goes: after_task or "
                             "after_observation (docs/training.md)")
    scope: str = setting(SCOPE_TRAJECTORY, "what the hint holds: trajectory (the whole "
                         "peer) or to_turn (the peer up to the row's turn)")
    max_observation_chars: int = setting(200, "an observation in the hint is cut to this "
                                         "many characters (0: left out); >= 0")
    max_hint_tokens: int = setting(512, "the integrations' hint budget in tokens (the hint "
                                   "is cut: cut_hint_ids)")
    template: str = setting(HINT_TEMPLATE, "hint text; {hint} = the rendered peer")

    def validate(self, prefix: str = "") -> "HintSettings":
        """ValueError/TypeError naming the field (after ``prefix``, e.g. ``"hint_"`` for a
        section's ``hint_*`` keys) that is out of range; returns self."""
        if self.placement not in HINT_PLACEMENTS:
            raise ValueError(f"{prefix}placement: expected one of {list(HINT_PLACEMENTS)}, "
                             f"got {self.placement!r}")
        if self.scope not in HINT_SCOPES:
            raise ValueError(f"{prefix}scope: expected one of {list(HINT_SCOPES)}, "
                             f"got {self.scope!r}")
        v = self.max_observation_chars
        if not is_int(v) or not 0 <= v <= MAX_OBSERVATION_CHARS_LIMIT:
            raise ValueError(f"{prefix}max_observation_chars: expected an int >= 0 and <= "
                             f"{MAX_OBSERVATION_CHARS_LIMIT}, got {v!r}")
        check_max_hint_tokens(self.max_hint_tokens, f"{prefix}max_hint_tokens")
        check_template(self.template, f"{prefix}template")
        return self


HINT_DEFAULTS = HintSettings()


def _help(name: str) -> str:
    """The help of HintSettings' field ``name`` (the hint_* keys repeat it)."""
    return next(f.metadata["help"] for f in fields(HintSettings) if f.name == name)


def check_max_hint_tokens(v, name: str = "max_hint_tokens") -> None:
    """TypeError/ValueError naming ``name`` unless ``v`` is an int >= MIN_HINT_TOKENS."""
    if not is_int(v):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    if v < MIN_HINT_TOKENS:
        raise ValueError(f"{name}: expected >= {MIN_HINT_TOKENS}, got {v}")


def check_template(template, name: str = "template") -> None:
    """ValueError naming ``name`` unless ``template`` is a format string whose only field
    is ``{hint}`` (literal braces doubled)."""
    if not isinstance(template, str) or "{hint}" not in template:
        raise ValueError(f"{name}: must be a string containing '{{hint}}'")
    try:    # fields read before any formatting: a width ({hint:>3000000000}) would allocate
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template)
                  if f is not None]
    except ValueError as exc:
        raise ValueError(f"{name}: not a format string ({exc}); literal braces are doubled: "
                         f"'{{{{' '}}}}'") from None
    bad = [f"{{{f}{'!' + cv if cv else ''}{':' + sp if sp else ''}}}"
           for f, sp, cv in fields if f != "hint" or sp or cv]
    if bad:
        raise ValueError(f"{name}: {bad[0]!r}: only a plain {{hint}} field may be used (no "
                         f"format spec or conversion; literal braces doubled: '{{{{' '}}}}')")
    try:
        template.format(hint="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{name}: {{hint}} is the only field it may use "
                         f"(literal braces doubled: '{{{{' '}}}}'); format failed: {exc!r}") from None


@dataclass
class HintKeys:
    """The ``hint_*`` keys of a settings section (the trainer's ``teacher.*``, ``sft.*``):
    ``HintSettings``' placement, scope and max_observation_chars, same defaults, same
    checks. A section extends it and calls ``super().validate()``."""
    hint_max_observation_chars: int = setting(HINT_DEFAULTS.max_observation_chars,
                                              _help("max_observation_chars"))
    hint_placement: str = setting(HINT_DEFAULTS.placement, _help("placement"))
    hint_scope: str = setting(HINT_DEFAULTS.scope, _help("scope"))

    def hint_settings(self) -> HintSettings:
        return HintSettings(placement=self.hint_placement, scope=self.hint_scope,
                            max_observation_chars=self.hint_max_observation_chars)

    def validate(self) -> None:
        try:
            self.hint_settings().validate(prefix="hint_")
        except ValueError as exc:       # the loader's error type, key first
            raise ConfigError(str(exc)) from None


# ---------------------------------------------------------------------------- rendering
HintStep = Union[str, tuple]   # an action, or (action, observation after it)


def one_line(text) -> str:
    """str(text) with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


def hint_pairs(steps: Sequence[HintStep], max_observation_chars: int = HINT_DEFAULTS.max_observation_chars
               ) -> list[tuple[str, str]]:
    """The steps of a hint as (action, observation-after-it) pairs (a bare action string
    has observation ""; an action None is ``INVALID_ACTION``); ``max_observation_chars``
    checked (an int >= 0)."""
    if not is_int(max_observation_chars) or max_observation_chars < 0:
        raise ValueError(f"max_observation_chars: expected an int >= 0, got {max_observation_chars!r}")
    out = []
    for i, step in enumerate(steps):
        if isinstance(step, str):
            out.append((step, ""))
        elif isinstance(step, (tuple, list)) and len(step) == 2:
            out.append((INVALID_ACTION if step[0] is None else step[0], step[1]))
        else:
            raise TypeError(f"steps[{i}]: expected an action or (action, observation), got {step!r}")
    return out


def numbered_line(i: int, action: str, observation: str, max_observation_chars: int) -> str:
    """``"{i}. {action} -> {observation}"``, the observation on one line and cut to
    ``max_observation_chars`` (then "..."); no arrow when it is empty or the limit is 0."""
    line = f"{i}. {one_line(action)}"
    obs = one_line(observation or "")
    if obs and max_observation_chars:
        if len(obs) > max_observation_chars:
            obs = obs[:max_observation_chars].rstrip() + "..."
        line += f" -> {obs}"
    return line


StepLine = Callable[[int, str, str, int], str]


def apply_template(body: str, template: str = HINT_TEMPLATE) -> str:
    """The hint text of a rendered peer ``body`` (the one use of the template)."""
    return template.format(hint=body)


def response_line(i: int, action: str, observation: str, max_observation_chars: int) -> str:
    """``"Step {i}: {action}"``: a peer turn known only by its reply text (the verl
    integration's rows carry no observation; the text is kept as it is)."""
    return f"Step {i}: {action}"


def render_lines(steps: Sequence[HintStep], max_observation_chars: int = HINT_DEFAULTS.max_observation_chars,
                 line: StepLine = numbered_line) -> str:
    """A successful peer's turns, one ``line(i, action, observation, max_observation_chars)``
    per turn i = 1, 2, ... (each action with the observation that followed it), joined by
    newlines: the ``{hint}`` of the template. ValueError on an empty peer (a successful
    attempt has at least one step)."""
    lines = [line(i, a, o, max_observation_chars)
             for i, (a, o) in enumerate(hint_pairs(steps, max_observation_chars), start=1)]
    if not lines:
        raise ValueError("steps: a successful attempt has at least one step")
    return "\n".join(lines)


def render_steps(steps: Sequence[HintStep], max_observation_chars: int = HINT_DEFAULTS.max_observation_chars,
                 line: StepLine = numbered_line, template: str = HINT_TEMPLATE) -> str:
    """A successful peer's turns as hint text (docs/method.md §3): ``render_lines`` in
    ``template``."""
    return apply_template(render_lines(steps, max_observation_chars, line), template)


def scoped(steps: Sequence, scope: str, turn: Optional[int]) -> list:
    """The peer's steps a row at ``turn`` (0-based) is shown: all of them (``trajectory``,
    or ``turn`` None), or its first ``turn + 1`` (``to_turn``)."""
    if scope not in HINT_SCOPES:
        raise ValueError(f"scope: expected one of {list(HINT_SCOPES)}, got {scope!r}")
    steps = list(steps)
    return steps if scope == SCOPE_TRAJECTORY or turn is None else steps[:turn + 1]


# ---------------------------------------------------------------------------- placement
def task_end(user_text: str, task_prefix: str) -> int:
    """Character offset right after the task sentence of a turn's user text: the end of
    the first line that starts with ``task_prefix`` (lower case; the environment's
    EnvSpec.task_line_prefix, e.g. "your task is to:"), else the end of the first line (prompts that open with the
    task)."""
    pos = 0
    for line in user_text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body.lstrip().lower().startswith(task_prefix):
            return pos + len(body)
        pos += len(line)
    return len(user_text.split("\n", 1)[0])


def place_hint(user_text: str, hint: str, placement: str, task_prefix: str) -> str:
    """The teacher's user message: ``user_text`` with ``hint`` placed.
    ``after_task``: head + "\\n\\n" + hint + "\\n\\n" + rest (head ends at ``task_end``);
    ``after_observation``: user text + "\\n\\n" + hint."""
    if placement == PLACEMENT_AFTER_OBSERVATION:
        return user_text + HINT_SEPARATOR + hint
    if placement != PLACEMENT_AFTER_TASK:
        raise ValueError(f"teacher.hint_placement: expected one of {HINT_PLACEMENTS}, "
                         f"got {placement!r}")
    k = task_end(user_text, task_prefix)
    head, rest = user_text[:k], user_text[k:].lstrip("\r\n")
    return head + HINT_SEPARATOR + hint + (HINT_SEPARATOR + rest if rest else "")


# ---------------------------------------------------------------------------- truncation
def fit_hint(tokenizer, hint: str, max_tokens: int, render: Callable[[str], list]
             ) -> tuple[Optional[list], Optional[str]]:
    """(``render(h)`` ids, h) for the longest head h of ``hint`` (cut at a token, then
    ``TRUNCATION_MARK``) whose rendered prompt has at most ``max_tokens`` ids; ``hint``
    itself when it fits; (None, None) when not even ``MIN_HINT_TOKENS`` of it fit.
    ``render``: hint text -> the whole prompt's ids (the rest of the prompt is never cut)."""
    ids = render(hint)
    if len(ids) <= max_tokens:
        return ids, hint
    hint_ids = tokenizer(hint, add_special_tokens=False)["input_ids"]
    keep = len(hint_ids) - (len(ids) - max_tokens) - 2
    while keep >= MIN_HINT_TOKENS:
        cut = tokenizer.decode(hint_ids[:keep]) + TRUNCATION_MARK
        ids = render(cut)
        if len(ids) <= max_tokens:
            return ids, cut
        keep -= max(1, len(ids) - max_tokens)
    return None, None


def cut_hint_ids(tokenizer, text: str, budget: int) -> Optional[list[int]]:
    """Ids of ``text``, cut to ``budget`` tokens ending with ``TRUNCATION_MARK`` when
    longer; None when fewer than ``MIN_HINT_TOKENS`` tokens of it would remain. Special-token
    text in it (a TRL peer's ``<|im_start|>user``) is read as plain text: a hint never opens
    a turn of the prompt it goes into."""
    hint_ids = list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])
    if len(hint_ids) > budget:
        mark = list(tokenizer(TRUNCATION_MARK, add_special_tokens=False)["input_ids"])
        keep = budget - len(mark)
        if keep < MIN_HINT_TOKENS:
            return None
        hint_ids = hint_ids[:keep] + mark
    return hint_ids
