"""Unfilled placeholders in copied samples: ``{{$minio-addr}}``, ``<bucket-name>``.

Fluid's documentation writes values the reader must fill in. Applied as they are, they
would fail much later (a bucket that cannot exist, a host that does not resolve), so the
manifest is refused at once, naming the field.
"""

from __future__ import annotations

import re

from millpond.datasets.fields import show

_TEMPLATE = re.compile(r"\{\{.*?\}\}")
_ANGLE = re.compile(r"<[A-Za-z][A-Za-z0-9_. -]*>")


def unfilled(text: str, *, angle_anywhere: bool = False) -> str | None:
    """The placeholder in ``text``, if any.

    ``{{…}}`` counts anywhere; ``<name>`` only as the whole value, or anywhere when
    ``angle_anywhere`` (URIs, where ``<`` has no business).
    """
    match = _TEMPLATE.search(text)
    if match:
        return match.group(0)
    match = _ANGLE.search(text) if angle_anywhere else _ANGLE.fullmatch(text.strip())
    return match.group(0) if match else None


def placeholder_message(text: str, placeholder: str) -> str:
    return f"{show(text)} holds an unfilled template placeholder {placeholder}: replace it with a real value"

