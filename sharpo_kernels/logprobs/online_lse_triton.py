"""The online log-sum-exp step as a Triton function, used by the linear log-prob kernels
(linear_triton.py; token_triton.py carries the same statistics per slot in base 2, see its
docstring). Its torch twin, for the cpu backend and the split merge, is online_lse.py: the
same formulas, line for line.

Running statistics per row, over the vocabulary seen so far:
m = raw max, s = sum exp(d), t = sum exp(d) d with d = (x - m) / T. A new block with raw
max `block_max` moves the reference to m' = max(m, block_max): with delta = (m' - m) / T,

    s' = exp(-delta) s,    t' = exp(-delta) (t - delta s)

(each old d becomes d - delta). While every value seen is -inf (m = -inf) nothing has
started: s = t = 0 and the reference used for the block's own terms is 0, not -inf, so no
inf - inf appears.
"""
import triton
import triton.language as tl


@triton.jit
def online_lse_rescale_triton(m, s, t, block_max, temperature, NEED_ENTROPY: tl.constexpr):
    """Returns (m', m_ref, s', t'): m' the new running max, m_ref the finite reference the
    caller subtracts from the block (m', or 0 while m' is -inf), s' and t' rescaled to it.
    m, s, t, block_max: scalars or [BLOCK_N] vectors alike."""
    m_new = tl.maximum(m, block_max)
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    started = m != float("-inf")
    delta = tl.where(started, (m_ref - m) / temperature, 0.0)
    alpha = tl.exp(-delta)
    if NEED_ENTROPY:
        t = tl.where(started, alpha * (t - delta * s), 0.0)
    s = tl.where(started, alpha * s, 0.0)
    return m_new, m_ref, s, t
