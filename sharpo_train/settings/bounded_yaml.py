"""YAML settings read with bounds: every config file (``--config``, its ``base:`` chain, a
run's ``config.yaml`` on ``--resume``) and every ``[..]``/``{..}`` override value goes
through :func:`load_yaml_text` / :func:`load_yaml_file` (docs/run_directory.md, "Bounded
config input").

``yaml.safe_load`` executes nothing, but it lets a few hundred bytes expand without bound:
nine nested levels of ten aliases each (a "billion laughs" document) are 10**9 nodes once
anything walks them, and ``&a [*a]`` is a list that contains itself. Later readers (the
typed merge, ``yaml.safe_dump`` of config.yaml) walk the expansion, so such a file hung the
loader and grew past 3 GB. Here a document is measured *as expanded* while it is composed,
before any Python object is built, and refused (a ConfigError naming the source and the
limit) when it is over any of:

    MAX_BYTES        1 MiB     size of a file (read no further)
    MAX_DEPTH        32        mappings/sequences nested in each other, aliases expanded
                               (a config file's top-level mapping is level 1)
    MAX_NODES        100,000   nodes (scalars, mappings, sequences), aliases expanded
    MAX_CHARS        1 MiB     characters of scalar text, aliases expanded
    an integer       4,300     digits (Python's sys.get_int_max_str_digits(): int() of a
                               longer text raises)
    a float                    not closer to 0 than 5e-324 unless it is 0 (1.0e-400 would
                               read as 0.0)

Anchors and aliases themselves stay allowed within these bounds; an alias to a node that is
still open (a recursive structure) is refused.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, UsageError

MAX_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_CHARS = 1 << 20
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"


def _underflows(text: str) -> bool:
    """True for a YAML float text with a non-zero digit that reads as 0.0 (1.0e-400)."""
    mantissa = text.lower().replace("_", "").partition("e")[0]
    if not re.search(r"[1-9]", mantissa):
        return False
    try:
        return float(text.replace("_", "")) == 0.0
    except ValueError:
        return False


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer keeps, per node, its expanded (nodes, chars, depth) and
    stops at the first node over a bound. Aliases reuse the anchored node's numbers, so
    the cost is linear in the document's text, however far it would expand."""

    def __init__(self, stream, source: str):
        super().__init__(stream)
        self._source = source
        self._open = 0            # mappings/sequences open around the node being composed
        self._sizes: dict[int, tuple[int, int, int]] = {}   # id(node) -> (nodes, chars, depth)

    def _refuse(self, what: str, mark) -> None:
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{self._source}: refused: {what}{where}")

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._sizes:
                self._refuse(f"alias *{event.anchor} refers to a node that contains it "
                             f"(a recursive structure)", event.start_mark)
            return super().compose_node(parent, index)   # the anchored node, already measured
        event = self.peek_event()
        level = 0 if isinstance(event, yaml.ScalarEvent) else 1
        self._open += level
        if self._open > MAX_DEPTH:      # before descending: the composer recurses per level
            self._refuse(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._open -= level
        if isinstance(node, yaml.ScalarNode):
            size = (1, len(node.value), 0)
            digits = len(node.value.lstrip("+-").replace("_", ""))
            limit = sys.get_int_max_str_digits()
            if node.tag == INT_TAG and limit and digits > limit:   # int() would raise
                self._refuse(f"an integer of {digits:,} digits (at most {limit:,})",
                             event.start_mark)
            if node.tag == FLOAT_TAG and _underflows(node.value):
                self._refuse(f"{node.value!r} is closer to 0 than the smallest float (about "
                             f"5e-324): it would read as 0.0", event.start_mark)
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else \
                [n for pair in node.value for n in pair]
            sizes = [self._sizes[id(c)] for c in children]
            size = (1 + sum(s[0] for s in sizes), sum(s[1] for s in sizes),
                    1 + max((s[2] for s in sizes), default=0))
        self._sizes[id(node)] = size
        nodes, chars, depth = size
        if nodes > MAX_NODES:
            self._refuse(f"expands to more than {MAX_NODES:,} nodes (aliases expanded)",
                         event.start_mark)
        if chars > MAX_CHARS:
            self._refuse(f"expands to more than {MAX_CHARS:,} characters of text (aliases "
                         f"expanded)", event.start_mark)
        if depth > MAX_DEPTH:
            self._refuse(f"nested deeper than {MAX_DEPTH} levels (aliases expanded)",
                         event.start_mark)
        return node

    def construct_mapping(self, node, deep=False):
        """A key given twice in one mapping is refused (PyYAML keeps the last silently:
        ``total_steps: 1`` then ``total_steps: 5`` ran 5 steps). Keys a ``<<`` merge brings
        in are not counted: the mapping's own keys override them, as YAML says."""
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _value in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:           # an unhashable key: the constructor names it
                    continue
                if first is not key_node:
                    self._refuse(f"the key {str(key)[:80]!r} is given twice in one mapping "
                                 f"(lines {first.start_mark.line + 1} and "
                                 f"{key_node.start_mark.line + 1}); give it once",
                                 None)
        return super().construct_mapping(node, deep)


def _one_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


def load_yaml_text(text: str, source: str) -> Any:
    """``yaml.safe_load(text)`` within the bounds above; ConfigError naming ``source`` (a
    file or the override key) for text that is not YAML or is over a bound."""
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{source}: refused: larger than {MAX_BYTES:,} bytes")
    try:
        loader = _BoundedLoader(text, source)   # its reader refuses NUL and control characters
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_one_line(exc)}") from None
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_one_line(exc)}") from None
    except RecursionError:      # the depth bound stops nesting long before this
        raise ConfigError(f"{source}: refused: nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path) -> Any:
    """The YAML document in ``path`` (at most MAX_BYTES read); UsageError if it cannot be
    read, ConfigError if it is not YAML or over a bound."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise ConfigError(f"{path}: refused: larger than {MAX_BYTES:,} bytes")
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read ({exc})") from None
    return load_yaml_text(text, str(path))
