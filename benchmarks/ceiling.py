"""Every credit method against the ceiling (benchmarks/results/corridor_ceiling_summary.md).

Reads a finished `sharpo compare` directory and prints, per method, the gain over a
reference method (GRPO) in late training success (paired by RL seed) and in held-out
success (paired task by task, each task's success averaged over the seeds; a task's
success is its rate when eval.episodes_per_task > 1), the fraction
of the oracle's gain the method captures (the ratio of the mean gains; 95% bootstrap over
seeds / tasks, resampled jointly for the method and the oracle, on the seeds all three
ran; the gain itself on every seed the method and the reference ran), and the collapses
(runs whose final held-out success is below the warm start's). ``--figure`` draws the
held-out and late-training gains with their intervals and the oracle's as a line.

Late training success of a run: its mean training success over the last ``--train-frac``
of its steps (default 0.5, the last half; compare_training.late_success). ``--train-frac 1``
averages over all steps, the area under the training curve: it measures speed when every
method ends near the same level. The table's and the figure's titles name the window.

    PYTHONPATH=. .venv/bin/python benchmarks/ceiling.py RUN \\
        --methods grpo,sharpo:0.2,oracle,... [--reference grpo] [--oracle oracle] \\
        [--seeds 0,1,2,3,4] [--train-frac 0.5] [--figure ceiling.png]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inputs import (InputError, Parser, check_output, finite_number, input_dir, loads,  # noqa: E402
                     read_json, read_text)

from sharpo_train.recipes.recipe_config import parse_methods
from sharpo_train.analysis.report.compare import per_task_mean
from sharpo_train.analysis.report.compare_training import late_success


def _boot(diff_m: np.ndarray, diff_o: np.ndarray, n_boot: int = 10000, seed: int = 0):
    """(mean gain, lo, hi, ratio to the oracle's gain, lo, hi); the rows of the two
    difference vectors are the same units (seeds or tasks), resampled together."""
    n = len(diff_m)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    gm, go = diff_m[idx].mean(1), diff_o[idx].mean(1)
    lo, hi = np.percentile(gm, [2.5, 97.5])
    with np.errstate(divide="ignore", invalid="ignore"):
        r = gm / go
    r = r[np.isfinite(r)]
    rlo, rhi = np.percentile(r, [2.5, 97.5]) if len(r) else (np.nan, np.nan)
    ratio = diff_m.mean() / diff_o.mean() if diff_o.mean() else np.nan
    return diff_m.mean(), lo, hi, ratio, rlo, rhi


def check_train_frac(value) -> float:
    """``--train-frac`` as a float in (0, 1]; a one-line ValueError naming it otherwise."""
    try:
        frac = float(value)
    except (TypeError, ValueError):
        frac = math.nan
    if not 0 < frac <= 1:
        raise ValueError(f"--train-frac: must be a number in (0, 1], got {value!r}")
    return frac


def window_titles(frac: float, ref: str = "GRPO") -> tuple[str, str, str, str]:
    """(success column, gain column, share column, figure panel) titles of the training
    window ``frac``: "late" for the last half, "all steps" for 1, "last F% of steps" else;
    ``ref``: the reference method's label."""
    if frac == 0.5:
        return ("late training (%)", f"vs {ref}, late (by seed)",
                "share of the oracle's late gain", f"late training success vs {ref}")
    what, short = (("all steps", "all-steps") if frac == 1 else
                   (f"last {100 * frac:g}% of steps", f"last-{100 * frac:g}%"))
    return (f"training, {what} (%)", f"vs {ref}, {what} (by seed)",
            f"share of the oracle's {short} training gain",
            f"training success, {what}, vs {ref}")


def _rate(x, where: str) -> float:
    """A success rate: a finite number in [0, 1] (JSON null, how sharpo writes a non-finite
    value, Infinity, a string are refused)."""
    x = finite_number(x, where)
    if not 0.0 <= x <= 1.0:
        raise InputError(f"{where}: expected a success rate in [0, 1], got {x:g}")
    return x


class CompareFolder:
    """The parts of a finished `sharpo compare` folder this script reads, each checked when
    read (an InputError naming the file): RUN/pipeline.json (an object whose "phases" maps
    names to {"done", "seconds", "result"}), the results' success rates and per-task rates,
    and RUN/runs/<slug>-seed<k>/metrics.jsonl (regular files of JSON objects whose training
    "success" values are rates)."""

    def __init__(self, out):
        self.out = input_dir(out, "a `sharpo compare` folder (RUN)")
        self.pipeline = self.out / "pipeline.json"
        if not self.pipeline.exists() and not self.pipeline.is_symlink():
            raise InputError(f"{self.out}: not a `sharpo compare` folder (no pipeline.json)")
        state = read_json(self.pipeline, "the pipeline.json of a `sharpo compare` folder")
        if not isinstance(state, dict) or not isinstance(state.get("phases"), dict):
            raise InputError(f"{self.pipeline}: expected a JSON object with \"phases\" (an "
                             f"object); not the pipeline.json of a `sharpo compare` folder")
        self.phases = state["phases"]

    def result(self, name: str) -> dict | None:
        """The recorded result of phase ``name`` (None: not run), its rates checked."""
        entry = self.phases.get(name)
        if entry is None:
            return None
        where = f"{self.pipeline}: phases[{name!r}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object, got {type(entry).__name__}")
        res = entry.get("result")
        if res is None or not entry.get("done"):
            return None
        if not isinstance(res, dict):
            raise InputError(f"{where}.result: expected an object, got {type(res).__name__}")
        _rate(res.get("success"), f"{where}.result.success")
        per_task = res.get("per_task")
        if per_task is not None:
            if not isinstance(per_task, dict):
                raise InputError(f"{where}.result.per_task: expected an object, got "
                                 f"{type(per_task).__name__}")
            for task, v in per_task.items():
                _rate(v, f"{where}.result.per_task[{task!r}]")
        return res

    def late(self, slug: str, seed: int, frac: float) -> float:
        """Late training success of runs/<slug>-seed<seed> (compare_training.late_success),
        after checking its metrics.jsonl."""
        run = self.out / "runs" / f"{slug}-seed{seed}"
        path = run / "metrics.jsonl"
        what = f"the training metrics of phase rl/{slug}/seed{seed}"
        if not (self.out / "runs").is_dir():
            raise InputError(f"{self.out / 'runs'}: no such folder; expected {what}")
        lines = read_text(path, what).splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        found = False
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = loads(line, f"{path}:{n}")
            except InputError:
                if n == len(lines):          # a torn last line: a run killed while writing
                    break
                raise
            if not isinstance(row, dict):
                raise InputError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
            is_eval = row.get("kind") == "eval" or (row.get("kind") is None and "eval/success" in row)
            if not is_eval and "success" in row:
                _rate(row["success"], f"{path}:{n}: success")
                if isinstance(row.get("step"), bool) or not isinstance(row.get("step"), int):
                    raise InputError(f"{path}:{n}: step: expected an integer, got "
                                     f"{row.get('step')!r}"[:200])
                found = True
        if not found:
            raise InputError(f"{path}: no training step records a success; expected {what}")
        return late_success(run, frac)


