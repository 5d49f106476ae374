"""Settings of every command: typed nested dataclasses, one loader, one override parser,
one validation.

    load_settings(cls, path, overrides)    YAML file (a ``base:`` key names a parent YAML,
                                           relative to the file) -> ``key.sub=value``
                                           overrides -> validate_settings -> a ``cls``
    parse_overrides(["a.b=1e-3", ...])     -> {"a": {"b": OverrideText("1e-3")}}
    apply_overrides(obj, data)             typed merge into a (nested) dataclass instance
    validate_settings(obj)                 every float finite, every int within +-(2**31-1),
                                           then ``validate()`` of every nested dataclass

Override values are typed by the field they land in: floats accept ``1e-3``, ``.5``;
ints refuse ``2.5``; bools accept true/false (any case); ``null``/``none`` -> None where the
field may be null; a ``str`` field keeps the text as typed. Free-form mappings (``env``)
get the untyped reading (null, bool, int, float, ``[..]``/``{..}`` YAML, else text).
Every error is a :class:`ConfigError` whose message starts with the dotted key.

YAML is read by bounded_yaml.py (size, nesting depth and alias expansion bounded), for files
and for ``[..]``/``{..}`` override values alike.

``load_config(path_or_None, overrides)`` is the trainer's: ``None`` -> the embedded default
(``sharpo_train/configs/default.yaml``: a tiny model on CPU, a few minutes). ``env`` is
free-form: its keys are checked against the environment's settings schema (its EnvSpec) here,
before anything is built; setting ``env.name`` to another environment drops the previous
environment's keys. The settings of `sharpo sft` (``SFTConfig``) live in sft.py, those of
`sharpo demo` / `sharpo compare` (``DemoConfig``, ``CompareConfig``) in settings.py.
``estimator.*`` is not declared here: each registered estimator owns its parameters
dataclass (estimators/registry.py; SHARPO's defaults: ``sharpo_kernels.SHARPO_DEFAULTS``).

The paper's settings (Qwen2.5-7B-Instruct, ALFWorld; SHARPO lambda 0.2 and 0.05) are in
``configs/paper_alfworld_*.yaml``; the defaults below follow verl/verl-agent's GRPO recipe.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from .bounded_yaml import load_yaml_file, load_yaml_text
from .envs.registry import DEFAULT_ENV, ENVS, env_names, get_spec
from .errors import ConfigError, UsageError
from .logging_utils import parse_report_to

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent / "configs" / "default.yaml"
INT_LIMIT = 2 ** 31 - 1          # no setting is an integer beyond this (sizes are far below)

__all__ = ["ConfigError", "UsageError", "OverrideText", "parse_overrides", "parse_override",
           "split_override", "override_key",
           "apply_overrides", "validate_settings", "load_settings", "read_yaml_layers",
           "Config", "ModelConfig", "load_config", "config_from_dict", "save_config", "config_yaml"]


# ---------------------------------------------------------------------------- overrides

_INT_RE = re.compile(r"[+-]?\d+\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z|[+-]?\.?(?:inf|infinity|nan)\Z",
                       re.IGNORECASE)
_NULLS = ("null", "none", "~")
_BOOLS = {"true": True, "false": False}


def _to_float(text: str) -> float:
    """float() of a text _FLOAT_RE matched; YAML's .inf / .nan spelled as Python's."""
    s = text.strip()
    return float(s.replace(".", "", 1) if s.lstrip("+-").startswith(".") and
                 s.lstrip("+-.")[:1].isalpha() else s)


class OverrideText(str):
    """The text of one command-line override value; typed by the field it lands in.
    ``op`` is how it was given (Hydra's spellings): ``"="`` (``key=value``: set a key the
    schema knows), ``"+"`` (``+key=value``: add a key that is not in the config yet; an
    error if it is there) or ``"++"`` (``++key=value``: add or set)."""

    op = "="


def split_override(item: str) -> tuple[str, str, str]:
    """``"++a.b=1"`` -> ``("++", "a.b", "1")``: (op, dotted key, value text); ConfigError
    for an item without ``=``."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"{item}: expected key=value (e.g. rollout.group_size=8)")
    key, raw = item.split("=", 1)
    key = key.strip()
    op = "++" if key.startswith("++") else "+" if key.startswith("+") else "="
    return op, key[len(op):] if op != "=" else key, raw


