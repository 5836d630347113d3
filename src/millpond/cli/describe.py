"""``millpond describe KIND NAME``: one object as ``kubectl describe`` shows it, for every kind of the registry.

Name, Namespace, Labels, Annotations, API Version and Kind; the server's metadata; the spec and the
status (all but conditions) as kubectl lays out a custom resource (keys in Title Case, nested
blocks indented, values of a block aligned); the conditions as a table; the family's events (a
training job's, recorded by its supervisor), or ``<none>``. The object comes from its kind's
handler (``millpond.kinds.REGISTRY``), so an unknown kind or a missing object is the same one
``error:`` line, with the same exit code, as ``millpond get`` gives.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from millpond.cli.resources import NAMESPACE

if TYPE_CHECKING:
    from millpond.kind_handler import KindEvent

_DEPTH = 8  # deeper than this, a block is shown as "…": a summary, not a dump
_ITEMS = 50  # list items shown before "… (N more)"
_NONE = "<none>"
_ACRONYMS = frozenset({"api", "uid", "url", "uri", "id", "ip", "gpu", "cpu", "ttl"})


@click.command("describe")
@click.argument("kind", metavar="KIND")
@click.argument("name")
@NAMESPACE
def describe_command(kind: str, name: str, namespace: str) -> None:
    """Show the object NAME of KIND in detail: metadata, spec, status, conditions and events."""
    from millpond.kind_handler import KindContext
    from millpond.kinds import REGISTRY
    from millpond.settings import load_settings

    entry = REGISTRY.resolve(kind)
    handler, context = REGISTRY.handler(entry), KindContext(load_settings())
    shown = handler.get(entry, name, namespace, context)
    described = getattr(handler, "described", None)  # a family that shows an object otherwise (a Secret's sizes)
    if described is not None:
        shown = described(entry, shown, context)
    sys.stdout.write(describe_text(shown, handler.events(entry, name, namespace, context)))


def title(key: str) -> str:
    """kubectl's heading of a field: ``mountPoint`` is ``Mount Point``, ``uid`` ``UID``."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key).split(" ")
    return " ".join(word.upper() if word.lower() in _ACRONYMS else (word[:1].upper() + word[1:]) for word in words)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def _pairs(mapping: Mapping[str, Any] | None) -> list[str]:
    """Labels or annotations, ``key=value`` each (``<none>`` for none)."""
    return [f"{key}={value}" for key, value in sorted((mapping or {}).items())] or [_NONE]


def _block(value: Any, indent: int, depth: int = 0) -> list[str]:
    """A nested value as kubectl describe lays out a custom resource's fields."""
    pad = " " * indent
    if depth >= _DEPTH:
        return [f"{pad}…"]
    if isinstance(value, Mapping):
        scalars = [key for key, item in value.items() if not isinstance(item, (Mapping, list))]
        width = max((len(title(str(key))) for key in scalars), default=0)
        lines = []
        for key, item in value.items():
            if isinstance(item, (Mapping, list)):
                lines.append(f"{pad}{title(str(key))}:")
                lines += _block(item, indent + 2, depth + 1) if item else [f"{pad}  {_NONE}"]
            else:
                lines.append(f"{pad}{(title(str(key)) + ':').ljust(width + 1)}  {_scalar(item)}".rstrip())
        return lines
    if isinstance(value, list):
        lines = []
        for item in value[:_ITEMS]:
            lines += _block(item, indent, depth + 1) if isinstance(item, (Mapping, list)) else [f"{pad}{_scalar(item)}"]
        if len(value) > _ITEMS:
            lines.append(f"{pad}… ({len(value) - _ITEMS} more)")
        return lines
    return [f"{pad}{_scalar(value)}"]


def _table(headers: Sequence[str], rows: list[list[str]], indent: int) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    dashes = ["-" * len(header) for header in headers]
    return [(" " * indent + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))).rstrip()
            for line in [list(headers), dashes, *rows]]


def _labelled(label: str, values: list[str]) -> list[str]:
    """``Labels:       a=b`` with further values aligned under the first, as kubectl does."""
    head = f"{label + ':':<14}"
    return [head + values[0], *(" " * 14 + value for value in values[1:])]


def describe_text(shown: Mapping[str, Any], events: Sequence[KindEvent]) -> str:
    """The object ``shown`` (as ``get -o json`` prints it) and its events, as ``kubectl describe`` prints them."""
    metadata = shown.get("metadata") or {}
    lines = _labelled("Name", [str(metadata.get("name", ""))])
    if metadata.get("namespace"):
        lines += _labelled("Namespace", [str(metadata["namespace"])])
    lines += _labelled("Labels", _pairs(metadata.get("labels")))
    lines += _labelled("Annotations", _pairs(metadata.get("annotations")))
    lines += _labelled("API Version", [str(shown.get("apiVersion", ""))])
    lines += _labelled("Kind", [str(shown.get("kind", ""))])
    server = {key: value for key, value in metadata.items()
              if key not in ("name", "namespace", "labels", "annotations")}
    if server:
        lines += ["Metadata:", *_block(server, 2)]
    body = {key: value for key, value in shown.items() if key not in ("apiVersion", "kind", "metadata", "status")}
    for key, value in body.items():
        lines += [f"{title(key)}:", *(_block(value, 2) if value not in (None, {}, []) else [f"  {_NONE}"])]
    status = dict(shown.get("status") or {})
    conditions = status.pop("conditions", None) or []
    lines += ["Status:", *(_block(status, 2) if status else [f"  {_NONE}"])]
    rows = [[_scalar(c.get(key)) for key in ("type", "status", "reason", "message")]
            for c in conditions if isinstance(c, Mapping)]
    lines += ["Conditions:", *(_table(("Type", "Status", "Reason", "Message"), rows, 2) if rows else [f"  {_NONE}"])]
    if events:
        lines += ["Events:", *_table(("Type", "Reason", "Age", "From", "Message"),
                                     [[e.type, e.reason, e.age, e.source, e.message] for e in events], 2)]
    else:
        lines.append(f"Events:{' ' * 7}{_NONE}")
    return "\n".join(lines) + "\n"
