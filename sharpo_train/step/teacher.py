"""Teacher assembly (docs/method.md §3): successful peer -> hint -> teacher rows -> their
log-probs back into the batch. Shapes: N episodes, B rows, T teacher rows, L as in batch.py.

- ``assign_teachers``: per group, a failed rollout gets any successful peer; a successful
  rollout gets a *different* successful peer; the group's only success gets none; an
  episode ended by an env fault neither gets nor gives one.
  ``choice="random"`` draws the peer with the trainer's seeded RNG, ``"first"`` takes the
  first eligible one (fewest distinct hints, most prefix sharing).
- ``peer_hint`` / ``render_hints`` / ``turn_hints``: the peer's trajectory as the
  environment's hint text (its ``render_hint``: "A successful attempt at this task: ...",
  its actions and the observations after them; hint.py), cut by ``teacher.hint_scope``.
- ``teacher_rows``: which rows get a teacher and their token sequences
  (``prompt + hint | same response``); ``scatter_teacher_logp`` puts the scored teacher
  log-probs back into [B, L].
- ``teacher_prompt``: the teacher prompt ids of one row: the hint placed as
  ``teacher.hint_placement`` says (``hint.place_hint``; docs/training.md, hint placement)
  and chat-templated, the hint cut to fit (``hint.fit_hint``). docs/method.md §3 puts the
  hint in the first user message and writes the teacher as ``prompt + hint | same
  generated tokens``. In the per-turn-row layout every row has exactly one user message,
  which starts with the task:
  * ``after_task`` (default): right after the task sentence, before the history and the
    current observation. The conversation's first user message is the task, so this is
    §3's layout; and every teacher row of an episode (all its turns) starts with the same
    ``template + intro + task + hint`` tokens, which shared-prefix scoring (scoring.py)
    runs once per distinct hint and group instead of once per row.
  * ``after_observation``: after the whole turn prompt. Only the turn prompt is shared
    with the student row, so from the second turn on the hint runs through the model
    once per teacher row.
  ``teacher.hint_scope``: ``trajectory`` (default, docs/method.md §3) shows the peer's
  whole trajectory to every row; ``to_turn`` shows row (e, t) the peer's first t + 1
  turns, so that the peer's move at the student's turn is the hint's last line
  (``hint.scoped``; the layout the corridor's warm start teaches, docs/corridor.md).
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

from .. import hint as H
from .teacher_rule import successful_peers
from ..envs.turn_prompt import TASK_LINE_PREFIX
from .rollout import Episode, chat_prompt_ids


def assign_teachers(episodes: list[Episode], choice: str = "random",
                    rng: Optional[random.Random] = None) -> list[Optional[int]]:
    """teacher_of[e] = index (into ``episodes``) of the peer whose trajectory is the hint
    for episode e, or None (no teacher): ``successful_peers`` (step/teacher_rule.py) over
    the episodes' groups and successes, env-faulted episodes left out."""
    return successful_peers([ep.group for ep in episodes], [ep.success for ep in episodes],
                            choice=choice, rng=rng, valid=[ep.error is None for ep in episodes])


def peer_hint(prompts, peer: Episode, settings: H.HintSettings = H.HINT_DEFAULTS,
              turn: Optional[int] = None) -> str:
    """The hint text of one successful peer for a row at ``turn`` (0-based; None: the
    whole trajectory): the env's ``render_hint`` of the peer's (action, observation
    after it) steps cut by ``settings.scope`` (``hint.scoped``)."""
    steps = [(t.action, t.observation_after) for t in peer.turns]
    return prompts.render_hint(H.scoped(steps, settings.scope, turn),
                               max_observation_chars=settings.max_observation_chars)


def render_hints(prompts, episodes: list[Episode], teacher_of: list[Optional[int]],
                 settings: H.HintSettings = H.HINT_DEFAULTS) -> list[Optional[str]]:
    """[N] hint text of each episode's teacher, its whole trajectory (None where
    teacher_of[e] is None)."""
    return [None if j is None else peer_hint(prompts, episodes[j], settings)
            for j in teacher_of]


def turn_hints(prompts, episodes: list[Episode], teacher_of: list[Optional[int]],
               settings: H.HintSettings = H.HINT_DEFAULTS):
    """A function (e, t) -> the hint of row (episode e, turn t) as ``settings.scope``
    cuts it (``to_turn``: the peer's first t + 1 turns, so that the peer's move at the
    student's turn is the hint's last line); None where e has no teacher."""
    def hint(e: int, t: int) -> Optional[str]:
        j = teacher_of[e]
        return None if j is None else peer_hint(prompts, episodes[j], settings, t)
    return hint


def teacher_prompt(tokenizer, user_text: str, hint: str, max_prompt_tokens: int,
                   placement: str = H.PLACEMENT_AFTER_TASK,
                   task_prefix: str = TASK_LINE_PREFIX,
                   ) -> tuple[Optional[list[int]], Optional[str]]:
    """(prompt ids, hint text actually used) of the teacher for one row, or (None, None)
    when not even ``MIN_HINT_TOKENS`` of hint fit next to the turn prompt. Only the hint
    is ever cut, whatever the placement (``hint.fit_hint``)."""
    return H.fit_hint(tokenizer, hint, max_prompt_tokens, lambda h: chat_prompt_ids(
        tokenizer, H.place_hint(user_text, h, placement, task_prefix)))


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
                 placement: str = H.PLACEMENT_AFTER_TASK,
                 task_prefix: str = TASK_LINE_PREFIX, row_hint=None,
                 row_adv: Optional[torch.Tensor] = None) -> TeacherRows:
    """The teacher rows of a ``StepBatch`` (batch.py): row b gets one when its episode
    e = traj_index[b] has a hint (``hints`` [N]), A_e != 0 unless ``skip_zero_advantage``
    is off (``episode_adv`` [N]; ``row_adv`` [B], when given, is each row's own base
    advantage and replaces it: SHARPO over GiGPO, whose step term may be non-zero where
    A_e is 0), and the hint fits (``teacher_prompt``); a row that
    would get one but has no room for its hint goes to ``neutral`` (module docstring).
    The teacher sequence is that turn's user text with the hint placed as ``placement``
    says (``hint.place_hint``; ``task_prefix``: the env's task line), chat-templated, then
    the row's response. ``row_hint`` (e, t)
    -> text, when given, is the hint of each row instead of ``hints[e]`` (``turn_hints``)."""
    if placement not in H.HINT_PLACEMENTS:
        raise ValueError(f"teacher.hint_placement: expected one of {H.HINT_PLACEMENTS}, "
                         f"got {placement!r}")
    if row_adv is not None and tuple(row_adv.shape) != (len(batch),):
        raise ValueError(f"row_adv: expected shape ({len(batch)},), got {tuple(row_adv.shape)}")
    out = TeacherRows([], [], [])
    for b, (e, t) in enumerate(zip(batch.episode, batch.turn)):
        adv = episode_adv[e] if row_adv is None else row_adv[b]
        if hints[e] is None or (skip_zero_advantage and adv == 0):
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
