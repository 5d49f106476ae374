"""The `cpu` backend's shared tiles: the chunked math of `token_logprobs` (token_cpu.py)
and `linear_logprobs` (linear_cpu.py), their tile sizing and the end of both forwards.

Memory-bounded: no [N, V] softmax (and, for the linear version, no [N, V] logits) is ever
held. Work is done on tiles of rows x vocabulary whose size comes from a byte budget
(`ChunkOptions`); each tile is a handful of in-place torch ops (MKL matmuls for the linear
version), so the extra memory is about two tiles plus O(N) statistics.

The math, per row with raw logits x (or z = h W^T + b), temperature T, label y:

    m    = max_v x_v                                  (raw units; T > 0 keeps the order)
    d_v  = (x_v - m) / T                              (<= 0; -inf lanes clamped to -1e4)
    s    = sum_v exp(d_v),  t = sum_v exp(d_v) d_v    (online over vocabulary tiles:
                                                       online_lse.py)
    logp = d_y - log s
    H    = log s - t / s                              (entropy of softmax(x / T))

Taking the difference x - m before dividing by T keeps log p accurate for |x| ~ 1e4. The
clamp (only where the entropy is wanted) makes exp(d) exactly 0 and every product with d
finite, so -inf logits give no 0 * inf in the entropy or its gradient. Backward recomputes
the tile from the saved (m, log s, H), with p = exp(d) / s and q = log p:

    dL/dq = g_logp (onehot_y - p) - g_H p (q + H)      (p (E_p[q] - q), E_p[q] = -H)
          = g_logp onehot_y - exp(d) (c1 + c2 d)        (c1, c2 per row: few passes)
    dL/dx = dL/dq / T

Each tile costs a few elementwise passes (sub, [div], exp, sum in forward; sub, [div],
exp, scale, scatter in backward, plus clamp/addcmul/mul with the entropy) beside its
matmuls: the linear version does 1 matmul per tile forward and 3 backward (recompute,
grad_hidden, grad_weight), against the naive path's 1 + 2 with N x V tensors in memory.
The recompute is skipped for the first vocabulary tiles when grad_weight is allocated in
forward and their logits are kept in the rows of it that backward writes last
(`_stash_views`, `ChunkOptions.stash_logits`): 37% of the tiles for the Qwen head at
N = 2048, all but one when N <= H, at no memory beyond the gradient itself.

Computation dtype: float64 for float64 inputs, float32 otherwise (bf16/fp16 are upcast
per tile). Outputs use the computation dtype; gradients come back in the input dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["ChunkOptions", "DEFAULT_OPTIONS"]

# Finite stand-in for -inf lanes, applied after the temperature: exp() of anything below
# about -104 (fp32) or -745 (fp64) is exactly 0, so exp(d) = 0 there and every product of d
# with a per-row factor stays finite (no 0 * inf).
_NEG_CLAMP = -1e4


@dataclass(frozen=True)
class ChunkOptions:
    """Tile sizing of the CPU path.

    tile_bytes: bytes of one [rows, vocab] tile of the linear version in the computation
        dtype; about two tiles are live at once (plus, for bf16/fp16 weights, an upcast
        weight slice). Large, for efficient matmuls.
    max_rows: most rows per tile of the linear version (the matmul's M); the vocabulary
        width of a tile then follows from tile_bytes.
    token_tile_bytes: the same for token_logprobs (whole rows, at least one). Cache-sized
        tiles (4 MiB) were 4x slower on the 2-core test machine under load: every torch op
        is a parallel region whose threads wait for each other, so fewer, larger tiles win.
    stash_logits: when the weight gradient will be needed (and is written directly, see
        `_writes_grad_weight_directly`), allocate it in forward and keep the logits of the
        first vocabulary tiles in the part of it that backward writes last, so backward
        skips their recompute matmul. No memory beyond the gradient itself, which backward needs
        anyway; but it is held from forward on, so several forwards awaiting one backward
        hold one [V, H] buffer each: turn it off for that pattern with a short N (where
        naive's [N, V] is smaller than [V, H]).
    """
    tile_bytes: int = 64 << 20
    max_rows: int = 4096
    token_tile_bytes: int = 64 << 20
    stash_logits: bool = True

    def __post_init__(self):
        if not isinstance(self.tile_bytes, int) or self.tile_bytes <= 0:
            raise ValueError(f"tile_bytes: expected a positive int, got {self.tile_bytes!r}")
        if not isinstance(self.max_rows, int) or self.max_rows <= 0:
            raise ValueError(f"max_rows: expected a positive int, got {self.max_rows!r}")
        if not isinstance(self.token_tile_bytes, int) or self.token_tile_bytes <= 0:
            raise ValueError(f"token_tile_bytes: expected a positive int, got "
                             f"{self.token_tile_bytes!r}")
        if not isinstance(self.stash_logits, bool):
            raise TypeError(f"stash_logits: expected a bool, got {self.stash_logits!r}")


DEFAULT_OPTIONS = ChunkOptions()


def _cdtype(*tensors: Optional[torch.Tensor]) -> torch.dtype:
    return torch.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) \
        else torch.float32


# The forward's entropy sums take exp(d) over column blocks of this many bytes: a small
# [R, cb] workspace instead of a second [R, C] tile (issue 46: the verl teacher pass).
_ENTROPY_BLOCK_BYTES = 4 << 20


class _Workspace:
    """Reused flat buffers for tiles: a fresh 64 MiB tensor per tile would be mmap'd and
    page-faulted every time (glibc serves large blocks with mmap)."""

    def __init__(self, dtype: torch.dtype):
        self.dtype, self.bufs = dtype, {}

    def get(self, key: str, rows: int, cols: int) -> torch.Tensor:
        buf = self.bufs.get(key)
        if buf is None or buf.numel() < rows * cols:
            buf = self.bufs[key] = torch.empty(rows * cols, dtype=self.dtype)
        return buf[:rows * cols].view(rows, cols)


def _valid_rows(labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    return (labels != ignore_index).nonzero().squeeze(1)


def _shifted_rows(ws: _Workspace, x: torch.Tensor, m: torch.Tensor, dt: torch.dtype,
                  out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """x - m[:, None] in dt, into `out` or the workspace, in one pass when x is already dt."""
    z = out if out is not None else ws.get("z", x.shape[0], x.shape[1])
    if x.dtype == dt:
        return torch.sub(x, m.unsqueeze(1), out=z)
    return z.copy_(x).sub_(m.unsqueeze(1))


def _tile_sums_(d: torch.Tensor, temperature: float, need_entropy: bool, ws: _Workspace):
    """Clobbers d [R, C] (= logits - row reference m). Returns (sum_v exp(d), sum_v exp(d) d
    or None) per row, after d /= T."""
    if temperature != 1.0:
        d.div_(temperature)
    if not need_entropy:
        return d.exp_().sum(-1), None                   # exp(-inf) = 0: no clamp needed
    d.clamp_(min=_NEG_CLAMP)
    rows, cols = d.shape
    cb = max(1, min(cols, _ENTROPY_BLOCK_BYTES // max(1, rows * d.element_size())))
    s, t = d.new_zeros(rows), d.new_zeros(rows)
    for c0 in range(0, cols, cb):                        # exp(d) a column block at a time
        db = d[:, c0:c0 + cb]
        eb = torch.exp(db, out=ws.get("e", rows, db.shape[1]))
        s += eb.sum(-1)
        t += eb.mul_(db).sum(-1)
    return s, t


def _tile_grad_(d: torch.Tensor, logs: torch.Tensor, ent: torch.Tensor,
                g_lp: torch.Tensor, g_ent: Optional[torch.Tensor], temperature: float,
                ws: _Workspace):
    """Clobbers d [R, C] (= logits - row max m) into dL/dz less the label term g_lp / T:

        dL/dz = [g_lp onehot - p (g_lp + g_H (d - E_p[d]))] / T,   p = exp(d) / s

    (the p (E_p[q] - q) form of the entropy gradient, with E_p[d] = log s - H), computed as
    exp(d) * (c1 + c2 d) with per-row c1, c2: finite for clamped lanes, where exp(d) = 0.
    """
    if temperature != 1.0:
        d.div_(temperature)
    scale = -torch.exp(-logs) / temperature             # -1 / (s T)
    if g_ent is None:
        return d.exp_().mul_((scale * g_lp).unsqueeze(1))
    d.clamp_(min=_NEG_CLAMP)
    e = torch.exp(d, out=ws.get("e", *d.shape))
    c1 = (scale * (g_lp - g_ent * (logs - ent))).unsqueeze(1)
    c2 = (scale * g_ent).unsqueeze(1)
    torch.addcmul(c1, d, c2, out=d)
    return d.mul_(e)


def _finish_forward(ctx, saved: tuple, logp, entropy, temperature: float, need_entropy: bool,
                    options: ChunkOptions):
    """The end of both autograd forwards: keep what backward reads; the entropy [N] is not
    differentiable when it was not asked for. -> (logp [N], entropy [N])."""
    ctx.save_for_backward(*saved)
    ctx.temperature, ctx.need_entropy, ctx.options = temperature, need_entropy, options
    if not need_entropy:
        ctx.mark_non_differentiable(entropy)
    return logp, entropy
