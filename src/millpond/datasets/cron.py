"""Is a data operation's ``schedule`` a cron expression Kubernetes' CronJob would accept?

A syntax check only (five fields within their ranges, or a macro such as ``@daily``): the
scheduler that runs ``policy: Cron`` operations computes the times; this refuses a typo
at ``apply`` instead of an operation that silently never runs.
"""

from __future__ import annotations

import re

MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_NAMES = {
    3: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
    4: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
}
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
_ITEM = re.compile(r"(?P<range>\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/(?P<step>[0-9]+))?")


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is not a valid schedule, or None when it is."""
    text = expression.strip()
    if text.startswith("@"):
        if text.lower() in MACROS or text.lower().startswith("@every "):
            return None
        return f"unknown macro {text.split()[0]}"
    fields = text.split()
    if len(fields) != 5:
        return f"expected 5 fields (minute hour day-of-month month day-of-week), found {len(fields)}"
    for index, (field, (name, low, high)) in enumerate(zip(fields, _FIELDS, strict=True)):
        for item in field.split(","):
            match = _ITEM.fullmatch(item)
            if not match or (match.group("step") is not None and int(match.group("step")) == 0):
                return f"{name} field {field!r} is not valid"
            if match.group("range") in ("*", "?"):
                continue
            for bound in match.group("range").split("-"):
                value = _value(bound, index)
                if value is None:
                    return f"{name} field {field!r}: {bound!r} is not a number"
                if not low <= value <= high:
                    return f"{name} field {field!r}: {bound} is outside {low}-{high}"
    return None


def _value(text: str, index: int) -> int | None:
    if text.isdigit():
        return int(text)
    names = _NAMES.get(index, [])
    upper = text.upper()
    if upper in names:
        return names.index(upper) + (1 if index == 3 else 0)
    return None
