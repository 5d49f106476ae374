"""The host side of the single-pass backends of segment_advantage, `triton`
(triton_kernels.launch) and `cuda` (native.launch_cuda), issue 44:

    new_buffers      the outputs, the [4, B, cap] tables and the zeroed [2] error word
    run_single_pass  a launch, then one host read of the error word (or none, deferred):
                     the data error it holds is raised with the message of checks.py
    SegmentCheck     the error word of a check="deferred" call, read later
    DEFAULT_CAP      table columns without max_segments

The kernels write the smallest key of the broken rules (checks.py "error word") and Kmax
into the word; `launch(...)` returns (out, gap, w, rho, num_segments, word) and reads
nothing back.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from .checks import (ERR_EMPTY_SEGMENT, RANK_OF_ERR, decode_error_word, error_word_message,
                     max_coefficient)

DEFAULT_CAP = 64   # a row with more segments costs a second launch with the exact Kmax
_RANK_EMPTY = RANK_OF_ERR[ERR_EMPTY_SEGMENT]


def new_buffers(alloc: Callable, B: int, L: int, cap: int, device):
    """(tab [4, B, max(cap, 1)] fp32, out [B, L] fp32, num [B] int64, word [2] int64 zeroed).
    `alloc(rows, cols, device)` is the calling module's `_new_output` (tests poison it)."""
    capp = max(cap, 1)
    tab = alloc(4 * B, capp, device).view(4, B, capp)
    out = alloc(B, L, device)
    num = torch.empty(B, dtype=torch.int64, device=device)
    word = torch.zeros(2, dtype=torch.int64, device=device)    # the one memset
    return tab, out, num, word


class SegmentCheck:
    """The data check of a `check="deferred"` call (docs/api.md "Graph capture"): `word`
    ([2] int64 on the inputs' device: error key, Kmax) is written by the kernel; nothing is
    read until `raise_if_error()`, which reads it once and raises the ValueError the call
    would have raised. It keeps references to the inputs, so after a CUDA graph replay it
    checks the replayed data."""

    def __init__(self, word: torch.Tensor, inputs: dict, coefficient: float,
                 max_segments: int):
        self.word = word
        self._inputs = inputs
        self._coefficient = coefficient
        self._max_segments = max_segments

    def raise_if_error(self) -> None:
        """One host read; ValueError naming the argument if a data rule was broken."""
        err, _ = self.word.tolist()
        if err:
            raise ValueError(_message(err, self._inputs, self._coefficient,
                                      self._max_segments))


def _message(err: int, inputs: dict, coefficient: float, max_segments) -> str:
    rank, r, p = decode_error_word(err, inputs["teacher_logp"].shape[1])
    return error_word_message(rank, r, p, coefficient=coefficient, max_segments=max_segments,
                              **inputs)


def run_single_pass(launch, teacher_logp, student_logp, segment_ids, advantages, has_teacher,
                    response_mask, traj_index, params, max_segments: Optional[int],
                    deferred: bool):
    """A memset and one launch (two with traj_index) by `launch`, then, unless deferred, one
    host read of the error word. Returns ((out, gap, w, rho, num_segments), SegmentCheck or
    None); raises the data error (not deferred)."""
    L = teacher_logp.shape[1]
    cap = max_segments if max_segments is not None else min(max(L, 1), DEFAULT_CAP)
    inputs = dict(teacher_logp=teacher_logp, student_logp=student_logp,
                  segment_ids=segment_ids, advantages=advantages, response_mask=response_mask)
    coefficient = max_coefficient(params[0], params[1], params[4])
    out, gap, w, rho, num, word = launch(teacher_logp, student_logp, segment_ids, advantages,
                                         has_teacher, response_mask, traj_index, cap, *params)
    inputs["num_segments"] = num
    if deferred:
        return (out, gap, w, rho, num), SegmentCheck(word, inputs, coefficient, cap)
    err, kmax = word.tolist()                                  # the one host read
    # Rules ranked before the empty-segment rule do not depend on the table's size.
    if err and (max_segments is not None or decode_error_word(err, L)[0] < _RANK_EMPTY):
        raise ValueError(_message(err, inputs, coefficient, cap))
    if max_segments is None and kmax > cap:   # more segments than the default table: again
        return run_single_pass(launch, teacher_logp, student_logp, segment_ids, advantages,
                               has_teacher, response_mask, traj_index, params, kmax, False)
    if err:
        raise ValueError(_message(err, inputs, coefficient, cap))
    if max_segments is None:
        gap, w, rho = gap[:, :kmax], w[:, :kmax], rho[:, :kmax]
    return (out, gap, w, rho, num), None