def measure(out: Path, methods: str, seeds: list[int], reference: str, oracle: str,
            train_frac: float = 0.5) -> dict:
    train_frac = check_train_frac(train_frac)
    if not seeds:
        raise ValueError("--seeds: expected at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds: a seed is given twice: {seeds}")
    runs = parse_methods(methods)
    items = [item.strip() for item in methods.split(",")]     # parse_methods refuses repeats
    slug_of = {item: slug for item, (_l, slug, _o) in zip(items, runs)}
    label_of = {item: label for item, (label, _s, _o) in zip(items, runs)}
    for need in (reference, oracle):
        if need not in slug_of:
            raise ValueError(f"--methods: must include {need!r}")
    if reference == oracle:
        raise ValueError(f"--oracle: must differ from --reference ({reference!r})")
    log = CompareFolder(out)
    warm = (log.result("eval/warm-start") or {}).get("success")
    data = {}
    for item, slug in slug_of.items():
        held = {k: log.result(f"rl/{slug}/seed{k}") for k in seeds}
        held = {k: r for k, r in held.items() if r}
        if not held:
            raise InputError(f"{log.pipeline}: no finished RL run of {item!r} for seeds "
                             f"{','.join(map(str, seeds))} (phases rl/{slug}/seed<k>); "
                             f"nothing to compare")
        late = {k: log.late(slug, k, train_frac) for k in held}
        data[item] = {"label": label_of[item], "held": held,
                      "late": {k: v for k, v in late.items() if v is not None}}
    ref, orc = data[reference], data[oracle]
    res = {"warm": warm, "train_frac": train_frac, "reference_label": label_of[reference],
           "rows": {}}
    for item, d in data.items():
        ks = sorted(set(d["late"]) & set(ref["late"]) & set(orc["late"]))   # the share's seeds
        row = {"label": d["label"], "seeds": len(d["held"]),
               "held_mean": np.mean([r["success"] for r in d["held"].values()]) if d["held"] else np.nan,
               "late_mean": np.mean(list(d["late"].values())) if d["late"] else np.nan,
               "collapses": sum(r["success"] < warm for r in d["held"].values())
               if warm is not None else None}
        if item == reference:
            res["rows"][item] = row
            continue
        # the gain over the reference: every seed both ran; the share of the oracle's
        # gain: the seeds all three ran (the ratio of the mean gains on them)
        kr = sorted(set(d["late"]) & set(ref["late"]))
        if kr:
            g = _boot(np.array([d["late"][k] - ref["late"][k] for k in kr]),
                      np.array([d["late"][k] - ref["late"][k] for k in kr]))
            share = (_boot(np.array([d["late"][k] - ref["late"][k] for k in ks]),
                           np.array([orc["late"][k] - ref["late"][k] for k in ks]))
                     if ks else (np.nan,) * 6)
            row["late"] = g[:3] + share[3:]
        for key, seeds_of in (("held", set(d["held"]) & set(ref["held"])),
                              ("held_share", set(d["held"]) & set(ref["held"]) & set(orc["held"]))):
            common = sorted(seeds_of)
            if not common:
                continue
            pm = per_task_mean([d["held"][k] for k in common])
            pr = per_task_mean([ref["held"][k] for k in common])
            po = per_task_mean([orc["held"][k] for k in common]) if key == "held_share" else pm
            ids = sorted(set(pm) & set(pr) & set(po))
            if not ids:      # no per_task recorded, or no task in common: nothing to pair
                who = f"{item!r}, {reference!r}" + (f" and {oracle!r}" if key == "held_share" else "")
                raise InputError(f"{log.pipeline}: the held-out results of {who} (seeds "
                                 f"{','.join(map(str, common))}) share no task in their "
                                 f"\"per_task\" rates; nothing to pair")
            dm = np.array([pm[i] - pr[i] for i in ids])
            do = np.array([po[i] - pr[i] for i in ids])
            row[key] = _boot(dm, do)
            if key == "held":
                row["held_updown"] = (int((dm > 0).sum()), int((dm < 0).sum()))
        if "held" in row:
            sh = row.get("held_share", (np.nan,) * 6)
            row["held"] = row["held"][:3] + sh[3:]
        res["rows"][item] = row
    return res


