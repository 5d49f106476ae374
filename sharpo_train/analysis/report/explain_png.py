"""A PNG of one group's credit: per rollout, its segments laid end to end (width = tokens,
colour = the update relative to GRPO, (1 - lam) + lam * rho * w, in the HTML page's colours:
report/explain_colors.py) and, beside it, the GRPO advantage against SHARPO's per-segment
advantage."""
from __future__ import annotations

import io
import math
from pathlib import Path

from ...io import atomic_write_bytes
from .explain_colors import credit_factor, factor_rgb, factor_scale, group_lam
from .records import rollout_succeeded


def render_group_png(record: dict, group_index: int, out_png: str | Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap, Normalize

    group = record["groups"][group_index]
    lam = group_lam(record)
    scale = factor_scale(credit_factor(seg, lam) for r in group["rollouts"]
                         for t in r["turns"] for seg in t["segments"])
    rollouts = group["rollouts"]
    n = max(1, len(rollouts))
    fig, axes = plt.subplots(n, 2, figsize=(13, 0.9 * n + 1.4), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    # the HTML scale sampled on log(factor) in [-scale, scale]
    cmap = ListedColormap([tuple(c / 255 for c in factor_rgb(math.exp(x), scale)) for x in
                           (scale * (2 * i / 255 - 1) for i in range(256))])
    norm = Normalize(vmin=-scale, vmax=scale)
    for r_no, rollout in enumerate(rollouts):
        ax_seg, ax_adv = axes[r_no]
        segs = [s for t in rollout["turns"] for s in t["segments"]]
        x = 0
        for seg in segs:
            rgb = factor_rgb(credit_factor(seg, lam), scale)
            ax_seg.barh(0, seg["num_tokens"], left=x, height=0.8,
                        color=tuple(c / 255 for c in rgb),
                        edgecolor="black" if seg["kind"] == "action" else "none", linewidth=0.6)
            x += seg["num_tokens"]
        ok = rollout_succeeded(rollout)
        ax_seg.set_yticks([0], [f"#{rollout.get('index', r_no)} {'✓' if ok else '✗'}"])
        ax_seg.set_xlim(0, max(x, 1))
        ax_seg.tick_params(axis="x", labelsize=7)
        ks = range(len(segs))
        ax_adv.axhline(0, color="grey", lw=0.5)
        ax_adv.plot(ks, [s.get("advantage_grpo", rollout["advantage_grpo"]) for s in segs],
                    color="black", lw=1, marker="o", ms=3, label="GRPO")
        ax_adv.bar(ks, [s.get("advantage") or 0.0 for s in segs], color="tab:purple",
                   alpha=0.7, label="SHARPO")
        ax_adv.tick_params(labelsize=7)
        if r_no == 0:
            ax_seg.set_title("segments (width = tokens, colour = update vs GRPO "
                             "(1-λ)+λρw, black edge = action)",
                             fontsize=9)
            ax_adv.set_title("advantage per segment", fontsize=9)
            ax_adv.legend(fontsize=7, loc="upper right")
    axes[-1][0].set_xlabel("generated tokens", fontsize=8)
    axes[-1][1].set_xlabel("segment", fontsize=8)
    fig.suptitle(f"step {record.get('step')} · group {group_index} · {group.get('family', '')} · "
                 f"{record.get('method', '')}", fontsize=10)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    bar = fig.colorbar(sm, ax=axes[:, 0].tolist(), fraction=0.02, pad=0.01)
    bar.ax.set_title("× GRPO", fontsize=8)          # grey bars: no teacher (GRPO's advantage)
    ticks = [-scale, -scale / 2, 0.0, scale / 2, scale]
    bar.set_ticks(ticks, labels=[f"×{math.exp(t):.3g}" for t in ticks])
    out_png = Path(out_png)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight",
                metadata={"Software": "sharpo explain"})   # outputs.CREDIT_PLOT knows it
    atomic_write_bytes(out_png, buf.getvalue())      # a link in its place is not followed
    plt.close(fig)
    return out_png
