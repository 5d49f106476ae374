"""``StepBatch``: the one object a training step carries from rollout to update.

Like verl's ``DataProto`` or TRL's dict of ``completion_mask``/``old_per_token_logps``,
one object holds the step's rows and everything computed about them; each phase fills
its own fields (docs/training.md, row layout):

1. rollout -> ``StepBatch.from_episodes``: per-row token lists, ``response_mask``,
   ``segment_ids``, ``traj_index``; per-episode ``rewards``, ``group_of``, ``env_fault``;
   the trainer adds the environment's exact ``credit_labels`` where it has them.
2. score (loops/trainer.py + teacher.py): ``episode_adv`` with ``episode_adv_norm``
   (``fill_episode_advantages``), ``teacher_of``, ``hints``,
   ``old_logp``, ``teacher_logp``, ``has_teacher``, ``ref_logp`` (``old_entropy`` for an
   estimator with needs_entropy); ``step`` (the training step, for scheduled estimators).
3. credit (estimators package): ``advantages`` and ``aux_loss`` (the estimator's output).
4. update (update.py) reads the token lists, ``response_mask``, ``old_logp``,
   ``advantages`` and ``ref_logp``.

Shapes: N episodes, B rows (one per generated turn, docs/training.md), L = the longest
response of the step. [B, L] tensors are right-padded CPU tensors (fp32 unless noted).

Environment faults (docs/training.md). An episode whose environment or worker failed
(``Episode.error`` set) is not evidence about the policy: it gives no rows, leaves its
group's statistics (``env_fault`` [N]), and gets advantage 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from .group_norm import grouped_normalise
from .rollout import Episode
from .segments import segment_ids as span_ids


@dataclass
class StepBatch:
    # per episode [N]
    rewards: torch.Tensor                     # [N] fp32 terminal rewards
    group_of: torch.Tensor                    # [N] int64 group (task) of each episode
    # per row [B] and [B, L]
    traj_index: torch.Tensor                  # [B] int64 episode of each row
    response_mask: torch.Tensor               # [B, L] fp32 1 on generated tokens
    segment_ids: torch.Tensor                 # [B, L] int64, -1 outside segments (docs/method.md §2)
    prompt_ids: list = field(default_factory=list)     # [B] token ids of each row's prompt
    response_ids: list = field(default_factory=list)   # [B] sampled token ids
    turn: list = field(default_factory=list)           # [B] turn index within its episode
    episodes: list = field(default_factory=list)       # [N] the rollout's Episode objects
    env_fault: Optional[torch.Tensor] = None  # [N] bool: ended by an env fault (None: none)
    credit_labels: Optional[list] = None      # [N][turns] exact labels, True = a right move,
                                              # False = a wrong one, None = did not matter
                                              # (EnvSpec.exact_labels; read by the oracle
                                              # estimators and teacher.oracle, estimators/
                                              # oracle.py); None: the env has none
    plan_labels: Optional[list] = None        # [N][turns] the env's planner labels of the
                                              # actions (the credit_quality step hook,
                                              # analysis/step_hooks.py); None: not labelled
    # filled by scoring
    episode_adv: Optional[torch.Tensor] = None  # [N] fp32 GRPO A_i (0 for faulted episodes)
    episode_adv_norm: Optional[tuple] = None  # (norm_std, eps) episode_adv was computed with
    teacher_of: Optional[list] = None         # [N] index of the peer giving the hint, or None
    hints: Optional[list] = None              # [N] hint text, or None
    old_logp: Optional[torch.Tensor] = None   # [B, L] theta_old (the student)
    teacher_logp: Optional[torch.Tensor] = None  # [B, L] theta_old after prompt + hint
    has_teacher: Optional[torch.Tensor] = None   # [B] bool: the row's teacher was scored
    ref_logp: Optional[torch.Tensor] = None   # [B, L] frozen reference, when KL is on
    old_entropy: Optional[torch.Tensor] = None  # [B, L] token entropies under theta_old
                                              # (estimators with needs_entropy only)
    # filled by credit
    advantages: Optional[torch.Tensor] = None  # [B, L] fp32, 0 where response_mask == 0
    aux_loss: Optional[object] = None         # estimators.AuxLoss: an extra update loss term
    step: Optional[int] = None                # the training step (1, 2, ...): an input of
                                              # scheduled estimators (estimators.batch_step)
    # the phases' counters are returned, not parked here (loops/trainer.py ScoreCounts)

    def __len__(self) -> int:
        return int(self.traj_index.numel())

    @property
    def width(self) -> int:
        """L, the padded response length."""
        return int(self.response_mask.shape[1])

    @property
    def num_episodes(self) -> int:
        return int(self.rewards.numel())

    @property
    def healthy(self) -> torch.Tensor:
        """[N] bool: episodes that count in the group statistics (no env fault)."""
        if self.env_fault is None:
            return torch.ones(self.num_episodes, dtype=torch.bool)
        return ~self.env_fault

    @property
    def episode(self) -> list[int]:
        """[B] episode index of each row (``traj_index`` as a list)."""
        return self.traj_index.tolist()

    def episode_advantages(self, params) -> torch.Tensor:
        """[N] GRPO A_i of every episode (docs/method.md §1: ``grouped_normalise`` of the
        rewards over each group with ``params.norm_std`` / ``params.eps``, an estimator's
        ``GroupParams``), env-faulted ones left out (A = 0): ``episode_adv`` when it was
        computed with the same (norm_std, eps), else computed now (not stored). The one
        A_i of every estimator."""
        norm = (params.norm_std, params.eps)
        if self.episode_adv is not None and self.episode_adv_norm == norm:
            return self.episode_adv
        return grouped_normalise(self.rewards.float(), self.group_of, std=norm[0], eps=norm[1],
                                 valid=self.healthy)

    def fill_episode_advantages(self, params) -> torch.Tensor:
        """Set ``episode_adv`` [N] and ``episode_adv_norm`` (the trainer, before teachers
        and credit; the estimators read them back through ``episode_advantages``)."""
        self.episode_adv = self.episode_advantages(params)
        self.episode_adv_norm = (params.norm_std, params.eps)
        return self.episode_adv

    def sequences(self) -> list[list[int]]:
        """[B] ``prompt | response`` token lists."""
        return [p + r for p, r in zip(self.prompt_ids, self.response_ids)]

    def response_lengths(self) -> list[int]:
        return [len(r) for r in self.response_ids]

    @classmethod
    def from_episodes(cls, episodes: list[Episode]) -> "StepBatch":
        """One row per turn that generated tokens, of every episode without an env fault."""
        prompts, responses, ep_of, turn_of, segs = [], [], [], [], []
        for e, ep in enumerate(episodes):
            if ep.error is not None:
                continue                         # an env fault teaches nothing
            for t, turn in enumerate(ep.turns):
                if not turn.response_ids:
                    continue                     # nothing generated: nothing to train
                prompts.append(turn.prompt_ids)
                responses.append(turn.response_ids)
                ep_of.append(e)
                turn_of.append(t)
                segs.append(span_ids(turn.spans, len(turn.response_ids)))
        L = max((len(r) for r in responses), default=1)
        mask = torch.zeros(len(responses), L)
        seg = torch.full((len(responses), L), -1, dtype=torch.long)
        for b, (r, s) in enumerate(zip(responses, segs)):
            mask[b, :len(r)] = 1.0
            seg[b, :len(r)] = torch.tensor(s, dtype=torch.long)
        return cls(
            rewards=torch.tensor([ep.reward for ep in episodes], dtype=torch.float32),
            group_of=torch.tensor([ep.group for ep in episodes], dtype=torch.long),
            traj_index=torch.tensor(ep_of, dtype=torch.long), response_mask=mask,
            segment_ids=seg, prompt_ids=prompts, response_ids=responses, turn=turn_of,
            episodes=list(episodes),
            env_fault=torch.tensor([ep.error is not None for ep in episodes], dtype=torch.bool))


def pad_rows(values: list[torch.Tensor], width: int, fill: float = 0.0) -> torch.Tensor:
    """List of B [len_b] tensors -> [B, width] (CPU fp32), right-padded with ``fill``."""
    out = torch.full((len(values), width), fill, dtype=torch.float32)
    for b, v in enumerate(values):
        out[b, :v.numel()] = v.detach().float().cpu()
    return out


def row_turns(batch: StepBatch, method: str) -> list:
    """[B] the Turn of every row (``episodes[traj_index[b]].turns[turn[b]]``); a ValueError
    naming ``method`` when the batch lacks them."""
    if len(batch.episodes) != batch.num_episodes or len(batch.turn) != len(batch):
        raise ValueError(f"{method}: the batch's episodes and turn indices are required "
                         f"(episodes [N], turn [B])")
    return [batch.episodes[e].turns[t] for e, t in zip(batch.episode, batch.turn)]


def segment_kind_mask(batch: StepBatch, kind: str, method: str) -> torch.Tensor:
    """[B, L] bool: tokens in a segment of ``kind`` ("think" / "action"); a row's segment
    ids number its turn's spans in order (segments.py, docs/method.md §2)."""
    out = torch.zeros(batch.segment_ids.shape, dtype=torch.bool)
    for b, turn in enumerate(row_turns(batch, method)):
        for k, span in enumerate(turn.spans):
            if span.kind == kind:
                out[b] |= batch.segment_ids[b] == k
    return out
