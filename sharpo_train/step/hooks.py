"""Step hooks: what runs after a training step's metrics line is made, registered by the
rooms that own it (analysis/step_hooks.py: credit quality, saved batches) so that the
trainer (loops/trainer.py) calls them without importing those rooms.

    register_step_hook(name)(factory)   factory(cfg, spec, run_dir) -> a hook, or None when
                                        the run's settings turn it off
    STEP_HOOKS                          name -> factory, in registration order (the order
                                        the hooks run in)

A hook is called ``hook(step, batch, credit, rec, seed)`` after the step's update: ``batch``
the step's ``StepBatch``, ``credit`` its ``CreditOutput``, ``rec`` the metrics line (a dict
it may add keys to), ``seed`` the step's seed; ``hook.close()`` runs once when the run
ends.
"""
from __future__ import annotations

from typing import Callable

__all__ = ["STEP_HOOKS", "register_step_hook"]

STEP_HOOKS: dict[str, Callable] = {}


def register_step_hook(name: str):
    """Decorator: ``factory(cfg, spec, run_dir) -> hook or None`` runs for every training
    run as step hook ``name``. A name already registered is refused (ValueError naming
    it)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name: expected a hook name, got {name!r}")
    if name in STEP_HOOKS:
        raise ValueError(f"name: step hook {name!r} is already registered")

    def wrap(factory: Callable) -> Callable:
        if not callable(factory):
            raise TypeError(f"factory: expected a function (cfg, spec, run_dir), got {factory!r}")
        STEP_HOOKS[name] = factory
        return factory
    return wrap
