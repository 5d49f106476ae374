"""The CPU forward's entropy sums over column blocks (logprobs/cpu_tiles.py
`_ENTROPY_BLOCK_BYTES`): with blocks of a few columns, so that every tile is split many
times with a ragged last block, log-probs and entropy (and their gradients) still equal the
float64 reference."""
import pytest
import torch

from sharpo_kernels import linear_logprobs, token_logprobs
from sharpo_kernels.logprobs import cpu_tiles
from sharpo_kernels.logprobs.reference import linear_logprobs_reference, token_logprobs_reference


@pytest.fixture
def tiny_blocks(monkeypatch):
    monkeypatch.setattr(cpu_tiles, "_ENTROPY_BLOCK_BYTES", 5 * 4 * 3)   # ~3 fp32 columns


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 2e-2)])
def test_linear_entropy_in_column_blocks(tiny_blocks, temperature, dtype, tol):
    g = torch.Generator().manual_seed(11)
    n, h, v = 13, 9, 37
    hidden = torch.randn(n, h, generator=g).to(dtype).requires_grad_()
    weight = torch.randn(v, h, generator=g).to(dtype).requires_grad_()
    labels = torch.randint(0, v, (n,), generator=g)
    labels[4] = -100
    lp, ent = linear_logprobs(hidden, weight, labels, temperature=temperature,
                              return_entropy=True, backend="cpu")
    h64, w64 = hidden.detach().double().requires_grad_(), weight.detach().double().requires_grad_()
    lp_ref, ent_ref = linear_logprobs_reference(h64, w64, labels, temperature=temperature,
                                                return_entropy=True)
    torch.testing.assert_close(lp.double(), lp_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(ent.double(), ent_ref, rtol=tol, atol=tol)
    up = torch.randn(n, generator=g, dtype=torch.float64)
    (lp.double() * up + 0.3 * ent.double()).sum().backward()
    (lp_ref * up + 0.3 * ent_ref).sum().backward()
    torch.testing.assert_close(hidden.grad.double(), h64.grad, rtol=10 * tol, atol=10 * tol)
    torch.testing.assert_close(weight.grad.double(), w64.grad, rtol=10 * tol, atol=10 * tol)


def test_token_entropy_in_column_blocks(tiny_blocks):
    g = torch.Generator().manual_seed(12)
    logits = torch.randn(7, 41, generator=g) * 3
    logits[2, 5:] = float("-inf")                       # -inf logits: no 0 * inf in the sums
    labels = torch.randint(0, 5, (7,), generator=g)
    lp, ent = token_logprobs(logits, labels, temperature=0.9, return_entropy=True, backend="cpu")
    lp_ref, ent_ref = token_logprobs_reference(logits.double(), labels, temperature=0.9,
                                               return_entropy=True)
    torch.testing.assert_close(lp.double(), lp_ref, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(ent.double(), ent_ref, rtol=2e-5, atol=2e-5)
