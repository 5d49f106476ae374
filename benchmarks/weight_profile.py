"""Where SHARPO's segment weight departs from 1: decisive action segments vs the rest
(docs/credit_quality.md, "Where the weight goes"; benchmarks/RESULTS.md, Corridor).

Loads the saved batches of one or more runs (``log.save_batches=1``: teacher and student
log-probs of every rollout), recomputes ``sharpo`` on exactly those rollouts with each
``--settings`` entry (lam,alpha,tau) and prints, per segment class (decisive action = an
action of a labelled turn, other action, and the reasoning of either), the mean and median
|gap|, the mean |w - 1| and the fraction of segments whose weight is clipped at ±alpha. The
gaps are the same under every setting (they depend on the rollouts only); the weights are
not.

    PYTHONPATH=. .venv/bin/python benchmarks/weight_profile.py RUN [RUN ...] \
        --settings 0.2,0.5,1 1,0.9,0.1 1,0.9,1
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from sharpo_train.loops.train_config import Config

from sharpo_train.settings.loader import load_settings
from sharpo_train.analysis.rescoring import (PROFILE_CLASSES, load_batch, saved_batches,
                                             weight_profile)
from sharpo_train.envs.registry import get_spec
from sharpo_train.estimators import ESTIMATORS


def parse_setting(text: str) -> tuple[float, float, float]:
    parts = text.split(",")
    if len(parts) != 3:
        raise ValueError(f"--settings: expected lam,alpha,tau, got {text!r}")
    try:
        return tuple(float(p) for p in parts)
    except ValueError:
        raise ValueError(f"--settings: expected three numbers lam,alpha,tau, got {text!r}") from None


def profile_runs(run_dirs, settings) -> dict:
    """{(lam, alpha, tau): weight_profile result} over every saved batch of ``run_dirs``
    (estimator.* otherwise from the first run's config.yaml)."""
    loaded = []
    cfg = None
    for run in run_dirs:
        paths = saved_batches(run)
        if not paths:
            raise FileNotFoundError(f"{run}: no saved batches (train with log.save_batches=1)")
        cfg = cfg or load_settings(Config, f"{run}/config.yaml")
        labeller = None
        for p in paths:
            batch, info = load_batch(p)
            labels = info.get("labels")
            if labels is None:
                labeller = labeller or get_spec(cfg.env.get("name")).load("plan_labels")()
                labels = labeller.label_episodes(batch.episodes)
            loaded.append((batch, labels))
    out = {}
    for lam, alpha, tau in settings:
        params = dataclasses.replace(cfg.estimator.params("sharpo"), lam=lam, alpha=alpha, tau=tau)
        params.validate()
        parts = [(b, ESTIMATORS["sharpo"].fn(b, params), lab) for b, lab in loaded]
        out[(lam, alpha, tau)] = weight_profile(parts, alpha=alpha)
    return out


def table(results: dict) -> str:
    lines = ["| λ, α, τ | segment class | segments | mean gap | mean \\|gap\\| | median \\|gap\\| | "
             "mean \\|w−1\\| | saturated (\\|w−1\\| = α) |", "|---|---|---|---|---|---|---|---|"]
    for (lam, alpha, tau), res in results.items():
        for c in PROFILE_CLASSES:
            r = res[c]
            lines.append(f"| {lam:g}, {alpha:g}, {tau:g} | {c} | {r['segments']} | "
                         f"{r['gap_mean']:+.3f} | {r['gap_abs_mean']:.3f} | {r['gap_abs_median']:.3f} | "
                         f"{r['w_dev_mean']:.3f} | {r['saturated_frac']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="run directories with saved batches")
    ap.add_argument("--settings", nargs="+", default=["0.2,0.5,1", "1,0.9,0.1", "1,0.9,1"],
                    help="lam,alpha,tau per SHARPO setting (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        settings = [parse_setting(s) for s in args.settings]
        print(table(profile_runs(args.runs, settings)))
    except (ValueError, FileNotFoundError) as exc:
        print(f"weight_profile: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
