"""The estimator registry and the ``estimator.*`` settings built from it.

    register_estimator(name, params=P)   a function ``fn(batch, params: P) -> CreditOutput``
                                         becomes method ``name`` (``config.method``)
    ESTIMATORS                           name -> Estimator (fn, params class, flags)
    GroupParams                          the parameters every estimator has (GRPO's group
                                         normalisation, docs/method.md §1); params classes
                                         extend it
    EstimatorConfig                      the ``estimator.*`` section of the trainer's
                                         config: one flat dataclass with every registered
                                         params class's fields (built from the registry);
                                         ``.params(method)`` gives that method's own params

Each estimator owns its parameters: a dataclass with defaults and a ``validate()`` that
raises ConfigError naming the field (``need``/``in_range`` of settings/loader.py). The keys are flat
(``estimator.lam``, ``estimator.gigpo_gamma``): two params classes may share a field only
with the same type and default (the inherited GroupParams fields, or one class registered
for two methods). A config may set the keys of methods other than its own (one config
serves `sharpo compare`); those are validated and unused. A key no registered estimator has
is refused, naming it.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import torch

from ..settings.loader import ConfigError, in_range, setting

__all__ = ["CreditOutput", "AuxLoss", "Estimator", "ESTIMATORS", "GroupParams",
           "register_estimator", "estimator_config_class", "EstimatorSettings"]


@dataclass
class CreditOutput:
    advantages: torch.Tensor               # [B, L] fp32, 0 where response_mask == 0
    base: torch.Tensor                     # [B] fp32: A_i of each row's trajectory
    segments: Optional[object] = None      # sharpo_kernels.SegmentAdvantage (gap/weight/...)
    stats: dict = field(default_factory=dict)   # metric name -> number (metrics line)
    aux_loss: Optional["AuxLoss"] = None   # an extra loss term for the update (SDAR)


@dataclass
class AuxLoss:
    """A per-token loss term the update adds to the policy loss: ``coef *
    aggregate(AUX_LOSSES[name](logp, **inputs[rows], **params), weights)`` with the
    policy loss's aggregation (step/losses.py; logp [b, L] of the current policy, with grad)."""
    name: str                              # a key of losses.AUX_LOSSES
    coef: float
    inputs: dict                           # name -> [B, L] tensor, sliced per micro-batch
    params: dict = field(default_factory=dict)   # name -> number


@dataclass
class GroupParams:
    """GRPO's group normalisation (docs/method.md §1), shared by every estimator."""
    norm_std: bool = setting(True, "divide A_i by the group's reward std (false: Dr. GRPO, "
                             "centred only)")
    eps: float = setting(1e-6, "added to the group std")

    def validate(self) -> None:
        in_range(self, "eps", 1e-12, 1)     # smaller is 0 in float32: 0/0 for a tied group


