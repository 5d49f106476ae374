"""Credit estimators: pure functions from a ``StepBatch`` to per-token advantages [B, L],
registered by name (``config.method``) with their own parameters dataclass (registry.py).

The trainer calls ``ESTIMATORS[name].fn(batch, cfg.estimator.params(name))`` and asks
``needs_teacher`` whether to build and score teachers (``needs_entropy``: whether scoring
also returns token entropies; ``needs_labels``: the environment's exact labels). A new
method is one decorated function and its params dataclass, in its own file
(``register_estimator(name, params=...)``): the training loop and the config are untouched
(docs/estimators.md, adding an estimator).

One file per method: ``grpo.py`` (GRPO, and the A_i every method starts from),
``sharpo.py`` (SHARPO, ``sharpo_rho``), ``gigpo.py`` (GiGPO), ``self_distill.py`` (RLSD,
SERL, OPSD, SDAR), ``empg.py`` (EMPG), ``oracle.py`` (the exact-label ceiling),
``gated.py`` (gated credit from SHARPO's teacher, and its controls); what an estimator
reads from the batch: ``inputs.py``. This package file only registers them, in
this order (the order of the ``estimator.*`` keys), and builds the ``estimator.*`` settings.
"""
from .registry import (ESTIMATORS, AuxLoss, CreditOutput, Estimator, EstimatorSettings,
                       GroupParams, estimator_config, estimator_config_class,
                       register_estimator)
from . import grpo, sharpo, empg, gigpo, oracle, self_distill, gated  # noqa: F401  (they register)

__all__ = ["ESTIMATORS", "Estimator", "register_estimator", "GroupParams", "EstimatorConfig",
           "EstimatorSettings", "estimator_config", "CreditOutput", "AuxLoss"]

# the estimator.* settings of the built-in methods (Config.estimator's class is rebuilt
# from the registry when more are registered: registry.estimator_config_class)
EstimatorConfig = estimator_config_class()
