"""The map's figures from cell summaries (stats.cell_summary): heat maps of SHARPO - GRPO and
oracle - GRPO (held-out points, by seed: the declared reading's unit) over the grid, rows
(start, lamps) x columns (turns), an empty cell where nothing is filed and the number of
seeds paired in each; and SHARPO's share of the oracle's gain against the warm start's
success (95% intervals clipped to SHARE_LIM; only the cells with a ceiling: stats.has_ceiling).
Titles say PARTIAL while the grid is incomplete."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .grid import DECISIVE, STARTS, TURNS

HEAT, SHARE = "map_heat.png", "map_share.png"
SHARE_LIM = (-150.0, 250.0)     # share axis (%): 95% intervals clipped to it


def grid_values(summaries, key: str):
    """(rows, values [rows x turns] in points or nan, seeds paired [rows x turns], 95%
    interval's low and high ends) of the grid's base cells (SFT seed 0) for gain ``key``."""
    rows = [(s, d) for s in STARTS for d in sorted(DECISIVE, reverse=True)]
    vals = np.full((len(rows), len(TURNS)), np.nan)
    lo, hi = vals.copy(), vals.copy()
    n = np.zeros((len(rows), len(TURNS)), dtype=int)
    for s in summaries:
        c, g = s["cell"], s[key]
        if c.sft_seed or (c.start, c.decisive) not in rows or c.turns not in TURNS or not g:
            continue
        i, j = rows.index((c.start, c.decisive)), TURNS.index(c.turns)
        vals[i, j], lo[i, j], hi[i, j] = (100 * x for x in g["by_seed"][:3])
        n[i, j] = len(g["seeds"])
    return rows, vals, n, lo, hi


def draw(results: Path, summaries, complete: int) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tag = "" if complete == 16 else f" (PARTIAL: {complete} of 16 cells complete)"
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    panels = [(ax, key, title, grid_values(summaries, key)) for ax, key, title in (
        (axes[0], "sharpo_vs_grpo", "SHARPO λ 0.2 - GRPO"),
        (axes[1], "oracle_vs_grpo", "oracle - GRPO"))]
    both = np.concatenate([p[3][1].ravel() for p in panels])
    lim = max(5.0, float(np.nanmax(np.abs(both))) if np.isfinite(both).any() else 5.0)
    for ax, key, title, (rows, vals, n, lo, hi) in panels:     # one colour scale for both
        im = ax.imshow(vals, cmap="RdBu", vmin=-lim, vmax=lim)
        for i in range(vals.shape[0]):
            for j in range(vals.shape[1]):
                text = ("not run" if n[i, j] == 0 else f"{vals[i, j]:+.1f}\n[{lo[i, j]:+.1f}, "
                        f"{hi[i, j]:+.1f}]\n({n[i, j]} seeds)")
                dark = n[i, j] > 0 and abs(vals[i, j]) > 0.6 * lim     # white on dark
                ax.text(j, i, text, ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
        ax.set_xticks(range(len(TURNS)), [f"{t} turns" for t in TURNS])
        ax.set_yticks(range(len(rows)), [f"{s} start, {d} lamps" for s, d in rows])
        ax.set_title(f"{title}, held-out points\n(mean over seeds [95% by seed])", fontsize=10)
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle("The corridor map" + tag, fontsize=11)
    fig.tight_layout()
    fig.savefig(Path(results) / HEAT, dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    left_out, drawn = [], 0
    for s in summaries:
        sh = s["share"]
        if sh is None or not np.isfinite(sh[0]):
            continue
        if not s.get("ceiling"):        # no ceiling to share: the ratio means nothing
            left_out.append(s["cell"].name)
            continue
        x, y = 100 * s["warm"]["eval"]["success"], 100 * sh[0]
        lo, hi = (np.clip(100 * v, *SHARE_LIM) if np.isfinite(v) else y for v in sh[1:3])
        ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt="o", capsize=3,
                    color="#1f6feb" if s["cell"].start == "weak" else "#b42318")
        ax.annotate(s["cell"].name, (x, y), fontsize=7, textcoords="offset points",
                    xytext=(4, 4 if drawn % 2 == 0 else -10))    # neighbours' labels apart
        drawn += 1
    ax.set_ylim(SHARE_LIM[0] - 10, SHARE_LIM[1] + 10)
    if left_out:
        fig.text(0.01, 0.01, "no ceiling (oracle - GRPO by task holds 0), not drawn: "
                 + ", ".join(left_out), fontsize=6.5)
    ax.plot([], [], "o", color="#1f6feb", label="weak start")
    ax.plot([], [], "o", color="#b42318", label="full start")
    ax.legend(fontsize=7, loc="upper right")
    ax.axhline(0, color="k", lw=0.8)
    ax.axhline(100, color="#b42318", lw=0.8, ls="--")
    ax.set_xlabel("warm start's held-out success (%)")
    ax.set_ylabel("SHARPO's share of the oracle's gain (%),\n95% interval clipped to "
                  f"[{SHARE_LIM[0]:.0f}, {SHARE_LIM[1]:.0f}]", fontsize=8)
    ax.set_title("Share of the ceiling vs the warm start" + tag, fontsize=9)
    fig.tight_layout()
    fig.savefig(Path(results) / SHARE, dpi=100)
    plt.close(fig)
    return [HEAT, SHARE]