def _pct(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:+.1f}"


def _frac(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.0f}%"


def table(res: dict) -> str:
    ref = res.get("reference_label", "GRPO")
    train, gain, share, _ = window_titles(res.get("train_frac", 0.5), ref)
    lines = ["| Method | seeds | held-out (%) | " f"vs {ref}, held-out (by task) | share of the "
             f"oracle's held-out gain | {train} | {gain} | {share} | collapses |",
             "|---|---:|---:|---|---|---:|---|---|---:|"]
    for item, r in res["rows"].items():
        h, l = r.get("held"), r.get("late")
        hs = (f"{_pct(h[0])} ({_pct(h[1])} to {_pct(h[2])}; {r['held_updown'][0]} up / "
              f"{r['held_updown'][1]} down)" if h else "")
        hf = f"{_frac(h[3])} ({_frac(h[4])} to {_frac(h[5])})" if h else ""
        ls = f"{_pct(l[0])} ({_pct(l[1])} to {_pct(l[2])})" if l else ""
        lf = f"{_frac(l[3])} ({_frac(l[4])} to {_frac(l[5])})" if l else ""
        lines.append(f"| {r['label']} | {r['seeds']} | {100 * r['held_mean']:.1f} | {hs} | {hf} "
                     f"| {100 * r['late_mean']:.1f} | {ls} | {lf} | {'n/a' if r['collapses'] is None else r['collapses']}/{r['seeds']} |")
    return "\n".join(lines)


