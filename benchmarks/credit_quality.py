"""Hint placement and credit quality on the same rollouts (docs/credit_quality.md,
docs/training.md "Hint placement").

Loads a run config (e.g. the demo's RL config: a tiny Qwen2 SFT'd on generated ALFWorld
games) and, WITHOUT updating the policy, plays ``--steps`` steps of rollouts with the
warm-start policy (each step's tasks and sampling seeded like the trainer's step s). Each
step's rollouts are scored twice with theta = the warm start, once per hint placement,
with the same teacher assignment; per placement it records the tokens through the model
(``scoring/tokens_through_model``) and the credit AUC of every registered method, and
saves the scored batch (RUN/<placement>/batches/step_<S>.*) for ``sharpo explain
--credit-quality``-style offline scoring. Results: a JSON summary and a markdown table.

    PYTHONPATH=. .venv/bin/python benchmarks/credit_quality.py \
        --config /work/runs/demo-base/rl/config.yaml --out runs/credit-quality --steps 6
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

from sharpo_train.step.batch import StepBatch
from sharpo_train.loops.train_config import load_config, save_config
from sharpo_train.analysis.rescoring import results_table, save_batch, saved_batches, score_batches
from sharpo_train.envs.registry import get_spec
from sharpo_train.hint import HINT_PLACEMENTS
from sharpo_train.loops.trainer import Trainer, _step_seed


def sharpo_parts(run_dir) -> dict:
    """Within-rollout AUC of SHARPO's action-segment weight w, length factor rho and full
    coefficient on a run's saved batches (why its coefficient orders actions as it does;
    benchmarks/results/credit_quality.md). Action segments with a teacher and A_i != 0."""
    import numpy as np
    from sharpo_train.loops.train_config import Config
    from sharpo_train.settings.loader import load_settings
    from sharpo_train.analysis.credit_auc import credit_auc
    from sharpo_train.analysis.rescoring import load_batch
    from sharpo_train.estimators import ESTIMATORS
    cfg = load_settings(Config, Path(run_dir) / "config.yaml").estimator
    rows = []
    for k, path in enumerate(saved_batches(run_dir)):
        batch, info = load_batch(path)
        out = ESTIMATORS["sharpo"].fn(batch, cfg.params("sharpo"))
        for r, (e, t) in enumerate(zip(batch.episode, batch.turn)):
            a, lab = float(batch.episode_adv[e]), info["labels"][e][t]
            spans = batch.episodes[e].turns[t].spans
            act = [i for i, sp in enumerate(spans) if sp.kind == "action"]
            if a == 0 or lab is None or not act or not bool(batch.has_teacher[r]):
                continue
            i, sp = act[0], spans[act[0]]
            rows.append((float(out.segments.weight[r, i]), float(out.segments.length_factor[r, i]),
                         float(out.advantages[r, sp.start:sp.end].mean()) / a, lab, a > 0,
                         (k + 1) * 1_000_000 + e, (k + 1) * 1_000_000 + int(batch.group_of[e])))
    w, rho, coef, lab, succ, roll, grp = (np.array(v) for v in zip(*rows))
    return {name: credit_auc(v, lab, succ, roll, grp, n_boot=1000)
            for name, v in (("weight", w), ("length_factor", rho), ("coefficient", coef))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", metavar="RUN_DIR", default=None,
                    help="only print sharpo_parts(RUN_DIR) for a directory of saved batches")
    ap.add_argument("--config")
    ap.add_argument("--out")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    a = ap.parse_args(argv)
    if a.parts:
        for name, r in sharpo_parts(a.parts).items():
            print(f"{name}: AUC {r['auc']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}] ({r['pairs']} pairs)")
        return 0
    if not a.config or not a.out:
        ap.error("--config and --out are required (or --parts RUN_DIR)")
    out = Path(a.out)
    cfg = load_config(a.config, list(a.overrides) + [
        f"run_dir={out / 'trainer'}", "total_steps=0", "log.progress=false",
        "eval.at_end=false", "eval.every=0", "method=sharpo",
        "log.save_batches=1"])                  # scoring then keeps entropies (EMPG)
    trainer = Trainer(cfg)
    labeller = get_spec(cfg.env["name"]).load("plan_labels")()   # the env's action labeller
    per_step = []
    try:
        for s in range(1, a.steps + 1):
            seed = _step_seed(cfg.seed, s)
            torch.manual_seed(seed)
            rng = random.Random(seed)
            t0 = time.perf_counter()
            episodes = trainer.rollout(trainer.sample_tasks(rng))
            t1 = time.perf_counter()
            labels = labeller.label_episodes(episodes)
            row = {"step": s, "rollout_s": t1 - t0, "label_s": time.perf_counter() - t1,
                   "success": sum(e.success for e in episodes) / len(episodes)}
            for placement in HINT_PLACEMENTS:
                trainer.cfg.teacher.hint_placement = placement
                batch = StepBatch.from_episodes(episodes)
                batch.step = s
                t = time.perf_counter()
                counts = trainer.score(batch, random.Random(seed), s)   # same teachers for both
                row[f"{placement}/score_s"] = time.perf_counter() - t
                row[f"{placement}/tokens_through_model"] = counts.tokens_through_model
                row[f"{placement}/tokens_unshared"] = counts.tokens_unshared
                row[f"{placement}/teacher_rows"] = counts.teacher_rows
                save_batch(out / placement, s, batch, method="sharpo", labels=labels)
                save_config(trainer.cfg, out / placement / "config.yaml")   # a run dir for explain
            per_step.append(row)
            print(json.dumps(row), flush=True)
    finally:
        trainer.pool.close()
        labeller.close()
    summary = {"config": a.config, "steps": a.steps, "per_step": per_step,
               "planner": labeller.stats, "placements": {}}
    md = []
    for placement in HINT_PLACEMENTS:
        res = score_batches(saved_batches(out / placement), cfg.estimator, n_boot=a.n_boot)
        tok = [r[f"{placement}/tokens_through_model"] for r in per_step]
        summary["placements"][placement] = {"methods": res, "tokens_through_model_mean": sum(tok) / len(tok)}
        md += [f"### hint_placement={placement}: tokens through the model per step "
               f"{sum(tok) / len(tok):.0f} (mean of {len(tok)})", "", results_table(res), ""]
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    (out / "summary.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
