"""Teacher assembly (docs/method.md §3): successful peer -> hint -> teacher rows -> their
log-probs back into the batch. Shapes: N episodes, B rows, T teacher rows, L as in batch.py.

- ``assign_teachers``: per group, a failed rollout gets any successful peer; a successful
  rollout gets a *different* successful peer; the group's only success gets none; an
  episode ended by an env fault neither gets nor gives one.
  ``choice="random"`` draws the peer with the trainer's seeded RNG, ``"first"`` takes the
  first eligible one (fewest distinct hints, most prefix sharing).
- ``render_peer_hint`` / ``render_hints``: the peer's trajectory as the environment's hint
  text ("A successful attempt at this task: ...", its actions and the observations after
  them).
- ``teacher_rows``: which rows get a teacher and their token sequences
  (``prompt + hint | same response``); ``scatter_teacher_logp`` puts the scored teacher
  log-probs back into [B, L].
- ``teacher_prompt``: where the hint goes (``teacher.hint_placement``, docs/training.md,
  hint placement). docs/method.md §3 puts it in the first user message and writes the
  teacher as ``prompt + hint | same generated tokens``. In the per-turn-row layout every
  row has exactly one user message, which starts with the task:
  * ``"after_task"`` (default): right after the task sentence (``task_end``), before the
    history and the current observation: user text = head + "\n\n" + hint + "\n\n" +
    rest. The conversation's first user message is the task, so this is §3's layout; and
    every teacher row of an episode (all its turns) starts with the same
    ``template + intro + task + hint`` tokens, which shared-prefix scoring (scoring.py)
    runs once per distinct hint and group instead of once per row.
  * ``"after_observation"``: after the whole turn prompt: user text = turn prompt +
    "\n\n" + hint. Only the turn prompt is shared with the student row, so from the
    second turn on the hint runs through the model once per teacher row.
  ``teacher.hint_scope``: ``"trajectory"`` (default, docs/method.md §3) shows the peer's
  whole trajectory to every row; ``"to_turn"`` shows row (e, t) the peer's first t + 1
  turns, so that the peer's move at the student's turn is the hint's last line
  (``turn_hints``; the layout the corridor's warm start teaches, docs/corridor.md).
  When the teacher prompt would exceed ``max_prompt_tokens``, the hint is cut (its tail
  replaced by " ..."), never the task or the turn prompt. A row with no room for even a
  short hint is not scored by a teacher but stays in its trajectory's teacher: it is a
  *neutral* row (``TeacherRows.neutral``) whose teacher log-probs are the student's, so
  its gaps are 0, its weights 1 and its length factors those of the trajectory. Were it
  left without a teacher, its segments would still count in the trajectory's mean segment
  length ``mbar`` while keeping a factor of 1, and the length-balanced total of docs/method.md
  §4 (property 5: the segment tokens of a trajectory carry ``A_i`` times their number) would
  no longer hold for that trajectory. Both placements follow this rule.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

import torch

from .credit import HINT_SEPARATOR, MIN_HINT_TOKENS, TRUNCATION_MARK, successful_peers
from ..envs.turn_prompt import TASK_LINE_PREFIX
from .rollout import Episode, chat_prompt_ids

HINT_PLACEMENTS = ("after_task", "after_observation")
DEFAULT_HINT_PLACEMENT = "after_task"


def assign_teachers(episodes: list[Episode], choice: str = "random",
                    rng: Optional[random.Random] = None) -> list[Optional[int]]:
    """teacher_of[e] = index (into ``episodes``) of the peer whose trajectory is the hint
    for episode e, or None (no teacher): ``credit.successful_peers`` over the episodes'
    groups and successes, env-faulted episodes left out."""
    return successful_peers([ep.group for ep in episodes], [ep.success for ep in episodes],
                            choice=choice, rng=rng, valid=[ep.error is None for ep in episodes])


HINT_SCOPES = ("trajectory", "to_turn")


def render_peer_hint(prompts, peer: Episode, max_observation_chars: int = 200,
                     upto: Optional[int] = None) -> str:
    """The hint text of one successful peer (the env's ``render_hint``); ``upto``: only
    its first ``upto`` turns (``teacher.hint_scope=to_turn``)."""
    steps = [(t.action if t.action is not None else "(invalid action)", t.observation_after)
             for t in peer.turns[:upto]]
    return prompts.render_hint(steps, max_observation_chars=max_observation_chars)


def task_end(user_text: str, task_prefix: str = TASK_LINE_PREFIX) -> int:
    """Character offset right after the task sentence of a turn's user text: the end of
    the first line that starts with ``task_prefix`` (lower case; the environment's
    EnvSpec.task_line_prefix, by default "your task is to:"), else the end of the first
    line (prompts that open with the task)."""
    pos = 0
    for line in user_text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body.lstrip().lower().startswith(task_prefix):
            return pos + len(body)
        pos += len(line)
    return len(user_text.split("\n", 1)[0])


def teacher_text(user_text: str, hint: str, placement: str = DEFAULT_HINT_PLACEMENT,
                 task_prefix: str = TASK_LINE_PREFIX) -> str:
    """The teacher's user message: ``user_text`` with ``hint`` placed as ``placement``
    says (module docstring; ``task_prefix`` as in ``task_end``)."""
    if placement == "after_observation":
        return user_text + HINT_SEPARATOR + hint
    if placement != "after_task":
        raise ValueError(f"teacher.hint_placement: expected one of {HINT_PLACEMENTS}, "
                         f"got {placement!r}")
    k = task_end(user_text, task_prefix)
    head, rest = user_text[:k], user_text[k:].lstrip("\r\n")
    return head + HINT_SEPARATOR + hint + (HINT_SEPARATOR + rest if rest else "")


def teacher_prompt(tokenizer, user_text: str, hint: str, max_prompt_tokens: int,
                   placement: str = DEFAULT_HINT_PLACEMENT,
                   task_prefix: str = TASK_LINE_PREFIX,
                   ) -> tuple[Optional[list[int]], Optional[str]]:
    """(prompt ids, hint text actually used) of the teacher for one row, or (None, None)
    when not even ``MIN_HINT_TOKENS`` of hint fit next to the turn prompt. Only the hint
    is ever cut, whatever the placement."""
    ids = chat_prompt_ids(tokenizer, teacher_text(user_text, hint, placement, task_prefix))
    if len(ids) <= max_prompt_tokens:
        return ids, hint
    hint_ids = tokenizer(hint, add_special_tokens=False)["input_ids"]
    keep = len(hint_ids) - (len(ids) - max_prompt_tokens) - 2
    while keep >= MIN_HINT_TOKENS:
        cut = tokenizer.decode(hint_ids[:keep]) + TRUNCATION_MARK
        ids = chat_prompt_ids(tokenizer, teacher_text(user_text, cut, placement, task_prefix))
        if len(ids) <= max_prompt_tokens:
            return ids, cut
        keep -= max(1, len(ids) - max_prompt_tokens)
    return None, None


def render_hints(prompts, episodes: list[Episode], teacher_of: list[Optional[int]],
                 max_observation_chars: int = 200) -> list[Optional[str]]:
    """[N] hint text of each episode's teacher (None where teacher_of[e] is None)."""
    return [None if j is None else render_peer_hint(prompts, episodes[j], max_observation_chars)
            for j in teacher_of]


def turn_hints(prompts, episodes: list[Episode], teacher_of: list[Optional[int]],
               max_observation_chars: int = 200):
    """``teacher.hint_scope=to_turn``: a function (e, t) -> the hint of row (episode e, turn
    t): the teacher's peer trajectory up to and including its turn t (its first t + 1
    turns), so that the peer's move at the student's turn is the hint's last line; None
    where e has no teacher."""
    def hint(e: int, t: int) -> Optional[str]:
        j = teacher_of[e]
        return None if j is None else render_peer_hint(prompts, episodes[j],
                                                       max_observation_chars, upto=t + 1)
    return hint


@dataclass
class TeacherRows:
    rows: list[int]                  # [T] the student row b of each teacher row
    sequences: list[list[int]]       # [T] teacher prompt ids + the row's response ids
    num_scored: list[int]            # [T] response length of each (tokens to score)
    hints_truncated: int = 0         # teacher rows whose hint was cut to fit
    neutral: list[int] = field(default_factory=list)   # rows b whose hint did not fit at
                                     # all: teacher = student (gap 0, w 1; module docstring)


def teacher_rows(tokenizer, batch, hints: list[Optional[str]], episode_adv: torch.Tensor, *,
                 max_prompt_tokens: int, skip_zero_advantage: bool = True,
                 placement: str = DEFAULT_HINT_PLACEMENT,
                 task_prefix: str = TASK_LINE_PREFIX, row_hint=None) -> TeacherRows:
    """The teacher rows of a ``StepBatch`` (batch.py): row b gets one when its episode
    e = traj_index[b] has a hint (``hints`` [N]), A_e != 0 unless ``skip_zero_advantage``
    is off (``episode_adv`` [N]), and the hint fits (``teacher_prompt``); a row that
    would get one but has no room for its hint goes to ``neutral`` (module docstring).
    The teacher sequence is that turn's user text with the hint placed as ``placement``
    says (``teacher_text``; ``task_prefix``: the env's task line), chat-templated, then
    the row's response. ``row_hint`` (e, t)
    -> text, when given, is the hint of each row instead of ``hints[e]`` (``turn_hints``)."""
    if placement not in HINT_PLACEMENTS:
        raise ValueError(f"teacher.hint_placement: expected one of {HINT_PLACEMENTS}, "
                         f"got {placement!r}")
    out = TeacherRows([], [], [])
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        if hints[e] is None or (skip_zero_advantage and episode_adv[e] == 0):
            continue
        turn = batch.episodes[e].turns[t]
        hint = hints[e] if row_hint is None else row_hint(e, t)
        ids, used = teacher_prompt(tokenizer, turn.user_text, hint, max_prompt_tokens,
                                   placement, task_prefix)
        if ids is None:
            out.neutral.append(b)
            continue
        out.hints_truncated += used != hint
        out.rows.append(b)
        out.sequences.append(ids + batch.response_ids[b])
        out.num_scored.append(len(batch.response_ids[b]))
    return out


def scatter_teacher_logp(old_logp: torch.Tensor, rows: list[int], logps: list[torch.Tensor],
                         neutral: list[int] = (),
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """old_logp [B, L], T teacher rows (row index ``rows[k]``, log-probs ``logps[k]``
    [len_k]) -> (teacher_logp [B, L] fp32 CPU, has_teacher [B] bool). Rows without a
    teacher keep the student's values (finite; never read as a teacher); ``neutral`` rows
    (TeacherRows.neutral) have a teacher whose log-probs are the student's."""
    if len(rows) != len(logps):
        raise ValueError(f"logps: one tensor per teacher row expected ({len(rows)}), got {len(logps)}")
    teacher_logp = old_logp.clone()
    has_teacher = torch.zeros(old_logp.shape[0], dtype=torch.bool)
    for b, lp in zip(rows, logps):
        teacher_logp[b, :lp.numel()] = lp.float().cpu()
        has_teacher[b] = True
    for b in neutral:
        has_teacher[b] = True
    return teacher_logp, has_teacher