@dataclass(frozen=True)
class Estimator:
    fn: Callable[..., CreditOutput]        # fn(batch: StepBatch, params) -> CreditOutput
    params: type = GroupParams             # its parameters dataclass
    teacher: Union[bool, Callable[..., bool]] = False   # scores a teacher (or a rule of its
                                           # params deciding it): ``needs_teacher``
    needs_entropy: bool = False            # the scoring pass fills batch.old_entropy
    knob: Optional[str] = None             # params field set by `name:<value>` in
                                           # `sharpo compare --methods`
    group_relative: bool = True            # starts from group-relative A_i (config check)
    needs_labels: bool = False             # reads the env's exact credit labels (oracle.py)
    label: str = ""                        # display name in reports ("SHARPO", "GiGPO")
    knob_label: Optional[str] = None       # the knob's symbol in labels ("λ"): such a
                                           # method is always shown at a knob value (a bare
                                           # name runs the default) and its run folders
                                           # name the knob ("sharpo-lam0.2")
    base_advantage: bool = False           # one advantage per row: SHARPO can start from it
                                           # (estimator.base, docs/estimators.md)
    row_base: Optional[Callable[..., torch.Tensor]] = None   # row_base(batch, params) -> [B]:
                                           # ``base_advantages``; None: the trajectory's A_i

    def needs_teacher(self, params) -> bool:
        """Whether a teacher pass runs for this method at ``params`` (its params dataclass,
        or any object with the fields its rule reads, e.g. TRL's SharpoConfig): the one
        answer the trainer, TRL, verl and verl-agent ask (SHARPO: lam != 0, docs/method.md
        §4). The trainer then assigns teachers and fills ``teacher_logp`` / ``has_teacher``."""
        return bool(self.teacher(params)) if callable(self.teacher) else bool(self.teacher)

    def base_advantages(self, batch, params) -> torch.Tensor:
        """[B] fp32 each row's base advantage: what a teacher is skipped at when it is 0
        (``teacher.skip_zero_advantage``, step/teacher.py). ``row_base`` when the method
        registered one (SHARPO over GiGPO: the row's own step term), else the row's
        trajectory's GRPO A_i (docs/method.md §1)."""
        if self.row_base is not None:
            return self.row_base(batch, params)
        return batch.episode_advantages(params)[batch.traj_index]

    def run_label(self, value: Optional[float]) -> str:
        """How reports name this method run at knob ``value`` (None: the config's value),
        an open parenthesis left for further settings: "GRPO", "SHARPO (λ=0.2",
        "GiGPO (gigpo_step_weight=0.5"."""
        if value is None:
            return self.label
        return f"{self.label} ({self.knob_label or self.knob}={value:g}"

    def default_knob(self) -> Optional[float]:
        """The knob value a bare method name runs at in `sharpo compare`: the params
        default when the method is always shown at one (``knob_label``), else None."""
        return getattr(self.params(), self.knob) if self.knob_label else None


ESTIMATORS: dict[str, Estimator] = {}


