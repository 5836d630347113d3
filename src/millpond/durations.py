"""Durations: one parser per notation, each exactly as its upstream reads it.

Three notations reach millpond, and each field says which one it holds:

- **Go** (``time.ParseDuration``): ``1m30s``, ``1.5h``, ``300ms``, ``1h2m3.5s``, ``-1s``; units
  ``ns us µs ms s m h``; no bare number but ``0``. The Kubernetes world's notation, so the one
  for millpond's own annotation ``data.millpond.io/metadata-ttl`` (a negative TTL: never re-list).
- **protobuf JSON** (``google.protobuf.Duration`` as ``protojson`` reads it): seconds with an
  ``s``, at most nine decimals, ``3.5s``, ``90s``, ``-0.5s``. KFP IR holds these:
  ``retryPolicy.backoffDuration`` and ``backoffMaxDuration`` (the SDK writes ``f"{seconds}s"``).
  ``1m30s`` is not one, and the KFP backend (Go, ``protojson``) refuses it: so does millpond,
  where it used to wait 0 s.
- **Alluxio** (``FormatUtils.parseTimeSize``): an integer and an optional unit, any case:
  ``ms``/``millisecond`` (also no unit: a bare number is milliseconds), ``s``/``sec``/``second``,
  ``m``/``min``/``minute``, ``h``/``hr``/``hour``, ``d``/``day``; ``-1``. A Fluid runtime's
  ``properties`` go to Alluxio as they are, so ``alluxio.user.file.metadata.sync.interval``
  is read this way (``60000`` is a minute; ``-1``: never re-list).
- **ISO 8601** as KFP v1's cache server reads ``max_cache_staleness`` (Go's
  ``peterhellberg/duration``): ``P30D``, ``PT1H30M``, ``P1W``, ``P1Y2M``, ``P0D``; whole numbers
  only; a week is 168 hours, a month 730.4841667 hours and a year 8765.81 hours, as there.

Each returns a :class:`Duration` (whole nanoseconds) or raises :class:`DurationError`, which
names the value and the notation.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from millpond.errors import UserError

_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_DIGITS = "0123456789"
_U63 = 1 << 63
PROTOBUF_MAX_SECONDS = 315_576_000_000  # ±10,000 years, google/protobuf/duration.proto
_ALLUXIO_MS = {
    "": 1, "ms": 1, "millisecond": 1,
    "s": 1000, "sec": 1000, "second": 1000,
    "m": 60_000, "min": 60_000, "minute": 60_000,
    "h": 3_600_000, "hr": 3_600_000, "hour": 3_600_000,
    "d": 86_400_000, "day": 86_400_000,
}
_JAVA_LONG_MAX = 2**63 - 1
# peterhellberg/duration's hours per unit, so a staleness means what it meant on KFP v1.
_ISO_HOURS = {"Y": 8765.81, "M": 730.4841667, "W": 168.0, "D": 24.0}
_ISO_TIME_SECONDS = {"H": 3600, "M": 60, "S": 1}
_ISO_FORM = "write P, then nY nM nW nD, then T and nH nM nS, such as P30D, PT1H30M or P0D"


class DurationError(UserError, ValueError):
    """Not a duration in the notation its field takes: bad input (exit 2, HTTP 400); names the value.

    Also a ValueError, so a caller that treats any unparsable value alike needs no second clause.
    """


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time in whole nanoseconds (negative allowed, as Go and protobuf allow it)."""

    nanoseconds: int

    @property
    def seconds(self) -> float:
        return self.nanoseconds / 1e9

    def __str__(self) -> str:
        """As Go's ``Duration.String()`` prints it: ``1h2m3.5s``, ``1.5µs``, ``0s`` (parses back to itself)."""
        u, negative = abs(self.nanoseconds), self.nanoseconds < 0
        if u == 0:
            return "0s"
        if u < 10**9:
            precision, unit = (0, "ns") if u < 10**3 else (3, "µs") if u < 10**6 else (6, "ms")
            fraction, u = _fraction(u, precision)
            text = f"{u}{fraction}{unit}"
        else:
            fraction, u = _fraction(u, 9)
            text = f"{u % 60}{fraction}s"
            u //= 60
            if u:
                text = f"{u % 60}m{text}"
                u //= 60
                if u:
                    text = f"{u}h{text}"
        return f"-{text}" if negative else text

    def protobuf_json(self) -> str:
        """As protobuf's JSON prints it: ``90s``, ``3.500s``, ``-0.000000001s`` (0, 3, 6 or 9 decimals)."""
        sign = "-" if self.nanoseconds < 0 else ""
        seconds, nanos = divmod(abs(self.nanoseconds), 10**9)
        text = f"{seconds}.{nanos:09d}"
        for tail in ("000", "000", ".000"):
            text = text.removesuffix(tail)
        return f"{sign}{text}s"


