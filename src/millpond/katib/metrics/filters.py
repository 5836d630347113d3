"""Katib's ``filter.metricsFormat``: the regexes that find ``name=value`` pairs in a trial's text log.

Katib compiles them with Go's ``regexp`` (RE2 syntax), so millpond compiles them with RE2 too
(``google-re2``, which cel-python already brings): a filter Katib refuses is refused here, one it
accepts means the same, ``\\w`` and ``\\d`` stay ASCII as in Go, and no filter can backtrack for ever
on a long log line. The first group is the metric's name, the second its value (Katib's rule).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

from millpond.errors import UserError

# Katib's common.DefaultFilter: "loss=0.3", "accuracy=.98", "Score=-7.53e-05", "Score=1E0", "acc-top5 = 1".
DEFAULT_FILTER = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print its own line on stderr; the UserError is the one line
# Katib's validator: "the filter regular expression must have two top subexpressions".
_TWO_GROUPS = re2.compile(r".*\(.*\).*\(.*\).*", options=_OPTIONS)


def check(metrics_format: Sequence[str], path: str) -> None:
    """Refuse a filter Katib's webhook refuses, naming ``path[i]``."""
    for index, pattern in enumerate(metrics_format):
        where = f"{path}[{index}]"
        if not isinstance(pattern, str):
            raise UserError(f"{where}: must be a string (a regular expression)")
        try:
            _compiled(pattern)
        except re2.error as exc:
            reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise UserError(f"{where}: invalid filter: {json.dumps(reason, ensure_ascii=False)[1:-1]}") from None
        if _TWO_GROUPS.search(pattern) is None:
            raise UserError(f"{where}: two top subexpressions are required: the metric's name and its value")


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, options=_OPTIONS)


def pairs(line: str, metrics_format: Sequence[str]) -> list[tuple[str, str]]:
    """Every (name, value) the filters find in ``line``, in the filters' order, then the line's.

    As Katib's ``FindAllStringSubmatch``: each match's first and second group, trimmed; a filter with
    fewer than two groups finds nothing, a group that did not take part reads as "".
    """
    found: list[tuple[str, str]] = []
    for pattern in metrics_format or (DEFAULT_FILTER,):
        regex = _compiled(pattern)
        if regex.groups < 2:
            continue
        for match in regex.finditer(line):
            found.append(((match.group(1) or "").strip(), (match.group(2) or "").strip()))
    return found
