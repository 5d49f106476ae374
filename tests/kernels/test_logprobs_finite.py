"""Non-finite inputs to token_logprobs / linear_logprobs (docs/api.md, "Non-finite inputs";
docs/api.md, "Bad input"): with check_finite (the default for CPU tensors) a scored row holding NaN or
+inf is a ValueError naming the argument and the row; -inf entries (masked tokens) and
rows at ignore_index are allowed; check_finite=False gives NaN out, as documented."""
import math

import pytest
import torch

from sharpo_kernels import linear_logprobs, token_logprobs
from sharpo_kernels.logprobs.checks import resolve_check_finite

CPU_BACKENDS = ["cpu", "torch"]


def _logits(N=4, V=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, V, generator=g), torch.randint(0, V, (N,), generator=g)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("bad, what", [(math.nan, "NaN"), (math.inf, r"\+inf")])
def test_token_logprobs_refuses_nan_and_posinf_naming_logits_and_row(backend, bad, what):
    logits, labels = _logits()
    logits[2, 5] = bad
    with pytest.raises(ValueError, match=rf"^logits: row 2 .*holds {what}"):
        token_logprobs(logits, labels, backend=backend)
    out = token_logprobs(logits, labels, backend=backend, check_finite=False)
    assert not math.isfinite(float(out[2])) and torch.isfinite(out[[0, 1, 3]]).all()


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_masked_tokens_and_ignored_rows_are_allowed(backend):
    logits, labels = _logits()
    logits[0, 3] = -math.inf                       # a masked vocabulary entry
    labels[1] = 4
    logits[1, 4] = -math.inf                       # the label itself masked: logp -inf
    logits[3] = math.nan                           # a padding row...
    labels[3] = -100                               # ...at ignore_index
    out = token_logprobs(logits, labels, backend=backend)
    ref = torch.log_softmax(logits[:3], -1).gather(1, labels[:3, None])[:, 0]
    assert torch.equal(out[:3], ref) or torch.allclose(out[:3], ref, atol=1e-6)
    assert out[1] == -math.inf and out[3] == 0
    logits[2] = -math.inf                          # every token masked in a scored row
    with pytest.raises(ValueError, match="logits: row 2 .*only -inf"):
        token_logprobs(logits, labels, backend=backend)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("where", ["hidden", "weight", "bias"])
def test_linear_logprobs_names_the_non_finite_argument(backend, where):
    g = torch.Generator().manual_seed(1)
    hidden, weight, bias = torch.randn(5, 3, generator=g), torch.randn(6, 3, generator=g), \
        torch.randn(6, generator=g)
    labels = torch.randint(0, 6, (5,), generator=g)
    {"hidden": hidden, "weight": weight, "bias": bias}[where].view(-1)[1] = math.nan
    with pytest.raises(ValueError, match=rf"^{where}: "):
        linear_logprobs(hidden, weight, labels, bias=bias, backend=backend)
    out = linear_logprobs(hidden, weight, labels, bias=bias, backend=backend, check_finite=False)
    assert torch.isnan(out).any()


def test_linear_allows_masking_bias_and_ignored_nan_rows():
    hidden, weight = torch.randn(3, 4), torch.randn(5, 4)
    bias = torch.zeros(5)
    bias[2] = -math.inf
    hidden[1] = math.nan
    labels = torch.tensor([0, -100, 2])
    out = linear_logprobs(hidden, weight, labels, bias=bias)
    assert math.isfinite(float(out[0])) and out[1] == 0 and out[2] == -math.inf


def test_the_default_is_on_for_cpu_and_off_for_cuda_and_the_flag_is_typed():
    assert resolve_check_finite(None, torch.device("cpu")) is True
    assert resolve_check_finite(None, torch.device("cuda", 0)) is False
    assert resolve_check_finite(True, torch.device("cuda", 0)) is True
    logits, labels = _logits()
    with pytest.raises(TypeError, match="check_finite"):
        token_logprobs(logits, labels, check_finite="yes")
    with pytest.raises(TypeError, match="check_finite"):
        linear_logprobs(torch.randn(2, 3), torch.randn(4, 3), torch.tensor([0, 1]), check_finite=1)


def test_the_check_keeps_gradients_and_values():
    logits, labels = _logits(N=6, V=11)
    a = logits.clone().requires_grad_(True)
    b = logits.clone().requires_grad_(True)
    token_logprobs(a, labels, check_finite=True).sum().backward()
    token_logprobs(b, labels, check_finite=False).sum().backward()
    assert torch.equal(a.grad, b.grad)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_default_off_and_on_request():
    logits, labels = _logits(N=8, V=64)
    logits, labels = logits.cuda(), labels.cuda()
    logits[3, 7] = math.nan
    assert torch.isnan(token_logprobs(logits, labels)[3])            # off by default
    with pytest.raises(ValueError, match="logits: row 3"):
        token_logprobs(logits, labels, check_finite=True)
    h, w = torch.randn(4, 8, device="cuda"), torch.randn(64, 8, device="cuda")
    w[0, 0] = math.inf
    with pytest.raises(ValueError, match="^weight"):
        linear_logprobs(h, w, labels[:4], check_finite=True)