def _fraction(value: int, precision: int) -> tuple[str, int]:
    """Go's fmtFrac: the last ``precision`` digits of ``value`` as ``.123`` without trailing zeros, and the rest."""
    digits, printing = "", False
    for _ in range(precision):
        digit, value = value % 10, value // 10
        printing = printing or digit != 0
        if printing:
            digits = f"{digit}{digits}"
    return (f".{digits}" if printing else ""), value


_GO_FORM = "write a number and a unit for each part, such as 90s, 1m30s, 1.5h or 300ms; units ns, us, µs, ms, s, m, h"
_PROTOBUF_FORM = "write seconds with an s, such as 90s, 3.5s or 0.250s"
_ALLUXIO_FORM = "write a whole number and a unit: 60000 (ms), 30s, 5min, 1h, 1d; -1 for never"


def _refusal(what: str, text: object, notation: str, form: str, problem: str) -> DurationError:
    """``quota '1m30s' is not a protobuf Duration (only seconds…; write seconds with an s, such as 90s…)``."""
    return DurationError(f"{what} {text!r}".lstrip() + f" is not {notation} ({problem}; {form})")


def parse_go_duration(text: object, what: str = "") -> Duration:
    """``text`` as Go's ``time.ParseDuration`` reads it (the same overflow and rounding rules).

    ``what`` names the field in the error; DurationError says what is wrong and shows the form.
    """

    invalid = functools.partial(_refusal, what, text, "a Go duration", _GO_FORM)

    if not isinstance(text, str):
        raise invalid("it is not a string")
    rest, negative = text, False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return Duration(0)
    if not rest:
        raise invalid("it is empty")
    total = 0
    while rest:
        if rest[0] != "." and rest[0] not in _DIGITS:
            raise invalid(f"{rest[0]!r} where a number should start")
        whole, i = 0, 0
        while i < len(rest) and rest[i] in _DIGITS:
            if whole > _U63 // 10:
                raise invalid("it overflows")
            whole = whole * 10 + _DIGITS.index(rest[i])
            if whole > _U63:
                raise invalid("it overflows")
            i += 1
        before_point, rest = i > 0, rest[i:]
        fraction, scale, after_point = 0, 1.0, False
        if rest[:1] == ".":
            rest, i, overflow = rest[1:], 0, False
            while i < len(rest) and rest[i] in _DIGITS:
                if not overflow:  # past 2^63 Go stops adding precision, silently
                    bigger = fraction * 10 + _DIGITS.index(rest[i])
                    if fraction > (_U63 - 1) // 10 or bigger > _U63:
                        overflow = True
                    else:
                        fraction, scale = bigger, scale * 10
                i += 1
            after_point, rest = i > 0, rest[i:]
        if not before_point and not after_point:
            raise invalid("a point with no digits")
        i = 0
        while i < len(rest) and rest[i] != "." and rest[i] not in _DIGITS:
            i += 1
        if i == 0:
            raise invalid("a number has no unit")
        unit_name, rest = rest[:i], rest[i:]
        unit = _NS.get(unit_name)
        if unit is None:
            raise invalid(f"unknown unit {unit_name!r}")
        if whole > _U63 // unit:
            raise invalid("it overflows")
        whole *= unit
        if fraction:
            whole += int(float(fraction) * (float(unit) / scale))  # float64, as Go: nanosecond-exact up to hours
            if whole > _U63:
                raise invalid("it overflows")
        total += whole
        if total > _U63:
            raise invalid("it overflows")
    if negative:
        return Duration(-total)
    if total > _U63 - 1:
        raise invalid("it overflows")
    return Duration(total)