FIGURE_SOFTWARE = "sharpo benchmarks/ceiling.py"     # the PNG's Software tag: ours


def made_by_ceiling(path: Path) -> bool:
    """``path`` is a PNG this script wrote (its Software tag, in the first 64 KiB)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    return head.startswith(b"\x89PNG\r\n\x1a\n") and \
        b"Software\x00" + FIGURE_SOFTWARE.encode() in head


def check_figure(path) -> Path:
    """``--figure``: a .png output file that is not a system path, a link or a folder, in
    an existing folder; an existing file only when this script made it."""
    if not str(path).lower().endswith(".png"):
        raise InputError(f"--figure: expected a .png file name, got {str(path)!r}")
    return check_output(path, "--figure", made_by_ceiling)


def figure(res: dict, path: Path, oracle: str):
    """Both panels (held-out by task, training by seed) saved to ``path`` (a temporary file
    beside it, then renamed: never half a file); returns the figure."""
    import os
    import tempfile

    from sharpo_train.analysis.report.mpl import pyplot
    plt = pyplot()                      # MPLCONFIGDIR: not the user's home
    rows = [(k, r) for k, r in res["rows"].items() if "held" in r]
    fig, axes = plt.subplots(1, 2, figsize=(15, 0.45 * len(rows) + 1.5), sharey=True)
    y = np.arange(len(rows))
    ref = res.get("reference_label", "GRPO")
    for ax, key, title in ((axes[0], "held", f"held-out success vs {ref}\n(points, by task)"),
                           (axes[1], "late", window_titles(res.get("train_frac", 0.5), ref)[3]
                            + "\n(points, by seed)")):
        m = np.array([100 * r[key][0] if key in r else np.nan for _, r in rows])
        lo = np.array([100 * r[key][1] if key in r else np.nan for _, r in rows])
        hi = np.array([100 * r[key][2] if key in r else np.nan for _, r in rows])
        colors = ["#b42318" if k == oracle or k.startswith("oracle") else
                  ("#1f6feb" if "teacher.oracle" in k else "#555") for k, _ in rows]
        ax.barh(y, m, color=colors, alpha=0.8)
        ax.errorbar(m, y, xerr=[m - lo, hi - m], fmt="none", ecolor="k", capsize=3)
        o = res["rows"][oracle].get(key)
        if o:
            ax.axvline(100 * o[0], color="#b42318", ls="--", lw=1)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_title(title, fontsize=10)
    axes[0].set_yticks(y, [r["label"] for _, r in rows], fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle(f"The credit ceiling on the corridor: gain over {ref}, 95% bootstrap "
                 "(red dashed: perfect credit)", fontsize=11)
    fig.tight_layout()
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=110, metadata={"Software": FIGURE_SOFTWARE})
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return fig


def main(argv=None) -> int:
    p = Parser(prog="ceiling.py", description=__doc__,
               formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("run")
    p.add_argument("--methods", required=True)
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--reference", default="grpo")
    p.add_argument("--oracle", default="oracle")
    p.add_argument("--train-frac", default="0.5",
                   help="training window: the last F of each run's steps, F in (0, 1]; "
                        "1 = all steps")
    p.add_argument("--figure", default=None)
    a = p.parse_args(argv)
    try:
        try:
            seeds = [int(s) for s in a.seeds.split(",")]
        except ValueError:
            raise ValueError(f"--seeds: expected comma-separated integers, got {a.seeds!r}")
        if a.figure is not None:
            check_figure(a.figure)             # before any work
        res = measure(Path(a.run), a.methods, seeds, a.reference, a.oracle,
                      check_train_frac(a.train_frac))
    except (ValueError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    warm = res["warm"]
    print("warm start held-out success: "
          + (f"{100 * warm:.1f}%" if warm is not None else "not recorded") + "\n")
    print(table(res))
    if a.figure:
        figure(res, Path(a.figure), a.oracle)
        print(f"\nfigure: {a.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
