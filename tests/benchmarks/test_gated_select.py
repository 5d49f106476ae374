"""benchmarks/gated_select.py: the rule that chooses theta and kappa (balanced accuracy
against the oracle's credit, ties to the smaller |theta| / kappa nearest 1), on hand-made
rows. Nothing here trains."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import gated_select as gs  # noqa: E402


def test_balanced_accuracy_by_hand():
    keep = torch.tensor([True, True, False, False, True])
    cred = torch.tensor([True, False, True, False, False])
    # credited rows kept: 1 of 2; the others dropped: 1 of 3
    assert gs.balanced_accuracy(keep, cred) == pytest.approx(0.5 * (1 / 2 + 1 / 3))
    assert gs.balanced_accuracy(keep, torch.ones(5, dtype=torch.bool)) is None


def test_choose_finds_the_separating_theta():
    """Credited rows have sign(A) * D~ of 0.6-0.9, the others -0.4 to 0.2: every theta in
    [0.25, 0.5] separates them perfectly, and the rule takes the smaller, 0.25."""
    n = 8
    base = torch.tensor([0.5, -0.5] * (n // 2))
    sd = torch.tensor([0.6, 0.9, 0.7, 0.8, -0.4, 0.2, 0.0, 0.1], dtype=torch.float64)
    gaps = torch.sign(base.double()) * sd
    step = {"base": base, "gaps": gaps, "has_teacher": torch.ones(n, dtype=torch.bool),
            "credited": torch.tensor([True] * 4 + [False] * 4),
            "group": torch.zeros(n, dtype=torch.long), "turn": torch.arange(n)}
    out = gs.choose([step])
    assert out["theta"] == 0.25
    assert out["theta_scores"]["0.25"] == pytest.approx(1.0)
    assert out["theta_scores"]["0.0"] == pytest.approx(0.5 * (1 + 2 / 4))
    assert out["rows_gated"] == n and out["kappa"] in gs.KAPPAS
    assert out["r1_kept_share_of_gated"] == pytest.approx(0.5)
