"""The settings engine every command shares: typed nested dataclasses, one loader, one
override parser, one validation. The schemas live with their owners (the trainer's:
loops/train_config.py; `sharpo sft`: sft.SFTConfig; the recipes: recipes/recipe_config.py; an environment's
``env.*``: its EnvSpec.settings; an estimator's ``estimator.*``: its registered params).

    load_settings(cls, path, overrides)    YAML file (a ``base:`` key names a parent YAML,
                                           relative to the file) -> ``key.sub=value``
                                           overrides -> validate_settings -> a ``cls``
    parse_overrides(["a.b=1e-3", ...])     -> {"a": {"b": OverrideText("1e-3")}}
    apply_overrides(obj, data)             typed merge into a (nested) dataclass instance
    validate_settings(obj)                 every float finite, every int within +-(2**31-1),
                                           then ``validate()`` of every nested dataclass
    check_schema(mapping, schema, prefix)  a free-form mapping against {key: (type, lo, hi)}
    need / in_range                        the checks ``validate()`` methods are written with
    setting(default, help)                 a field with its one-line help (describe.py
                                           lists keys, types, defaults, ranges and help)

Override values are typed by the field they land in: floats accept ``1e-3``, ``.5``;
ints refuse ``2.5``; bools accept true/false (any case); ``null``/``none`` -> None where the
field may be null; a ``str`` field keeps the text as typed. Free-form mappings (``env``)
get the untyped reading (null, bool, int, float, ``[..]``/``{..}`` YAML, else text).
Every error is a :class:`ConfigError` whose message starts with the dotted key.

YAML is read by bounded_yaml.py (size, nesting depth and alias expansion bounded), for files
and for ``[..]``/``{..}`` override values alike.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import math
import re
import sys
import typing
from pathlib import Path
from typing import Any, Union

from .bounded_yaml import load_yaml_file, load_yaml_text
from ..errors import ConfigError, UsageError, did_you_mean

INT_LIMIT = 2 ** 31 - 1          # no setting is an integer beyond this (sizes are far below)

__all__ = ["ConfigError", "UsageError", "OverrideText", "parse_value", "parse_overrides",
           "parse_override", "split_override", "override_key", "coerce", "apply_overrides",
           "need", "in_range", "validate_settings", "check_schema", "read_yaml_layers",
           "load_settings", "INT_LIMIT"]


# ---------------------------------------------------------------------------- overrides

_INT_RE = re.compile(r"[+-]?\d+\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z|[+-]?\.?(?:inf|infinity|nan)\Z",
                       re.IGNORECASE)
_NULLS = ("null", "none", "~")
_BOOLS = {"true": True, "false": False}


def _to_int(text: str, key: str) -> int:
    """int() of a text _INT_RE matched; ConfigError naming ``key`` past Python's limit on
    converting digits (sys.get_int_max_str_digits(), 4300: no setting is that large)."""
    s = text.strip()
    limit = sys.get_int_max_str_digits()
    if limit and len(s.lstrip("+-")) > limit:
        raise ConfigError(f"{key}: an integer of {len(s.lstrip('+-')):,} digits; refused "
                          f"(at most {limit:,})")
    return int(s)


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
        return _to_int(s, key)
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
    if tp is str and isinstance(value, OverrideText) and value.strip().lower() == "none":
        return str(value)       # a word, not YAML's null: log.report_to=none (null, ~: null)
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
            return _to_int(value, key)
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if tp is float:
        try:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, str) and _FLOAT_RE.match(value.strip()):
                number = _to_float(value)
                if number == 0 and re.search(r"[1-9]", value.lower().partition("e")[0]):
                    raise ConfigError(f"{key}: {value.strip()!r} is closer to 0 than the "
                                      f"smallest float (about 5e-324): it would read as 0.0")
                return number
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
            aliases = {a: f.name for f in fields.values() for a in f.metadata.get("aliases", ())}
            raise ConfigError(f"{name}: unknown key {key!r}{did_you_mean(key, fields, aliases)}; "
                              f"known: {sorted(fields)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            apply_overrides(current, value, name + ".")
        elif isinstance(current, dict) and isinstance(value, dict):
            new = coerce(name, value, hints[key])
            reset = fields[key].metadata.get("reset_on")
            if reset and reset in new and new[reset] != current.get(reset):
                _refuse_present_additions(current, {reset: value[reset]}, name)
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

def setting(default: Any = dataclasses.MISSING, help: str = "", *,
            factory: Any = dataclasses.MISSING, **metadata) -> Any:
    """A settings dataclass field with its one-line ``help`` (``metadata["help"]``, read by
    describe.py: `sharpo settings`, `sharpo train --help`) and further metadata (e.g.
    ``aliases``); ``factory``: a default_factory for a mutable default."""
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata={"help": help, **metadata})
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


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


def check_text(key: str, value: Any) -> None:
    """ConfigError naming ``key`` when a string in ``value`` (nested dicts and lists too)
    holds a NUL or another control character, or is not valid UTF-8; a path setting
    (``PATH_FIELDS``, an ``env.*_dir``) also when it is empty, holds any control character
    or a name too long for a file system. The one validator: sharpo_train/inputs.py."""
    from ..inputs import check_path, check_text as _check
    _check(key, value)
    last = key.rsplit(".", 1)[-1]
    if last in PATH_FIELDS and isinstance(value, str):
        check_path(key, value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and k.endswith(("_dir", "_path", "_file")) \
                    and isinstance(v, str) and v:
                check_path(f"{key}.{k}", v)


# settings that name a file or folder (a run's own, a model's): check_path's rules too
PATH_FIELDS = ("run_dir", "init_from", "path", "tokenizer_path")


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
        check_text(key, value)
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
        from ..inputs import check_input_file
        try:       # a folder, fifo or device is said as such, never "no such file"
            check_input_file(str(path), str(path))
        except FileNotFoundError:
            raise UsageError(f"{path}: no such config file") from None
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
    if not parent.is_file():       # a folder, fifo or device is said as such (inputs.py)
        from ..inputs import check_input_file
        try:
            check_input_file("base", str(parent))
        except FileNotFoundError:
            raise UsageError(f"base: no such config file {parent} (named in {path})") from None
    return read_yaml_layers(parent, _seen + (path.resolve(),)) + [data]


def load_settings(cls, path: str | Path | None = None, overrides=(), *,
                  default_path: str | Path | None = None):
    """``cls()`` <- YAML ``path`` (None: ``default_path``, None: no file) and its ``base:``
    chain <- overrides (``["k.sub=v", ...]`` or an already nested mapping), validated."""
    obj = cls()
    source = path if path is not None else default_path
    if source is not None:
        if not Path(source).is_file():
            from ..inputs import check_input_file
            try:       # a folder, fifo or device is said as such
                check_input_file("--config", str(source))
            except FileNotFoundError:
                raise UsageError(f"--config: no such file {str(source)!r}") from None
        for layer in read_yaml_layers(source):
            apply_overrides(obj, layer)
    data = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides or ()))
    apply_overrides(obj, data)
    return validate_settings(obj)


def check_schema(values: dict, schema: dict, prefix: str) -> None:
    """A free-form mapping (``env.*``) against a schema ``{key: (type,) | (type, lo, hi)}``
    (hi None = unbounded; type as in ``coerce``): unknown keys refused, values coerced in
    place, finite, within bounds. Errors name ``prefix + key``."""
    unknown = sorted(set(values) - set(schema))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}: unknown key {unknown[0]!r}"
                          f"{did_you_mean(unknown[0], schema)}; known: {sorted(schema)}")
    for k, v in values.items():
        tp, *bounds = schema[k]
        v = coerce(prefix + k, v, tp)
        values[k] = v
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{prefix}{k}: expected a finite number, got {v!r}")
        if bounds and v is not None:
            lo, hi = bounds
            hi = INT_LIMIT if hi is None else hi       # no setting is larger (validate_settings)
            need(lo <= v <= hi, prefix + k, f">= {lo} and <= {hi}", v)


def flat_keys(data: Any, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (dotted keys of nested settings)."""
    if not isinstance(data, dict):
        return {prefix[:-1]: data}
    out: dict = {}
    for k, v in data.items():
        out.update(flat_keys(v, f"{prefix}{k}."))
    return out
