"""What a settings tree offers a user: every key with its type, default, range and help,
read from the same code that loads and checks it (`sharpo settings`, `sharpo train --help`,
docs/training.md's settings table).

- help: the field's one-line ``metadata["help"]`` (``setting(default, help)`` of loader.py;
  the TRL/HfArgumentParser convention);
- range: what the class's ``validate()`` (and its bases') checks for the field, read from
  its source: ``in_range(self, "key", lo, hi, ...)`` gives ``[lo, hi]`` (open ends as
  ``(``/``)``), ``need(..., "key", "what", ...)`` gives ``what`` (evaluated on the default
  settings, e.g. ``one of ['hf', 'vllm']``);
- nested dataclasses are walked (``model.lora.rank``); a free-form mapping (``env``) is the
  caller's to describe (``extra`` rows).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import sys
import textwrap
import typing
from typing import Any, NamedTuple


class SettingRow(NamedTuple):
    key: str            # dotted key, e.g. "rollout.group_size"
    type: str           # "int", "float", "str", "bool", "list[str]", "int | null"
    default: str        # the default as the command line writes it ("null", "[a, b]")
    range: str          # "[1, 1024]", "one of ['hf', 'vllm']", "" when unchecked
    help: str           # one line


def type_name(tp: Any) -> str:
    """The type as a user reads it: ``Optional[int]`` -> ``int | null``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        names = [type_name(a) for a in args if a is not type(None)]
        return " | ".join(names + (["null"] if type(None) in args else []))
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(a) for a in args)}]"
    return getattr(tp, "__name__", str(tp)).replace("NoneType", "null")


def default_text(value: Any) -> str:
    """A default as it is written on the command line / in YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(default_text(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _bound(node: ast.AST | None, scope: dict) -> Any:
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return None
    try:
        return eval(compile(ast.Expression(node), "<range>", "eval"), scope)   # noqa: S307
    except Exception:                  # a bound that depends on another setting
        return ast.unparse(node)


@functools.lru_cache(maxsize=None)
def _checks(cls: type) -> tuple:
    """((field, kind, args), ...) of the ``in_range`` / ``need`` calls in ``cls.validate``
    and its bases' (source read once per class)."""
    out = []
    for klass in cls.__mro__:
        fn = klass.__dict__.get("validate")
        if fn is None:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError):
            continue
        module = sys.modules.get(klass.__module__)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            name = node.func.id
            if name == "in_range" and len(node.args) >= 2 and \
                    isinstance(node.args[1], ast.Constant):
                out.append((node.args[1].value, "in_range", node, module))
            elif name == "need" and len(node.args) >= 3 and \
                    isinstance(node.args[1], ast.Constant):
                out.append((node.args[1].value, "need", node, module))
    return tuple(out)


def is_int_type(tp: Any) -> bool:
    """True for ``int`` and ``Optional[int]`` (a setting validate_settings bounds by
    INT_LIMIT, which a range without an upper end shows)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return tp is int or args == [int]


def _is_int_field(obj: Any, name: str) -> bool:
    """True when field ``name`` of ``obj`` is declared int (or Optional[int])."""
    try:
        return is_int_type(typing.get_type_hints(type(obj)).get(name))
    except Exception:                  # a class whose hints cannot be resolved here
        return False


def field_range(obj: Any, name: str) -> str:
    """What ``validate()`` of ``obj``'s class accepts for field ``name`` ("" if unchecked);
    a settings class whose fields another object checks (the ``estimator.*`` section: each
    estimator's params) names it with ``settings_owner(name)``."""
    owner = getattr(obj, "settings_owner", None)
    if callable(owner):
        obj = owner(name)
    parts = []
    for key, kind, node, module in _checks(type(obj)):
        if key != name:
            continue
        scope = {**vars(module), "self": obj} if module else {"self": obj}
        if kind == "in_range":
            args = list(node.args[2:4]) + [None] * (2 - len(node.args[2:4]))
            kw = {k.arg: k.value for k in node.keywords}
            args = [kw.get("lo", args[0]), kw.get("hi", args[1])]
            lo, hi = (_bound(a, scope) for a in args)
            flag = {k: bool(_bound(v, scope)) for k, v in kw.items()
                    if k in ("lo_open", "hi_open", "nullable")}
            if _is_int_field(obj, name):     # validate_settings bounds every int
                from .loader import INT_LIMIT
                lo = -INT_LIMIT if lo is None else lo
                hi = INT_LIMIT if hi is None else hi
            text = (("(" if flag.get("lo_open") else "[") + ("-inf" if lo is None else str(lo))
                    + ", " + ("inf" if hi is None else str(hi)) + (")" if flag.get("hi_open") else "]"))
            parts.append(text + (" or null" if flag.get("nullable") else ""))
        else:      # need(cond, key, what): only a condition on this field alone
            used = {n.attr for n in ast.walk(node.args[0]) if isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Name) and n.value.id == "self"}
            if used != {name}:
                continue
            what = _bound(node.args[2], scope)
            if isinstance(what, str) and what != ast.unparse(node.args[2]):
                parts.append(what)
    return "; ".join(dict.fromkeys(parts))


def schema_of(cls: type) -> dict:
    """``{field: (type,) | (type, lo, hi)}`` of the flat settings dataclass ``cls``, the
    bounds read from its ``validate()``'s ``in_range`` calls (the schema of a free-form
    mapping such as ``env.*``: settings/loader.py ``check_schema``)."""
    hints = typing.get_type_hints(cls)
    obj, out = cls(), {}
    for f in dataclasses.fields(cls):
        bounds = ()
        for key, kind, node, module in _checks(cls):
            if key == f.name and kind == "in_range":
                scope = {**vars(module), "self": obj} if module else {"self": obj}
                args = list(node.args[2:4]) + [None] * (2 - len(node.args[2:4]))
                bounds = tuple(_bound(a, scope) for a in args)
        out[f.name] = (hints[f.name], *bounds)
    return out


def setting_rows(obj: Any, prefix: str = "") -> list[SettingRow]:
    """One row per leaf setting of the settings dataclass instance ``obj`` (its defaults:
    pass ``cls()``), nested dataclasses walked; a field whose value is a mapping is skipped
    (free-form: the caller adds its rows)."""
    rows = []
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = prefix + f.name
        if dataclasses.is_dataclass(value):
            rows += setting_rows(value, key + ".")
        elif isinstance(value, dict):
            continue
        else:
            rows.append(SettingRow(key, type_name(hints.get(f.name, type(value))),
                                   default_text(value), field_range(obj, f.name),
                                   " ".join(str(f.metadata.get("help", "")).split())))
    return rows


def missing_help(obj: Any, prefix: str = "") -> list[str]:
    """Keys of ``obj``'s tree whose field carries no help."""
    return [r.key for r in setting_rows(obj, prefix) if not r.help]


def rows_text(rows: list[SettingRow]) -> str:
    """The rows as plain text: one key per block, its help indented below it."""
    out = []
    for r in rows:
        rng = f", {r.range}" if r.range else ""
        out.append(f"  {r.key} ({r.type}, default {r.default}{rng})\n      {r.help}")
    return "\n".join(out)


def rows_markdown(rows: list[SettingRow]) -> str:
    """The rows as a markdown table (docs/training.md)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")
    lines = ["| key | type | default | range | help |", "|---|---|---|---|---|"]
    lines += [f"| `{r.key}` | {cell(r.type)} | `{cell(r.default)}` | {cell(r.range)} | "
              f"{cell(r.help)} |" for r in rows]
    return "\n".join(lines)
