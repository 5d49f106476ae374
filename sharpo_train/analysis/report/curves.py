"""Learning curves from metrics.jsonl: training success per step (moving average), the
greedy success on a fixed sample of training tasks at the eval steps (eval.train_tasks),
and held-out success at the eval steps; several runs of one method are averaged."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ...io import atomic_write_bytes
from .records import read_metrics


def moving_average(values: list[float], window: int) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if window <= 1 or len(x) == 0:
        return x
    out = np.empty_like(x)
    for i in range(len(x)):  # trailing window, shorter at the start
        out[i] = x[max(0, i - window + 1): i + 1].mean()
    return out


def run_curves(run_dir: str | Path) -> dict:
    """{"train": (steps, success), "eval": (steps, success), "train_eval": (steps, greedy
    success on the fixed training sample)} of one run."""
    train, evals = read_metrics(run_dir)
    train = [r for r in train if "success" in r]
    fixed = [r for r in evals if "eval/train_success" in r]
    return {"train": ([r["step"] for r in train], [float(r["success"]) for r in train]),
            "eval": ([r["step"] for r in evals], [float(r["eval/success"]) for r in evals]),
            "train_eval": ([r["step"] for r in fixed],
                           [float(r["eval/train_success"]) for r in fixed])}


def _mean_over_runs(series: list[tuple[list, list]]):
    """Align runs on the steps they share; returns steps, mean, min, max."""
    if not series:
        return [], np.array([]), np.array([]), np.array([])
    common = sorted(set.intersection(*(set(s) for s, _ in series)))
    stack = np.array([[dict(zip(s, v))[k] for k in common] for s, v in series], dtype=float)
    if stack.size == 0:
        return [], np.array([]), np.array([]), np.array([])
    return common, stack.mean(0), stack.min(0), stack.max(0)


def plot_learning_curves(runs: dict[str, list[str | Path]], out_png: str | Path,
                         smooth: int = 5, title: str = "Learning curve",
                         start_success: float | None = None) -> Path:
    """runs: label -> run directories (seeds). Two panels: training success (sampled, moving
    average over `smooth` steps; dashed: greedy on the fixed training sample at the eval
    steps, when logged) and held-out success at the eval steps; lines are the mean
    over runs, shading spans min-max. ``start_success``: held-out success of the common
    starting point (the warm start), drawn at step 0 of every curve."""
    from .mpl import pyplot
    plt = pyplot()                      # MPLCONFIGDIR: not the user's home

    fig, (ax_train, ax_eval) = plt.subplots(1, 2, figsize=(11, 4))
    for label, dirs in runs.items():
        curves = [run_curves(d) for d in dirs]
        if start_success is not None:
            for c in curves:
                if 0 not in c["eval"][0]:
                    c["eval"] = ([0] + c["eval"][0], [start_success] + c["eval"][1])
        steps, mean, lo, hi = _mean_over_runs(
            [(s, list(moving_average(v, smooth))) for s, v in (c["train"] for c in curves)])
        color = None
        if steps:
            line, = ax_train.plot(steps, mean * 100, label=f"{label} (n={len(dirs)})")
            color = line.get_color()
            if len(dirs) > 1:
                ax_train.fill_between(steps, lo * 100, hi * 100, alpha=0.15, color=color)
        steps, mean, lo, hi = _mean_over_runs([c["train_eval"] for c in curves])
        if steps:
            ax_train.plot(steps, mean * 100, marker="s", linestyle="--", color=color,
                          label=f"{label}: greedy, fixed training sample")
        steps, mean, lo, hi = _mean_over_runs([c["eval"] for c in curves])
        if steps:
            line, = ax_eval.plot(steps, mean * 100, marker="o", label=f"{label} (n={len(dirs)})")
            if len(dirs) > 1:
                ax_eval.fill_between(steps, lo * 100, hi * 100, alpha=0.15,
                                     color=line.get_color())
    ax_train.set(title=f"training success (sampled: moving avg, {smooth} steps)", xlabel="RL step",
                 ylabel="success (%)")
    ax_eval.set(title="held-out success", xlabel="RL step", ylabel="success (%)")
    from matplotlib.ticker import MaxNLocator
    for ax in (ax_train, ax_eval):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.set_ylim(-2, 102)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    out_png = Path(out_png)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    atomic_write_bytes(out_png, buf.getvalue())      # a link in its place is not followed
    plt.close(fig)
    return out_png