def override_key(item: str) -> str:
    """The dotted key of an override item, without Hydra's ``+``/``++``: ``"+a.b=1"`` ->
    ``"a.b"`` (an item without ``=``: the item)."""
    return split_override(item)[1] if isinstance(item, str) and "=" in item else item


def parse_value(text: str, key: str = "value") -> Any:
    """The untyped reading of an override text: null/none/~ -> None, true/false -> bool,
    integers, floats (1e-3, .5), ``[..]``/``{..}`` as YAML, anything else the text."""
    s = text.strip()
    low = s.lower()
    if low in _NULLS:
        return None
    if low in _BOOLS:
        return _BOOLS[low]
    if _INT_RE.match(s):
        return int(s)
    if _FLOAT_RE.match(s):
        return _to_float(s)
    if s[:1] in ("[", "{"):     # bounded like a config file (bounded_yaml.py)
        return _untyped(load_yaml_text(s, key), key)
    return str(text)


def _untyped(value: Any, key: str) -> Any:
    if isinstance(value, OverrideText):
        return parse_value(value, key)
    if isinstance(value, dict):
        return {k: _untyped(v, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_untyped(v, f"{key}[{i}]") for i, v in enumerate(value)]
    return value


def parse_overrides(items) -> dict:
    """``["a.b=v", ...]`` -> ``{"a": {"b": OverrideText("v")}}`` (later items win).
    ``+a.b=v`` / ``++a.b=v`` give a leaf whose ``op`` is ``"+"`` / ``"++"``
    (:class:`OverrideText`; apply_overrides enforces it)."""
    out: dict = {}
    for item in items:
        op, key, raw = split_override(item)
        parts = key.split(".")
        if not all(p.strip() for p in parts):
            raise ConfigError(f"{key or item}: empty key in override {item!r}")
        node = out
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = OverrideText(raw)
        node[parts[-1]].op = op
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """One override, untyped: 'a.b=[1, 2]' -> (['a', 'b'], [1, 2])."""
    data = parse_overrides([text])
    path: list[str] = []
    while isinstance(data, dict):
        (k, data), = data.items()
        path.append(k)
    return path, parse_value(data, ".".join(path))


# ---------------------------------------------------------------------------- typed merge

@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, OverrideText) and value.strip().lower() in _NULLS)


