"""The gated study's figure (results/gated/gains.png): per cell, each difference of the
report's DIFFS by seed (its mean and 95% bootstrap interval, held-out points)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .stats import boot


def draw(cells: list[dict], path: Path, diffs) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [c["cell"].name for c in cells]
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(names) + 2), 4))
    width = 0.8 / len(diffs)
    for j, (key, label) in enumerate(diffs):
        xs, ms, los, his = [], [], [], []
        for i, c in enumerate(cells):
            d = list(c["diffs"][key].values())
            if not d:
                continue
            m, lo, hi = boot(np.array(d))
            xs.append(i + (j - (len(diffs) - 1) / 2) * width)
            ms.append(100 * m)
            los.append(100 * (m - lo))
            his.append(100 * (hi - m))
        if xs:
            ax.bar(xs, ms, width, yerr=[los, his], capsize=2, label=label)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylabel("held-out success difference (points)")
    ax.set_title("Gated credit (R1) against GRPO and two controls; the oracle for scale")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
