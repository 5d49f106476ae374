"""The analysis room's step hooks (step/hooks.py), run by the trainer after every step:

- ``credit_quality`` (``log.credit_quality``): the environment's labels of the step's
  actions (EnvSpec.plan_labels) and the method's credit AUC into the metrics line
  (credit_auc.py, docs/credit_quality.md); the labels go to ``batch.plan_labels``;
- ``save_batches`` (``log.save_batches``): every ``log.save_batches`` steps, the scored
  batch and its labels into RUN/batches/ for offline rescoring (rescoring.py).

Registered in this order: a saved batch carries the labels of the same step. loops/ loads
this module (loops/__init__.py) so that every way of running the trainer has them.
"""
from __future__ import annotations

import time

from ..step.hooks import register_step_hook
from .credit_auc import LABELLER_COUNTS, step_credit_quality
from .rescoring import save_batch


class CreditQuality:
    """The per-step credit-quality metrics; the labeller is made on first use and closed
    with the run."""

    def __init__(self, spec):
        self.spec, self.labeller = spec, None

    def __call__(self, step: int, batch, credit, rec: dict, seed: int) -> None:
        t = time.perf_counter()
        if self.labeller is None:
            self.labeller = self.spec.load("plan_labels")()
        before = dict(self.labeller.stats)
        batch.plan_labels = self.labeller.label_episodes(batch.episodes)   # [N][turns]
        rec.update(step_credit_quality(batch, credit.advantages, batch.plan_labels, seed=seed))
        st = self.labeller.stats
        rec.update({f"credit_quality/{k}": st[k] - before[k] for k in LABELLER_COUNTS if k in st})
        rec["time/credit_quality"] = time.perf_counter() - t

    def close(self) -> None:
        if self.labeller is not None:
            self.labeller.close()


class SavedBatches:
    """RUN/batches/step_<S>.* every ``every`` steps (rescoring.save_batch)."""

    def __init__(self, run_dir, every: int, method: str):
        self.run_dir, self.every, self.method = run_dir, every, method

    def __call__(self, step: int, batch, credit, rec: dict, seed: int) -> None:
        if step % self.every == 0:
            save_batch(self.run_dir, step, batch, method=self.method, labels=batch.plan_labels)

    def close(self) -> None:
        pass


@register_step_hook("credit_quality")
def credit_quality(cfg, spec, run_dir):
    return CreditQuality(spec) if cfg.log.credit_quality else None


@register_step_hook("save_batches")
def saved_batches(cfg, spec, run_dir):
    return SavedBatches(run_dir, cfg.log.save_batches, cfg.method) if cfg.log.save_batches else None
