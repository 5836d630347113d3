"""How a manifest's fields and values appear in an error line: ``spec.mounts[0].mountPoint: "x" …``.

Paths read as kubectl writes them; values are shown short (a long string is cut, a list or a
map is named, not dumped), so one line stays one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def field_path(parts: Iterable[str | int]) -> str:
    """``["spec", "mounts", 0, "options", "a.b"]`` → ``spec.mounts[0].options[a.b]``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:  # a newline or control character in a key stays escaped: the error stays one line
            text += f"[{part if part.isprintable() else part.encode('unicode_escape').decode('ascii')}]"
    return text


def show(value: Any, limit: int = 80) -> str:
    """A value as JSON, cut to ``limit`` characters; containers by their type."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 2] + "…" + text[-1:]