def parse_protobuf_duration(text: object, what: str = "") -> Duration:
    """``text`` as protobuf's JSON reads a ``google.protobuf.Duration`` (Go ``protojson``, the KFP backend's).

    Optional sign, seconds without leading zeros, at most nine decimals, an ``s``; ``1.s`` and
    ``.5s`` included; within ±315,576,000,000 s.
    """

    invalid = functools.partial(_refusal, what, text, "a protobuf Duration", _PROTOBUF_FORM)

    if not isinstance(text, str):
        raise invalid("it is not a string")
    if not text.endswith("s"):
        raise invalid("it does not end in s" if text else "it is empty")
    if len(text) < 2:
        raise invalid("no number")
    body, negative = text[:-1], False
    if body[0] in "+-":
        negative, body = body[0] == "-", body[1:]
    if not body:
        raise invalid("no number")
    seconds_text = ""
    if body[0] == "0":
        body = body[1:]
    elif body[0] in "123456789":
        n = 1
        while n < len(body) and body[n] in _DIGITS:
            n += 1
        seconds_text, body = body[:n], body[n:]
    elif body[0] != ".":
        raise invalid(f"{body[0]!r} where the seconds should start")
    nanos = 0
    if body:
        if body[0] != ".":
            raise invalid("only seconds: no other unit, no leading zero")
        digits, body = body[1:10], body[10:]
        n = 0
        while n < len(digits) and digits[n] in _DIGITS:
            n += 1
        if n < len(digits) or body:
            raise invalid("at most nine decimals, then s")
        nanos = int(digits.ljust(9, "0"))
    if len(seconds_text) > 19 or (seconds_text and int(seconds_text) > _U63 - 1):
        raise invalid("the seconds do not fit in 64 bits")
    seconds = int(seconds_text or "0")
    if seconds > PROTOBUF_MAX_SECONDS:
        raise invalid(f"out of range: at most {PROTOBUF_MAX_SECONDS} seconds either way")
    total = seconds * 10**9 + nanos
    return Duration(-total if negative else total)


def parse_alluxio_duration(text: object, what: str = "") -> Duration:
    """``text`` as Alluxio's ``FormatUtils.parseTimeSize`` reads it: ``-1``, ``60000`` (ms), ``5min``, ``1h``.

    An integer, optionally negative, and a unit in any case; no unit is milliseconds. The value
    is a Java double times the unit, cut to a long as Java does.
    """
    invalid = functools.partial(_refusal, what, text, "an Alluxio duration", _ALLUXIO_FORM)
    raw = str(text) if isinstance(text, int) and not isinstance(text, bool) else text
    if not isinstance(raw, str):
        raise invalid("it is not a string or an integer")
    number = raw[1:] if raw.startswith("-") else raw
    i = 0
    while i < len(number) and number[i] in _DIGITS:
        i += 1
    digits, unit_name = number[:i], number[i:]
    letters = not unit_name or (unit_name.isascii() and unit_name.isalpha())
    unit = _ALLUXIO_MS.get(unit_name.lower()) if letters else None
    if not digits:
        raise invalid("no whole number")
    if unit is None:
        raise invalid(f"unknown unit {unit_name!r}" if letters else "not a whole number and a unit")
    millis = min(int(float(digits) * unit + 0.0001), _JAVA_LONG_MAX)  # Java: (long) (douTime * unit + alpha)
    return Duration((-millis if raw.startswith("-") else millis) * 10**6)


def parse_iso8601_duration(text: object, what: str = "") -> Duration:
    """``text`` as KFP v1's cache server reads ``max_cache_staleness``: ``P30D``, ``PT1H``, ``P1Y2M3DT4H5M6S``.

    Whole numbers, each unit at most once and in order; ``P`` alone is refused (as there).
    """
    invalid = functools.partial(_refusal, what, text, "an ISO 8601 duration", _ISO_FORM)
    if not isinstance(text, str) or not text.startswith("P") or len(text) > 64:
        raise invalid("it does not start with P" if isinstance(text, str) else "it is not a string")
    date, _, clock = text[1:].partition("T")
    if "T" in text[1:] and not clock:
        raise invalid("nothing after T")
    hours = _iso_parts(date, "YMWD", invalid)
    seconds = _iso_parts(clock, "HMS", invalid)
    if not date and not clock:
        raise invalid("no number")
    total = sum(n * _ISO_HOURS[unit] * 3600 for unit, n in hours.items())
    total += sum(n * _ISO_TIME_SECONDS[unit] for unit, n in seconds.items())
    if total > PROTOBUF_MAX_SECONDS:
        raise invalid(f"out of range: at most {PROTOBUF_MAX_SECONDS} seconds")
    return Duration(int(round(total * 10**9)))


def _iso_parts(text: str, units: str, invalid: functools.partial[DurationError]) -> dict[str, int]:
    """``1Y2M`` -> {Y: 1, M: 2}: digits then a unit, units in ``units``' order, each once."""
    parts: dict[str, int] = {}
    digits, order = "", -1
    for char in text:
        if char in _DIGITS:
            digits += char
            continue
        position = units.find(char)
        if not digits or position <= order:
            raise invalid(f"{char!r} is not where a number's unit can be" if digits else f"no number before {char!r}")
        parts[char], digits, order = int(digits), "", position
    if digits:
        raise invalid(f"the number {digits} has no unit")
    return parts
