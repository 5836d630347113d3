"""Bounded parsing of the YAML and JSON documents users hand millpond (pipelines, manifests, params).

Whatever a user, an upload or an API body contains, parsing either returns plain JSON-shaped
data (dicts with string keys, lists, strings, finite numbers, booleans, None) or raises a
``DocumentError`` naming the source and the problem: never a crash, a hang or a blow-up.

Limits, and why these values:

- ``MAX_TEXT_CHARS`` (32 MiB): the server's upload limit (``MAX_PACKAGE_BYTES``); compiled IR
  of a pipeline with a thousand tasks is a few MiB.
- ``MAX_DEPTH`` (100 nested lists/maps): protobuf's ``json_format`` refuses IR nested deeper
  than 100 messages anyway, compiled IR nests about 12 deep and a Fluid manifest about 10.
  Deeper input is refused *before* it is composed: PyYAML's C loader recurses once per level
  and overflows the C stack (a segmentation fault) at ~100,000 levels, the pure-Python loader
  and ``json`` raise RecursionError at ~1,000.
- ``MAX_NODES`` (1,000,000 values, counted with every alias expanded): aliases make "billion
  laughs" possible (nine aliases per level, eight levels: 43 million strings from 6.5 KB),
  which the loader shares but every later ``json.dumps``, protobuf parse and copy expands.
  A compiled IR of a thousand tasks has ~100,000 values. An alias to a node still being
  composed (a recursive structure, which JSON cannot express) is refused too.
- Integers must fit in 64 bits (``int64``, what the IR's integer fields and the KFP backend's
  Go code use; Kubernetes decodes JSON numbers as int64 or float64), floats must be finite
  (JSON has no NaN or Infinity, so such a value would break every later JSON answer).
- No NUL character in any string or key: a NUL cannot be passed in a command line, a file
  name or a PostgreSQL text column.

YAML's extra types become what kubectl's YAML-to-JSON conversion makes of them: timestamps
ISO strings, ``!!binary`` text, sets maps to null, non-string keys their JSON text.

Written YAML (``dump_yaml``, every ``-o yaml``) has no anchors or aliases: kubectl prints none,
and a value that appears twice (a mount's options in spec and in status) is written twice.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator
from typing import Any

import yaml

from millpond.errors import UserError

MAX_TEXT_CHARS = 32 * 1024 * 1024
MAX_DEPTH = 100
MAX_NODES = 1_000_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# libyaml's parser when PyYAML has it (10× faster on large IR files), the pure-Python one otherwise.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPENING = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSING = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_NODES = (yaml.AliasEvent, yaml.ScalarEvent, *_OPENING)


class _PlainDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, but a value met twice is written twice, never as ``&id001``/``*id001``."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(value: Any) -> str:
    """JSON-shaped ``value`` as block YAML in its own key order, the way kubectl prints objects: no anchors."""
    return yaml.dump(value, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, default_flow_style=False)


class DocumentError(UserError):
    """A document millpond cannot accept: malformed, or beyond one of the module's limits."""


def load_yaml_documents(text: str, source: str) -> list[Any]:
    """Every document of a (multi-document) YAML or JSON text, checked against the limits; empty ones are None."""
    _check_size(text, source)
    try:
        _check_events(text, source)
        documents = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DocumentError(f"{where}: malformed YAML: {problem}") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more than 4,300 digits
        raise DocumentError(f"{source}: malformed YAML: {str(exc).splitlines()[0]}") from None
    return [None if doc is None else plain_value(doc, source) for doc in documents]


def load_json(text: str, source: str) -> Any:
    """One JSON value, checked against the limits (``DocumentError`` on malformed or hostile input)."""
    _check_size(text, source)
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{source}:{exc.lineno}:{exc.colno}: malformed JSON: {exc.msg}") from None
    except RecursionError:
        try:  # JSON is YAML: the event walk names the line, column and field where the depth passes the limit
            _check_events(text, source)
        except yaml.YAMLError:
            pass
        raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer of more than 4,300 digits, NaN or Infinity
        raise DocumentError(f"{source}: malformed JSON: {str(exc).splitlines()[0]}") from None
    return plain_value(value, source)