def coerce(key: str, value: Any, tp: Any) -> Any:
    """``value`` (from YAML, an override, or Python) as type ``tp``, else ConfigError."""
    if typing.get_origin(tp) is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if _is_null(value):
            if len(args) < len(typing.get_args(tp)):
                return None
            raise ConfigError(f"{key}: may not be null")
        tp = args[0] if len(args) == 1 else Any
    if tp is Any:
        return _untyped(value, key)
    if _is_null(value):
        raise ConfigError(f"{key}: may not be null")
    origin = typing.get_origin(tp) or tp
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOLS:
            return _BOOLS[value.strip().lower()]
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and _INT_RE.match(value.strip()):
            return int(value.strip())
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if tp is float:
        try:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, str) and _FLOAT_RE.match(value.strip()):
                return _to_float(value)
        except OverflowError:
            raise ConfigError(f"{key}: {value!r} is out of range") from None
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, (str, Path)):
            return str(value)
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    if origin is dict:
        if isinstance(value, OverrideText):
            value = parse_value(value, key)
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return _untyped(copy.deepcopy(value), key)
    if origin is list:
        if isinstance(value, OverrideText):   # "[1, 2]" or "1,2"
            text = value.strip()
            value = (parse_value(text, key) if text.startswith("[")
                     else [OverrideText(v) for v in text.split(",") if v.strip()])
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (item,) = typing.get_args(tp) or (Any,)
        return [coerce(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
    return value


def apply_overrides(obj: Any, data: dict, prefix: str = "") -> Any:
    """Typed merge of a nested mapping into the dataclass instance ``obj`` (in place; also
    returned). Unknown keys are errors. A free-form mapping field is merged key by key; if
    its field metadata names a ``reset_on`` key (``env``: ``name``) and the new mapping
    changes that key, the old keys are dropped first. A ``+key`` override (``op`` "+")
    must name a key that is not there yet: a free-form mapping's absent key (a dataclass
    field is always there); ``++key`` and plain ``key`` set it either way (the schema, not
    the defaults, says which keys exist)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(obj)}
    hints = _hints(type(obj))
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in fields:
            raise ConfigError(f"{name}: unknown key {key!r}; known: {sorted(fields)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            apply_overrides(current, value, name + ".")
        elif isinstance(current, dict) and isinstance(value, dict):
            new = coerce(name, value, hints[key])
            reset = fields[key].metadata.get("reset_on")
            if reset and reset in new and new[reset] != current.get(reset):
                current.clear()
            _refuse_present_additions(current, value, name)
            _deep_update(current, new)
        else:
            if getattr(value, "op", "=") == "+":       # a dataclass field is always there
                raise ConfigError(_already_there(name, current))
            setattr(obj, key, coerce(name, value, hints[key]))
    return obj


def _already_there(name: str, value: Any) -> str:
    return (f"{name}: +{name}=... adds a key that is not in the config, but it is there "
            f"({value!r}); set it with {name}=... (or ++{name}=...)")


def _refuse_present_additions(current: dict, data: dict, name: str) -> None:
    """ConfigError for a ``+key`` override (Hydra: append) whose key ``current`` (the
    mapping at dotted ``name``) holds."""
    for k, v in data.items():
        if getattr(v, "op", "=") == "+" and k in current:
            raise ConfigError(_already_there(f"{name}.{k}", current[k]))
        if isinstance(v, dict) and isinstance(current.get(k), dict):
            _refuse_present_additions(current[k], v, f"{name}.{k}")


def _deep_update(target: dict, data: dict) -> None:
    for k, v in data.items():
        if isinstance(v, dict) and isinstance(target.get(k), dict):
            _deep_update(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


# ---------------------------------------------------------------------------- validation

def need(ok: bool, key: str, what: str, value: Any) -> None:
    """Raise ``ConfigError("key: expected what, got value")`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}: expected {what}, got {value!r}")


def in_range(obj: Any, name: str, lo=None, hi=None, *, lo_open: bool = False,
             hi_open: bool = False, nullable: bool = False) -> None:
    """``getattr(obj, name)`` within [lo, hi] (open ends on request; None passes when
    ``nullable``); the key in the message is ``name`` (the walker adds the prefix)."""
    v = getattr(obj, name)
    if v is None and nullable:
        return
    lo_s = "" if lo is None else (f"> {lo}" if lo_open else f">= {lo}")
    hi_s = "" if hi is None else (f"< {hi}" if hi_open else f"<= {hi}")
    what = " and ".join(s for s in (lo_s, hi_s) if s) + (" (or null)" if nullable else "")
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    ok = ok and (lo is None or (v > lo if lo_open else v >= lo))
    ok = ok and (hi is None or (v < hi if hi_open else v <= hi))
    need(ok, name, what, v)


def validate_settings(obj: Any, prefix: str = "") -> Any:
    """Check a settings tree: every leaf has its declared type, every float is finite, every
    int lies within +-INT_LIMIT, then each nested dataclass's ``validate()`` (children
    first; a ConfigError from it gets the dotted prefix). Returns ``obj``."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        key, value = prefix + f.name, getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            validate_settings(value, key + ".")
            continue
        value = coerce(key, value, hints[f.name])
        setattr(obj, f.name, value)
        for leaf in (value if isinstance(value, list) else [value]):
            if isinstance(leaf, float) and not math.isfinite(leaf):
                raise ConfigError(f"{key}: expected a finite number, got {leaf!r}")
            if isinstance(leaf, int) and not isinstance(leaf, bool) and abs(leaf) > INT_LIMIT:
                raise ConfigError(f"{key}: {leaf} is out of range (|value| <= {INT_LIMIT})")
    check = getattr(obj, "validate", None)
    if callable(check):
        try:
            check()
        except ConfigError as exc:
            raise ConfigError(f"{prefix}{exc}") from None
    return obj


# ---------------------------------------------------------------------------- loading

def read_yaml_layers(path: str | Path, _seen: tuple = ()) -> list[dict]:
    """The mappings of a YAML settings file and its ``base:`` ancestors, oldest first."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such config file")
    data = load_yaml_file(path)     # size, depth and alias expansion bounded
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    base = data.pop("base", None)
    if base is None:
        return [data]
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"base: expected a YAML file name, got {base!r} (in {path})")
    parent = (path.parent / base).resolve()
    if parent in _seen or parent == path.resolve():
        raise ConfigError(f"base: {path} inherits from itself through {parent}")
    if not parent.is_file():
        raise UsageError(f"base: no such config file {parent} (named in {path})")
    return read_yaml_layers(parent, _seen + (path.resolve(),)) + [data]


def load_settings(cls, path: str | Path | None = None, overrides=(), *,
                  default_path: str | Path | None = None):
    """``cls()`` <- YAML ``path`` (None: ``default_path``, None: no file) and its ``base:``
    chain <- overrides (``["k.sub=v", ...]`` or an already nested mapping), validated."""
    obj = cls()
    source = path if path is not None else default_path
    if source is not None:
        if not Path(source).is_file():
            raise UsageError(f"--config: no such file {str(source)!r}")
        for layer in read_yaml_layers(source):
            apply_overrides(obj, layer)
    data = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides or ()))
    apply_overrides(obj, data)
    return validate_settings(obj)


# ---------------------------------------------------------------------------- train settings
# Bounds: sizes are capped far above any real use (the paper: 16 tasks x 8 rollouts, 50
# turns, 512 new tokens) but low enough that a typo cannot allocate without bound.

MAX_GROUP_SIZE = 1024
_DEVICE_RE = re.compile(r"(auto|cpu|cuda|cuda:\d+)\Z")
DTYPES = ("float32", "fp32", "bfloat16", "bf16", "float16", "fp16")   # model.py _DTYPES


LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class LoraSettings:
    """``model.lora.*``: LoRA adapters (sharpo_train/lora.py; extra ``[lora]``). Off at rank 0."""
    rank: int = 0                         # adapter rank r; 0: no LoRA (the model itself trains)
    alpha: float = 16.0                   # scale alpha / r of the adapter's update
    dropout: float = 0.0                  # dropout on the adapter's input (training passes only)
    targets: list[str] = field(default_factory=lambda: list(LORA_TARGETS))   # Linear layer names

    def validate(self) -> None:
        in_range(self, "rank", 0, 65536)
        if self.rank == 0:
            return
        in_range(self, "alpha", 0.0, lo_open=True)
        in_range(self, "dropout", 0.0, 1.0, hi_open=True)
        need(bool(self.targets) and all(t.strip() and "." not in t for t in self.targets), "targets",
             "a non-empty list of Linear layer names (e.g. [q_proj, v_proj])", self.targets)


@dataclass
class ModelConfig:
    path: Optional[str] = None            # local HF checkpoint dir, or a named model (model.py
                                          # NAMED_MODELS: smollm2-135m-instruct); None: tiny Qwen2
    tokenizer_path: Optional[str] = None  # None: model.path's tokenizer, else the shipped one
    hidden_size: int = 64                 # tiny-model shape (ignored when path is set)
    intermediate_size: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 8192
    tie_word_embeddings: bool = True
    attn_implementation: str = "sdpa"
    dtype: str = "float32"                # parameter dtype
    autocast_bf16: bool = True            # bf16 autocast for forwards, CUDA only
    device: str = "auto"                  # auto | cpu | cuda | cuda:N
    cpu_threads: Optional[int] = None     # torch intra-op threads during the run (None: torch's)
    gradient_checkpointing: bool = False
    # what trains (model.py configure_trainable); 16-bit dtypes train with fp32 master weights
    trainable_layers: int = 0             # only the top N decoder layers (+ final norm); 0: all
    lora: LoraSettings = field(default_factory=LoraSettings)   # LoRA adapters (rank 0: off)

    def validate(self) -> None:
        in_range(self, "trainable_layers", 0, 1024)
        need(not (self.lora.rank and self.trainable_layers), "lora.rank",
             "0 when model.trainable_layers is set (LoRA trains its adapters only)", self.lora.rank)
        for k, hi in (("hidden_size", 65536), ("intermediate_size", 262144),
                      ("num_layers", 1024), ("num_heads", 1024), ("num_kv_heads", 1024),
                      ("max_position_embeddings", 1 << 24)):
            in_range(self, k, 1, hi)
        if self.path is None:   # the tiny model is built from these numbers
            need(self.num_heads % self.num_kv_heads == 0, "num_kv_heads",
                 f"a divisor of num_heads ({self.num_heads})", self.num_kv_heads)
            need(self.hidden_size % self.num_heads == 0, "hidden_size",
                 f"a multiple of num_heads ({self.num_heads})", self.hidden_size)
        need(self.path is None or self.path.strip() != "", "path", "a directory or null", self.path)
        need(self.dtype in DTYPES, "dtype", f"one of {list(DTYPES)}", self.dtype)
        need(bool(self.attn_implementation.strip()), "attn_implementation", "a name",
             self.attn_implementation)
        need(bool(_DEVICE_RE.match(self.device)), "device", "auto, cpu, cuda or cuda:N",
             self.device)
        in_range(self, "cpu_threads", 1, 1024, nullable=True)


@dataclass
class RolloutConfig:
    tasks_per_step: int = 2               # groups per step
    group_size: int = 4                   # G rollouts per task
    max_turns: int = 8                    # turn limit per episode (the env may stop earlier)
    max_new_tokens: int = 96              # per turn
    max_prompt_tokens: int = 2048         # history is shortened (never the task) to fit
    history_length: int = 2               # (observation, action) pairs shown per prompt
    temperature: float = 1.0
    top_p: float = 1.0
    generation_batch_size: int = 64       # rows per generate() call
    num_env_workers: Optional[int] = None  # None: the environment's default
    # rollout engine (sharpo_train/generation): hf = transformers generate; vllm = vLLM in
    # process, weights synced after every update (needs the vllm package: .venv-vllm)
    engine: str = "hf"
    vllm_max_model_len: Optional[int] = None  # None: max_prompt_tokens + max_new_tokens
    vllm_kv_cache_gb: float = 1.0         # CPU: VLLM_CPU_KVCACHE_SPACE (GiB)
    vllm_gpu_memory_utilization: float = 0.3  # CUDA: fraction of the GPU for vLLM

    def validate(self) -> None:
        need(self.engine in ("hf", "vllm"), "engine", "hf or vllm", self.engine)
        in_range(self, "vllm_max_model_len", 2, 1 << 20, nullable=True)
        in_range(self, "vllm_kv_cache_gb", 0, 4096, lo_open=True)
        in_range(self, "vllm_gpu_memory_utilization", 0, 1, lo_open=True)
        in_range(self, "tasks_per_step", 1, 4096)
        in_range(self, "group_size", 1, MAX_GROUP_SIZE)
        in_range(self, "max_turns", 1, 1000)
        in_range(self, "max_new_tokens", 1, 65536)
        in_range(self, "max_prompt_tokens", 1, 1 << 20)
        in_range(self, "history_length", 0, 1000)
        in_range(self, "temperature", 0, 100, lo_open=True)   # training samples
        in_range(self, "top_p", 0, 1, lo_open=True)
        in_range(self, "generation_batch_size", 1, 65536)
        in_range(self, "num_env_workers", 0, 1024, nullable=True)


@dataclass
class TeacherConfig:
    choice: str = "random"                # random | first: which successful peer
    max_prompt_tokens: int = 4096         # teacher prompt limit: the hint is cut, never the task
    hint_max_observation_chars: int = 200
    skip_zero_advantage: bool = True      # don't score teachers of rows with A_i = 0
    hint_placement: str = "after_task"    # after_task | after_observation (teacher.py,
                                          # docs/training.md, hint placement)
    hint_scope: str = "trajectory"        # trajectory | to_turn: the peer's whole trajectory,
                                          # or its turns up to the row's (teacher.py)

    def validate(self) -> None:
        from .teacher import HINT_PLACEMENTS, HINT_SCOPES
        need(self.hint_scope in HINT_SCOPES, "hint_scope", " or ".join(HINT_SCOPES),
             self.hint_scope)
        need(self.choice in ("random", "first"), "choice", "random or first", self.choice)
        need(self.hint_placement in HINT_PLACEMENTS, "hint_placement",
             " or ".join(HINT_PLACEMENTS), self.hint_placement)
        in_range(self, "max_prompt_tokens", 1, 1 << 20)
        in_range(self, "hint_max_observation_chars", 0, 1 << 20)


@dataclass
class ScoringConfig:
    shared_prefix: bool = True            # run each shared prefix once (see scoring.py)
    min_shared_tokens: int = 16           # share a prefix only when at least this long
    max_batch_tokens: int = 65536         # padded tokens per forward when scoring
    chunk_tokens: int = 256               # suffix window on top of a cached prefix

    def validate(self) -> None:
        in_range(self, "min_shared_tokens", 1, 1 << 20)
        in_range(self, "max_batch_tokens", 1, 1 << 26)
        in_range(self, "chunk_tokens", 1, 1 << 20)


@dataclass
class OptimConfig:
    lr: float = 1e-6
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    grad_clip: float = 1.0
    micro_batch_size: int = 8             # rows per forward/backward (gradient accumulation)
    ppo_epochs: int = 1
    mini_batches: int = 1                 # optimizer steps per epoch
    warmup_steps: int = 0
    shared_prefix_update: bool = False    # update pass: rows of a micro-batch with one prompt
                                          # run it once (exact gradients; not with
                                          # gradient checkpointing)

    def validate(self) -> None:
        in_range(self, "lr", 0, 1, lo_open=True)
        in_range(self, "weight_decay", 0, 10)
        in_range(self, "beta1", 0, 1, hi_open=True)
        in_range(self, "beta2", 0, 1, hi_open=True)
        in_range(self, "grad_clip", 0, lo_open=True)
        in_range(self, "micro_batch_size", 1, 65536)
        in_range(self, "ppo_epochs", 1, 100)
        in_range(self, "mini_batches", 1, 4096)
        in_range(self, "warmup_steps", 0, 10 ** 6)


@dataclass
class LossConfig:
    clip_ratio: float = 0.2
    clip_ratio_high: Optional[float] = None  # None: same as clip_ratio
    agg: str = "token-mean"               # token-mean | seq-mean-token-mean | traj-mean-token-mean
    use_kl: bool = False                  # KL to the frozen initial policy (k3 estimator)
    kl_coef: float = 0.01
    entropy_coef: float = 0.0             # entropy bonus (entropy is always logged)
    policy_loss: str = "ppo_clip"         # a name in losses.POLICY_LOSSES

    def validate(self) -> None:
        in_range(self, "clip_ratio", 0, 1, lo_open=True, hi_open=True)
        in_range(self, "clip_ratio_high", 0, 10, lo_open=True, nullable=True)
        from .losses import AGGREGATIONS, POLICY_LOSSES
        need(self.agg in AGGREGATIONS, "agg", f"one of {sorted(AGGREGATIONS)}", self.agg)
        need(self.policy_loss in POLICY_LOSSES, "policy_loss", f"one of {sorted(POLICY_LOSSES)}",
             self.policy_loss)
        in_range(self, "kl_coef", 0, 100)
        in_range(self, "entropy_coef", -100, 100)


@dataclass
class LogConfig:
    credit_every: int = 1                 # write RUN/credit/step_S.json every N steps (0: never)
    report_to: str = "none"               # trackers (TRL's report_to): none, or a comma list
                                          # of tensorboard, wandb, trackio; each must be
                                          # installed (logging_utils.py)
    tensorboard: bool = True              # TensorBoard events too when tensorboard is
                                          # importable (best effort; report_to=tensorboard
                                          # requires it)
    progress: bool = True
    credit_quality: bool = False          # planner labels + credit AUC per step (ALFWorld
                                          # only; costs planner calls, docs/credit_quality.md)
    save_batches: int = 0                 # write RUN/batches/step_S.* every N steps (0: never)

    def validate(self) -> None:
        in_range(self, "credit_every", 0)
        in_range(self, "save_batches", 0)
        parse_report_to(self.report_to, "report_to")    # the walker adds "log."


@dataclass
class CheckpointConfig:
    every: int = 1                        # steps between checkpoints (0: only the last)
    keep: int = 2                         # newest checkpoints kept

    def validate(self) -> None:
        in_range(self, "every", 0)
        in_range(self, "keep", 1, 1000)


@dataclass
class EvalConfig:
    every: int = 0                        # steps between evals (0: none during training)
    at_end: bool = True
    num_tasks: int = 8                    # first N eval tasks (0: all)
    temperature: float = 0.0              # 0: greedy
    max_turns: Optional[int] = None       # None: rollout.max_turns
    before_train: bool = False            # also evaluate at step 0, before the first update
                                          # (a fresh run only; verl: trainer.val_before_train)
    train_tasks: int = 0                  # > 0: every evaluation also plays this many training
                                          # tasks (a fixed family-balanced sample, greedy):
                                          # eval/train_success, a training curve free of the
                                          # per-step task draw

    def validate(self) -> None:
        in_range(self, "every", 0)
        in_range(self, "num_tasks", 0, 10 ** 6)
        in_range(self, "train_tasks", 0, 10 ** 6)
        in_range(self, "temperature", 0, 100)
        in_range(self, "max_turns", 1, 1000, nullable=True)


def _check_keys(values: dict, schema: dict, prefix: str) -> None:
    unknown = sorted(set(values) - set(schema))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown key {unknown[0]!r}; known: "
                          f"{sorted(schema)}")
    for k, v in values.items():
        tp, *bounds = schema[k]
        v = coerce(prefix + k, v, tp)
        values[k] = v
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{prefix}{k}: expected a finite number, got {v!r}")
        if bounds and v is not None:
            lo, hi = bounds
            need(v >= lo and (hi is None or v <= hi) and abs(v) <= INT_LIMIT, prefix + k,
                 f">= {lo}" + (f" and <= {hi}" if hi is not None else ""), v)


def check_env(env: dict) -> None:
    """``env.*`` against the environment's settings schema (EnvSpec.settings and
    .nested_settings: known keys, types and ranges)."""
    need(isinstance(env.get("name"), str), "env.name", "an environment name", env.get("name"))
    need(env["name"] in ENVS, "env.name", f"one of {env_names()}", env["name"])
    spec = get_spec(env["name"])
    _check_keys(env, spec.settings, "env.")
    for key, schema in spec.nested_settings.items():
        if isinstance(env.get(key), dict):
            _check_keys(env[key], schema, f"env.{key}.")


def _env_default() -> dict:
    return {"name": DEFAULT_ENV}


def _estimator_default():
    """``estimator.*``: every registered estimator's params in one flat dataclass
    (estimators/registry.py; imported here, not at the top: the registry imports torch and
    the estimators import this module's checkers)."""
    from .estimators.registry import estimator_config
    return estimator_config()


@dataclass
class Config:
    method: str = "sharpo"                # credit estimator: a name in estimators.ESTIMATORS
    seed: int = 0
    total_steps: int = 4
    run_dir: str = "runs/default"
    resume: bool = False
    init_from: Optional[str] = None       # HF dir to start the policy from (e.g. an SFT output)
    model: ModelConfig = field(default_factory=ModelConfig)
    env: dict = field(default_factory=_env_default, metadata={"reset_on": "name"})
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    estimator: Any = field(default_factory=_estimator_default)   # estimators.EstimatorConfig
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        from .estimators import ESTIMATORS
        need(self.method in ESTIMATORS, "method", f"one of {sorted(ESTIMATORS)}", self.method)
        in_range(self, "seed", 0, INT_LIMIT)
        in_range(self, "total_steps", 0, 10 ** 6)
        need(self.run_dir.strip() != "", "run_dir", "a directory name (not empty)", self.run_dir)
        need(self.init_from is None or self.init_from.strip() != "", "init_from",
             "a directory or null", self.init_from)
        # every registered estimator starts from group-relative advantages (docs/method.md §1):
        # a group of one has A = 0 for every row, so nothing would be learned
        group_relative = getattr(ESTIMATORS[self.method], "group_relative", True)
        need(not (group_relative and self.rollout.group_size < 2), "rollout.group_size",
             f">= 2 with the group-relative method {self.method!r} (a group of one has "
             f"advantage 0)", self.rollout.group_size)
        need(not (self.optim.shared_prefix_update and self.model.gradient_checkpointing),
             "optim.shared_prefix_update", "false when model.gradient_checkpointing is on (a "
             "KV cache cannot pass through checkpointed layers)", self.optim.shared_prefix_update)
        check_env(self.env)
        need(not (self.log.credit_quality and get_spec(self.env["name"]).plan_labels is None),
             "log.credit_quality", f"false unless the environment labels its actions "
             f"(EnvSpec.plan_labels; env.name {self.env['name']!r} does not)",
             self.log.credit_quality)


# ---------------------------------------------------------------------------- train loading

def validate(cfg: Config) -> Config:
    return validate_settings(cfg)


def config_from_dict(data: dict) -> Config:
    return load_settings(Config, None, copy.deepcopy(data or {}))


def load_config(path: str | Path | None = None, overrides=None) -> Config:
    """YAML file (None: the embedded default) + ``key.sub=value`` overrides -> Config."""
    return load_settings(Config, path, overrides or (), default_path=DEFAULT_CONFIG_PATH)


def config_yaml(cfg: Config) -> str:
    """The YAML text of a resolved config: RUN/config.yaml, `sharpo train --print-config`."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)


def save_config(cfg: Config, path: str | Path) -> None:
    from .io import atomic_write_text
    atomic_write_text(path, config_yaml(cfg))


# ---------------------------------------------------------------------------- resume
# What a --resume may change: keys that do not change what the run computes
# (docs/run_directory.md, resume guarantees). total_steps may only grow.
RESUME_MAY_CHANGE = ("resume", "run_dir", "total_steps", "log.", "eval.", "checkpoint.every",
                     "checkpoint.keep", "model.device", "model.cpu_threads")


def _flat(data: Any, prefix: str = "") -> dict:
    if not isinstance(data, dict):
        return {prefix[:-1]: data}
    out: dict = {}
    for k, v in data.items():
        out.update(_flat(v, f"{prefix}{k}."))
    return out


def resume_changes(saved: Config, new: Config) -> list[str]:
    """Dotted keys where ``new`` changes what the run ``saved`` is (sorted; empty: none)."""
    a, b = _flat(saved.to_dict()), _flat(new.to_dict())
    changed = []
    for key in sorted(set(a) | set(b)):
        same = a.get(key) == b.get(key)
        if key == "total_steps":
            same = b[key] >= a[key]
        elif any(key == p or (p.endswith(".") and key.startswith(p)) for p in RESUME_MAY_CHANGE):
            same = True
        if not same:
            changed.append(key)
    return changed


def check_resume(saved: Config, new: Config, source: str = "config.yaml") -> None:
    """ConfigError naming every key where ``new`` would change the run ``saved``."""
    changed = resume_changes(saved, new)
    if not changed:
        return
    a, b = _flat(saved.to_dict()), _flat(new.to_dict())
    detail = ", ".join(f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in changed[:4])
    more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
    raise ConfigError(f"{', '.join(changed)}: --resume cannot change what the run is "
                      f"({detail}{more} vs {source}); it may change total_steps (to grow), "
                      f"log.*, eval.*, checkpoint.every/keep, model.device, model.cpu_threads; "
                      f"start a new run_dir for the rest")


def resume_config(run_dir: str | Path, overrides=(), config_path: str | Path | None = None
                  ) -> Config:
    """The config of ``sharpo train --resume``: RUN/config.yaml with the overrides applied
    (or, with ``config_path``, that file + overrides restating the run), refused with a
    ConfigError naming the keys if it changes what the run is; UsageError if ``run_dir``
    holds no run."""
    run_dir = Path(run_dir)
    saved_path = run_dir / "config.yaml"
    if not run_dir.is_dir():
        raise UsageError(f"--resume: no run directory {str(run_dir)!r}")
    if not saved_path.is_file():
        raise UsageError(f"--resume: {run_dir} holds no run (no config.yaml)")
    saved = load_settings(Config, saved_path)
    data = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides or ()))
    if config_path is not None:
        new = load_settings(Config, config_path, data)
    else:
        new = load_settings(Config, saved_path, data)
    check_resume(saved, new, str(saved_path))
    new.resume, new.run_dir = True, str(run_dir)
    return new
