"""What ``fieldValidation`` makes of an unknown field (``null`` values are pruned for every apply, in
``millpond.kinds``, as the API server prunes them).

``fieldValidation`` decides what an unknown field does:
``Strict`` (kubectl's default, ``--validate=strict``) refuses it, ``Warn`` drops it with a
``Warning`` header, ``Ignore`` drops it silently. millpond's families already name an unknown field
in their one error line (``unknown field "spec.foo"``); this module reads that line back, drops the
field and checks again, so the schema knowledge stays in one place (each family's checks).
"""

from __future__ import annotations

import re
from typing import Any

_UNKNOWN = re.compile(r'unknown fields? ((?:"[^"]+"(?:, )?)+)')
_QUOTED = re.compile(r'"([^"]+)"')
_PART = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")
VALIDATIONS = ("Strict", "Warn", "Ignore")


def unknown_fields(message: str) -> list[str]:
    """The field paths an error line calls unknown (``spec.foo``, ``spec.containers[0].bar``); none: another error."""
    found = _UNKNOWN.search(message)
    return _QUOTED.findall(found.group(1)) if found else []


def drop(doc: dict[str, Any], path: str) -> bool:
    """Remove the field at ``path`` from ``doc``; False when it is not there (the line named something else)."""
    parts: list[str | int] = []
    for name, index in _PART.findall(path):
        parts.append(int(index) if index.isdigit() else (name or index))
    node: Any = doc
    for part in parts[:-1]:
        if isinstance(part, int) and isinstance(node, list) and part < len(node):
            node = node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return False
    last = parts[-1] if parts else None
    if isinstance(node, dict) and isinstance(last, str) and last in node:
        del node[last]
        return True
    return False