def without_nulls(value: Any) -> Any:
    """``value`` without its ``null`` map entries, as the API server prunes them before it validates (a field
    written ``command: null`` is a field not written); list items stay."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def check_value(value: Any, where: str) -> None:
    """Check an already-parsed value (an API body, a params file) against the limits; raise DocumentError."""
    plain_value(value, where)


def plain_value(value: Any, where: str) -> Any:
    """``value`` as plain JSON data, within the limits; shared subtrees (YAML aliases) stay shared.

    The walk is iterative, so no input can exhaust Python's stack here.
    """
    converted: dict[int, Any] = {}
    nodes = 0
    root: list[Any] = [None]
    # (container to fill, key or index, value, depth, path)
    stack: list[tuple[Any, Any, Any, int, str]] = [(root, 0, value, 0, "")]
    while stack:
        parent, slot, item, depth, path = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise DocumentError(f"{where}: more than {MAX_NODES:,} values (aliases counted as expanded)")
        if isinstance(item, (dict, list, set, tuple)):
            if depth >= MAX_DEPTH:
                raise DocumentError(f"{where}: {_at(path)}nested deeper than {MAX_DEPTH} levels")
            if id(item) in converted:
                parent[slot] = converted[id(item)]
                continue
            if isinstance(item, dict):
                out: Any = {}
                children: Iterator[tuple[Any, Any, str]] = (
                    (key, child, f"{path}.{key}" if path else str(key))
                    for key, child in ((_key(k, where, path), c) for k, c in item.items())
                )
            elif isinstance(item, set):
                out = {}
                children = ((key, None, f"{path}.{key}") for key in (_key(k, where, path) for k in item))
            else:
                out = [None] * len(item)
                children = ((index, child, f"{path}[{index}]") for index, child in enumerate(item))
            converted[id(item)] = out
            parent[slot] = out
            pending = [(out, key, child, depth + 1, child_path) for key, child, child_path in children]
            stack.extend(reversed(pending))
        else:
            parent[slot] = _scalar(item, where, path)
    return root[0]


def _scalar(item: Any, where: str, path: str) -> Any:
    if isinstance(item, bool) or item is None:
        return item
    if isinstance(item, int):
        if not INT64_MIN <= item <= INT64_MAX:
            raise DocumentError(f"{where}: {_at(path)}integer {str(item)[:20]}… does not fit in 64 bits")
        return item
    if isinstance(item, float):
        if not math.isfinite(item):
            raise DocumentError(f"{where}: {_at(path)}{item} is not a finite number (JSON has no NaN or Infinity)")
        return item
    if isinstance(item, bytes):
        item = item.decode("utf-8", errors="replace")
    elif isinstance(item, (dt.date, dt.datetime)):
        return item.isoformat()
    if isinstance(item, str):
        if "\x00" in item:
            raise DocumentError(f"{where}: {_at(path)}a string contains a NUL character")
        return item
    raise DocumentError(f"{where}: {_at(path)}a {type(item).__name__} is not a JSON value")


def _key(key: Any, where: str, path: str) -> str:
    """A mapping key as JSON text: YAML allows numbers, booleans and null as keys, JSON only strings."""
    if isinstance(key, str):
        text = key
    elif key is None or isinstance(key, (bool, int, float)):
        text = json.dumps(_scalar(key, where, path))
    elif isinstance(key, (dt.date, dt.datetime)):
        text = key.isoformat()
    else:
        raise DocumentError(f"{where}: {_at(path)}a {type(key).__name__} cannot be a mapping key")
    if "\x00" in text:
        raise DocumentError(f"{where}: {_at(path)}a key contains a NUL character")
    return text


def _at(path: str) -> str:
    """A field path leading a message, cut to 80 characters: its start names the field."""
    if not path:
        return ""
    return f"{path[:80]}…: " if len(path) > 80 else f"{path}: "


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number (JSON has no NaN or Infinity)")


def _check_size(text: str, source: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise DocumentError(f"{source}: larger than {MAX_TEXT_CHARS // (1024 * 1024)} MiB")
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise DocumentError(f"{source}:{line}: contains a NUL character")


def _check_events(text: str, source: str) -> None:
    """Walk the parser's events (flat, no recursion) and refuse what would blow up composing the nodes.

    Counts the depth, and the nodes with every alias expanded (an anchor's size is known when
    its node ends); an alias to a node still open would make a recursive structure. Keeps the
    path of keys and indexes to the current node, so a refusal names the field as well as the line.
    """
    try:
        _walk_events(yaml.parse(text, Loader=_LOADER), source)
    except yaml.MarkedYAMLError as exc:
        if _LOADER is yaml.SafeLoader or "maximum nesting depth" not in str(exc.problem):
            raise
        # libyaml (PyYAML 6.0.4 on) refuses flow nesting past 1000 levels while it scans ahead,
        # before its events reach the check here. Python's parser yields as it goes, so walking
        # again with it meets MAX_DEPTH first and names the field, as for any other document.
        _walk_events(yaml.parse(text, Loader=yaml.SafeLoader), source)
        raise


def _walk_events(events: Iterator[yaml.Event], source: str) -> None:
    sizes: dict[str, int] = {}
    open_frames: list[_Frame] = []
    open_anchors: set[str] = set()
    total = 0
    for event in events:
        if open_frames and isinstance(event, _NODES):
            open_frames[-1].next_item(event)
        if isinstance(event, yaml.AliasEvent):
            anchor = event.anchor or ""  # an alias always names its anchor (PyYAML types it optional)
            if anchor in open_anchors:
                raise DocumentError(f"{_where(source, event)}: alias *{anchor} refers to a node that contains it")
            total += sizes.get(anchor, 1)  # an undefined alias is the composer's error to report
        elif isinstance(event, yaml.ScalarEvent):
            total += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, _OPENING):
            total += 1
            if len(open_frames) >= MAX_DEPTH:
                path = _frames_path(open_frames)
                raise DocumentError(f"{_where(source, event)}: {_at(path)}nested deeper than {MAX_DEPTH} levels")
            open_frames.append(_Frame(event.anchor, total, isinstance(event, yaml.MappingStartEvent)))
            if event.anchor:
                open_anchors.add(event.anchor)
        elif isinstance(event, _CLOSING):
            frame = open_frames.pop()
            if frame.anchor:
                sizes[frame.anchor] = total - frame.opened + 1
                open_anchors.discard(frame.anchor)
        if total > MAX_NODES:
            raise DocumentError(
                f"{_where(source, event)}: more than {MAX_NODES:,} values (aliases counted as expanded)"
            )


class _Frame:
    """One open list or map of ``_check_events``: its anchor, the count when it opened, where it stands."""

    __slots__ = ("anchor", "opened", "mapping", "items", "key")

    def __init__(self, anchor: str | None, opened: int, mapping: bool) -> None:
        self.anchor, self.opened, self.mapping = anchor, opened, mapping
        self.items = 0  # nodes seen directly inside (keys and values alternate in a map)
        self.key: str | int = ""

    def next_item(self, event: yaml.Event) -> None:
        """A node starts directly inside this frame: remember the key or index it sits at."""
        if not self.mapping:
            self.key = self.items
        elif self.items % 2 == 0:  # a key: a scalar's text, "?" for a collection used as a key
            self.key = event.value if isinstance(event, yaml.ScalarEvent) else "?"
        self.items += 1


def _frames_path(frames: list[_Frame]) -> str:
    """The path (``spec.mounts[0].options``) to the node the innermost open frame is filling.

    Built to a little past the 80 characters ``_at`` shows, not through a hundred ``[0]``; empty
    when it holds no key (``[0][0][0]…`` from the root names no field).
    """
    if not any(isinstance(frame.key, str) for frame in frames[:40]):
        return ""
    path = ""
    for frame in frames:
        if len(path) > 80:
            break
        if isinstance(frame.key, int):
            path += f"[{frame.key}]"
        else:
            key = "".join(c if c.isprintable() else "?" for c in frame.key[:80])  # one line, whatever the key
            path += f".{key}" if path else key
    return path


def _where(source: str, event: yaml.Event) -> str:
    mark = event.start_mark
    return f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
