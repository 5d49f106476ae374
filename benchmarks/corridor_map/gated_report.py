"""The gated study's report (results/gated/report.md, and gains.png) from the filed results
alone (gated.py): the pooled claim, the table by cell, the diagnostics, cost per run."""
from __future__ import annotations

from pathlib import Path

from . import gated as study
from .report import interval, pct

ROLES = (("grpo", "GRPO"), ("oracle", "oracle"), ("sharpo", "SHARPO λ0.2"),
         ("rule", "gated (R1)"), ("control_a", "random mask (a)"),
         ("control_b", "GRPO step matched (b)"))
DIFFS = (("rule_vs_grpo", "R1 − GRPO"), ("rule_vs_control_a", "R1 − control (a)"),
         ("rule_vs_control_b", "R1 − control (b)"), ("oracle_vs_grpo", "oracle − GRPO"))
# What the controls show on their own (reported beside the declared test, not part of it;
# added to the report after the verdict was read)
CONTROL_DIFFS = (("control_a_vs_grpo", "control (a) − GRPO"),
                 ("control_b_vs_grpo", "control (b) − GRPO"),
                 ("oracle_vs_control_b", "oracle − control (b)"))
FIGURE = "gains.png"


def _num(x, fmt="{:.3f}"):
    return "n/a" if x is None else fmt.format(x)


def _pooled_row(cells: list, key: str, name: str) -> str:
    p = study.pooled(cells, key)
    return f"| {name} | {interval(p[0]) if p else 'n/a'} | {p[1] if p else 0} |"


def write_report(results: Path, out: Path, figures: bool = False) -> Path:
    cells = [c for c in (study.cell_numbers(results, cell) for cell in study.CELLS) if c]
    done = [c["cell"].name for c in cells if c["complete"]]
    lines = ["# The gated study: numbers (made by `python benchmarks/gated.py report`)", "",
             "The declared reading: [../gated.md](../gated.md). Cells complete: "
             f"{len(done)}/{len(study.CELLS)} ({', '.join(done) or 'none'}).", "",
             f"**Claim \"a gated rule helps\": {study.verdict(cells)}.**", "",
             "## Pooled over the cells' paired seeds (held-out points, 95% bootstrap)", "",
             "| difference | pooled | pairs |", "|---|---|---:|"]
    for key, name in DIFFS:
        lines.append(_pooled_row(cells, key, name))
    lines += ["", "What the controls show on their own (beside the test, not part of it; "
              "added after the verdict was read):", "", "| difference | pooled | pairs |",
              "|---|---|---:|"]
    lines += [_pooled_row(cells, key, name) for key, name in CONTROL_DIFFS]
    sh = study.share_of_oracle(cells)
    lines += ["", "R1's share of the oracle's gain (pooled means, same pairs): "
              + (f"{100 * sh[0]:.0f}% ({100 * sh[1]:.0f}% to {100 * sh[2]:.0f}%)"
                 if sh and all(x == x for x in sh) else "n/a"), "",
              "## By cell: held-out success (%), mean over the seeds filed (seeds)", "",
              "| cell | warm start | " + " | ".join(n for _, n in ROLES)
              + " | control (b) lr (update norm per step at 5e-4, seed 0: GRPO / oracle) |",
              "|---|---:|" + "---|" * len(ROLES) + "---|"]
    for c in cells:
        a = c["arms"]
        cols = [f"{pct(a[r]['held'])} ({len(a[r]['seeds'])})" if r in a else "not run"
                for r, _ in ROLES]
        lines.append(f"| {c['cell'].name} | {pct(c['warm']['eval']['success'])} | "
                     + " | ".join(cols) + f" | {c['lr_b'] or 'pending'} ("
                     + " / ".join(_num(x, "{:.4f}") for x in c["norms"]) + ") |")
    lines += ["", "## By cell: differences by seed (held-out points, 95% bootstrap over seeds)",
              "", "| cell | " + " | ".join(n for _, n in DIFFS) + " |",
              "|---|" + "---|" * len(DIFFS)]
    for c in cells:
        cols = []
        for key, _ in DIFFS:
            d = c["diffs"][key]
            if not d:
                cols.append("n/a")
                continue
            import numpy as np
            from .stats import boot
            cols.append(f"{interval(boot(np.array(list(d.values()))))} ({len(d)})")
        lines.append(f"| {c['cell'].name} | " + " | ".join(cols) + " |")
    lines += ["", "## Diagnostics per arm and cell (means over steps, then seeds)", "",
              "Kept rows: the share of rows with A_i != 0 whose advantage is not 0 (on one "
              "batch R1 and control (a) keep the same number of rows; their runs' batches "
              "differ after the first step), the oracle's share on the same batches beside "
              "it. Credit AUC: docs/credit_quality.md. |A| per token: "
              "`adv/abs_mean`. Update norm: the L2 norm of each step's weight change "
              "(control (b) matches the oracle's by its learning rate). Collapses: runs "
              "ending below the warm start. Cost: seconds per RL run, its evaluation "
              "included, as each unit.json records it: 2 runs at a time on a shared 2-core "
              "machine; the map's arms ran at nice 10 on a quieter one, the study's at nice "
              "19 beside other sessions, so the columns do not compare across those two "
              "groups (the teacher pass costs what SHARPO's does).", "",
              "| cell | arm | kept rows (oracle's) | credit AUC | mean abs A per token | "
              "update norm | collapses | s per run |", "|---|---|---|---:|---:|---:|---|---:|"]
    for c in cells:
        for role, name in ROLES:
            if role not in c["arms"]:
                continue
            a = c["arms"][role]
            d = a["diag"]
            kept = (f"{_num(d['kept'], '{:.2f}')} ({_num(d['kept_oracle'], '{:.2f}')})"
                    if d["kept"] is not None else "")
            lines.append(f"| {c['cell'].name} | {name} | {kept} | {_num(d['auc'], '{:.2f}')} | "
                         f"{_num(d['abs_adv'])} | {_num(d['update_norm'], '{:.4f}')} | "
                         f"{a['collapses']}/{len(a['seeds'])} | {_num(a['seconds'], '{:.0f}')} |")
    if figures and cells:
        from .gated_figure import draw
        draw(cells, Path(out) / FIGURE, DIFFS)
        lines += ["", "## Figure", "", f"![{FIGURE}]({FIGURE})"]
    path = Path(out) / "report.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path