def _fields(cls) -> dict[str, tuple]:
    """name -> (type, dataclasses.Field) of a params class's init fields."""
    hints = typing.get_type_hints(cls)
    return {f.name: (hints[f.name], f) for f in dataclasses.fields(cls) if f.init}


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def register_estimator(name: str, needs_teacher: Union[bool, Callable[..., bool]] = False, *,
                       params: type = GroupParams, needs_entropy: bool = False,
                       knob: Optional[str] = None, group_relative: bool = True,
                       needs_labels: bool = False, label: Optional[str] = None,
                       knob_label: Optional[str] = None, base_advantage: bool = False,
                       row_base: Optional[Callable[..., torch.Tensor]] = None):
    """Decorator: ``fn(batch: StepBatch, params) -> CreditOutput`` becomes method ``name``.

    ``params``: its parameters dataclass (every field with a default; ``validate()``
    optional), normally a subclass of ``GroupParams``; its fields become ``estimator.<field>``
    keys. ``needs_teacher``: True, or a rule ``needs_teacher(params) -> bool``: the trainer
    (and the engine integrations) assign teachers and fill ``teacher_logp`` / ``has_teacher``
    before calling it when it holds (``Estimator.needs_teacher``); ``row_base(batch,
    params) -> [B]``: each row's base advantage when it is not the trajectory's A_i
    (``Estimator.base_advantages``); ``needs_entropy``: it fills ``old_entropy``;
    ``knob``: the params field `sharpo compare --methods name:<value>` sets;
    ``group_relative``: it starts from group-relative A_i (a group of one is refused);
    ``needs_labels``: the trainer puts the environment's exact credit labels on the batch
    (``batch.credit_labels``; estimators/oracle.py);
    ``label``: its display name (default ``name.upper()``), ``knob_label``: the knob's
    symbol in labels (``Estimator.run_label``). A name already registered is refused
    (ValueError naming it): pop it from ``ESTIMATORS`` first to replace a method.
    ``base_advantage``: it gives every generated token of a row the same advantage, so
    SHARPO's segment weight can start from it (``estimator.base=name``)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name: expected a method name, got {name!r}")
    if name in ESTIMATORS:
        raise ValueError(f"name: method {name!r} is already registered "
                         f"({ESTIMATORS[name].fn.__module__}.{ESTIMATORS[name].fn.__qualname__})")
    if not (isinstance(needs_teacher, bool) or callable(needs_teacher)):
        raise TypeError(f"needs_teacher: expected a bool or a function of the params, got "
                        f"{needs_teacher!r}")
    if row_base is not None and not callable(row_base):
        raise TypeError(f"row_base: expected a function (batch, params) -> [B], got {row_base!r}")
    if knob_label is not None and knob is None:
        raise ValueError(f"knob_label: method {name!r} has no knob to label")
    if not (isinstance(params, type) and dataclasses.is_dataclass(params)):
        raise TypeError(f"params: expected a dataclass type, got {params!r}")
    own = _fields(params)
    missing = [k for k, (_, f) in own.items() if f.default is dataclasses.MISSING and
               f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError(f"params: every field needs a default; {params.__name__}.{missing[0]} "
                         f"has none")
    if knob is not None and knob not in own:
        raise ValueError(f"knob: expected a field of {params.__name__} {sorted(own)}, "
                         f"got {knob!r}")
    for other, est in ESTIMATORS.items():
        if est.params is params:
            continue
        theirs = _fields(est.params)
        for key in own.keys() & theirs.keys():
            (t1, f1), (t2, f2) = own[key], theirs[key]
            if t1 != t2 or _default(f1) != _default(f2):
                raise ValueError(f"params: {params.__name__}.{key} clashes with "
                                 f"{est.params.__name__}.{key} of method {other!r} (a shared "
                                 f"estimator.{key} key needs the same type and default)")

    def wrap(fn):
        ESTIMATORS[name] = Estimator(fn, params, needs_teacher, needs_entropy, knob,
                                     group_relative, needs_labels, label or name.upper(),
                                     knob_label, base_advantage=base_advantage,
                                     row_base=row_base)
        return fn
    return wrap


class EstimatorSettings:
    """Base of ``EstimatorConfig`` (the generated dataclass of every ``estimator.*`` key)."""

    def params(self, method: str):
        """The params of ``method`` (its own dataclass) with this config's values."""
        if method not in ESTIMATORS:
            raise ValueError(f"method: expected one of {sorted(ESTIMATORS)}, got {method!r}")
        params = self._build(ESTIMATORS[method].params)
        base = getattr(params, "base", None)       # SHARPO over another estimator's advantage
        if isinstance(base, str) and base != method and base in ESTIMATORS:
            params.base_params = self.params(base)
        return params

    def settings_owner(self, name: str):
        """The params (this config's values) of the first registered estimator that has
        the key ``name``: whose ``validate()`` checks it (settings/describe.py)."""
        for est in ESTIMATORS.values():
            if name in _fields(est.params):
                return self._build(est.params)
        return self

    def _build(self, cls):
        return cls(**{k: getattr(self, k) for k in _fields(cls)})

    def validate(self) -> None:
        """Every registered params class with this config's values; ConfigError naming the
        key (validate_settings adds the ``estimator.`` prefix)."""
        seen = []
        for est in ESTIMATORS.values():
            if est.params in seen:
                continue
            seen.append(est.params)
            check = getattr(self._build(est.params), "validate", None)
            if callable(check):
                try:
                    check()
                except ConfigError:
                    raise
                except ValueError as exc:       # e.g. the kernel's coefficient check
                    raise ConfigError(str(exc)) from None


_CLASSES: dict[tuple, type] = {}


def estimator_config_class() -> type:
    """The ``EstimatorConfig`` dataclass of the registry as it is now: one field per
    distinct ``estimator.*`` key, in registration order, with the owning params class's
    type, default and comment. Rebuilt only when the registry changed."""
    key = tuple((name, est.params) for name, est in ESTIMATORS.items())
    cls = _CLASSES.get(key)
    if cls is None:
        spec: dict[str, tuple] = {}
        for est in ESTIMATORS.values():
            for k, (tp, f) in _fields(est.params).items():
                if k not in spec:
                    kw = ({"default_factory": f.default_factory}
                          if f.default_factory is not dataclasses.MISSING
                          else {"default": f.default})
                    spec[k] = (k, tp, field(metadata=f.metadata, **kw))
        cls = dataclasses.make_dataclass("EstimatorConfig", list(spec.values()),
                                         bases=(EstimatorSettings,))
        cls.__module__ = __name__
        cls.__doc__ = ("The estimator.* settings: every registered estimator's params "
                       "(estimators/registry.py).")
        _CLASSES[key] = cls
    return cls


def estimator_config(**values) -> EstimatorSettings:
    """An ``EstimatorConfig`` of the current registry (the trainer config's default)."""
    return estimator_config_class()(**values)
