"""Kubernetes quantities: the one parser for every size, CPU amount and count millpond reads.

A quantity is what ``k8s.io/apimachinery``'s ``resource.ParseQuantity`` reads: a Fluid
runtime's ``tieredstore`` ``quota`` and ``quotaList``, a KFP task's CPU and memory requests and
limits, an accelerator count. One notation, so one parser: ``500m`` is half a CPU in a pipeline
and half a byte (rounded up to one) in a quota, as in Kubernetes, and ``2GiB`` is refused in
both places. Fluid *prints* sizes as ``2.00GiB`` in status (``datasets/quantity.format_bytes``),
but its controller reads quotas with ``resource.ParseQuantity`` (``pkg/ddc/base/runtime.go``,
``convertToTieredstoreInfo``) and its CRDs give ``quota`` the Quantity pattern, so upstream
refuses ``2GiB`` at apply; millpond follows upstream.

The grammar and the arithmetic are upstream's, exactly (``quantity.go``):

- ``<sign>? <digits>? (. <digits>?)? <suffix>``, matched by the regular expression upstream
  names in its error, ``^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$``, then scanned as
  upstream scans it (so ``1.``, ``.5``, ``1.G`` parse; so do upstream's oddities ``.``, ``-``
  and a bare ``Ki``, which are zero). No whitespace anywhere.
- suffixes: decimal SI ``n u m "" k M G T P E``, binary SI ``Ki Mi Gi Ti Pi Ei``, or a decimal
  exponent ``e``/``E`` followed by a signed integer (``1e3``, ``1.5E-3``). ``K``, ``KB``, ``GiB``,
  ``mi`` are refused.
- the value is exact (``Fraction``, never a float), kept to nanos: a finer non-zero value is
  rounded away from zero to the next nano (``0.9n`` is ``1n``), as upstream does.
- ``value()``/``bytes`` are upstream's ``Value()`` (rounded up, away from zero: ``500m`` is one
  byte), ``milli_value()``/``cores`` its ``MilliValue()`` (the scheduler's view of CPU).

One deliberate difference: upstream silently caps a binary-SI quantity at 2^63-1 (``9Ei`` parses
as ``8Ei`` less one) and lets a decimal one grow past int64 where ``Value()`` then overflows.
millpond refuses any quantity whose magnitude exceeds 2^63-1 (``999999999999Ei``, ``1e30``)
with a :class:`QuantityError` naming it: no machine has that much, and a silent cap hides a typo.
An exponent outside int32 (which upstream truncates to int32) is refused the same way.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from fractions import Fraction

from millpond.errors import UserError

INT64_MAX = 2**63 - 1
NANOS = 10**9

# The regular expression upstream's ErrFormatWrong names; the groups below split it as upstream's scanner does.
CANONICAL_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_SPLIT = re.compile(r"(?P<sign>[+-]?)(?P<num>[0-9]*)(?:\.(?P<denom>[0-9]*))?(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)

_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL_SI.items()}
_BINARY_SUFFIX = {exponent: suffix for suffix, exponent in _BINARY_SI.items()}


class QuantityError(UserError, ValueError):
    """Not a Kubernetes quantity, or one beyond int64: bad input (exit 2, HTTP 400); the message names the value.

    Also a ValueError, so a caller that treats any unparsable value alike needs no second clause.
    """


class Format(str, enum.Enum):
    """How a quantity was written, and so how it prints again (upstream's ``Format``)."""

    DECIMAL_SI = "DecimalSI"  # 12M, 500m
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6


def _away_from_zero(value: Fraction) -> int:
    """The integer next to ``value`` away from zero (upstream's rounding for Value and MilliValue)."""
    magnitude = -((-abs(value.numerator)) // value.denominator)
    return magnitude if value >= 0 else -magnitude


@dataclass(frozen=True)
class Quantity:
    """An exact quantity (a whole number of nanos) and the format it prints in."""

    amount: Fraction
    format: Format = Format.DECIMAL_SI

    def value(self) -> int:
        """Upstream's ``Value()``: the amount rounded up, away from zero (``1.5`` → 2, ``-1.5`` → -2)."""
        return _away_from_zero(self.amount)

    def milli_value(self) -> int:
        """Upstream's ``MilliValue()``: thousandths, rounded up away from zero (``0.1m`` → 1)."""
        return _away_from_zero(self.amount * 1000)

    @property
    def bytes(self) -> int:
        """A size in bytes, as Kubernetes reads memory and storage: ``Value()`` (``500m`` is one byte)."""
        return self.value()

    @property
    def cores(self) -> float:
        """CPUs, as the scheduler counts them: whole millicores (``MilliValue() / 1000``; ``0.1m`` is ``1m``)."""
        return self.milli_value() / 1000

    def __str__(self) -> str:
        """Upstream's canonical form: ``1.5Gi`` → ``1536Mi``, ``0.5`` → ``500m``, ``1000M`` → ``1G``."""
        if self.amount == 0:
            return "0"
        sign = "-" if self.amount < 0 else ""
        magnitude = abs(self.amount)
        if self.format is Format.BINARY_SI and magnitude >= 1024 and magnitude.denominator == 1:
            number, exponent = magnitude.numerator, 0
            while number % 1024 == 0 and exponent < 60:
                number, exponent = number // 1024, exponent + 10
            return f"{sign}{number}{_BINARY_SUFFIX.get(exponent, '')}"
        number, exponent = int(magnitude * NANOS), -9  # parse keeps whole nanos
        while number % 1000 == 0:
            number, exponent = number // 1000, exponent + 3
        if self.format is not Format.DECIMAL_EXPONENT and exponent in _DECIMAL_SUFFIX:
            return f"{sign}{number}{_DECIMAL_SUFFIX[exponent]}"
        return f"{sign}{number}" + (f"e{exponent}" if exponent else "")


def _nanos(digits: str, scale10: int, exponent2: int) -> int:
    """``int(digits) × 10^scale10 × 2^exponent2`` in nanos, rounded up (away from zero); digits has no leading 0.

    Huge inputs cost nothing: only the digits that reach a nano are turned into a number. A
    binary nano boundary has at most 9 + exponent2 decimals, so digits cut after that many
    decimals decide the rounding as the whole would.
    """
    order = len(digits) + scale10  # the value before the binary factor is below 10^order
    decimals = 9 + exponent2
    keep = max(0, order + decimals)
    kept, rest = digits[:keep], digits[keep:]
    if not kept:  # below one nano (after the binary factor): rounds up to one
        return 1
    truncated: Fraction = Fraction(int(kept or "0")) * Fraction(10) ** (scale10 + len(rest)) * 2**exponent2 * NANOS
    if rest.strip("0"):
        return truncated.numerator // truncated.denominator + 1
    return -((-truncated.numerator) // truncated.denominator)


_TOO_LARGE = "is too large: Kubernetes quantities stop at 2^63-1 (9223372036854775807, just under 8Ei)"


def parse_quantity(text: object, what: str = "") -> Quantity:
    """``text`` (a string, or an int or float from YAML) as upstream's ``ParseQuantity`` reads it.

    ``what`` names the field in the error (``quota``, ``memory request``); QuantityError names the value.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise QuantityError(f"{what} {text!r} is not a Kubernetes quantity (such as 150Gi, 500m, 2 or 1e9)".lstrip())
    if isinstance(text, int) and abs(text) > INT64_MAX:  # also spares repr() of a 5000-digit YAML integer
        raise QuantityError(f"{what or 'the quantity'} {_TOO_LARGE}")
    raw = text if isinstance(text, str) else repr(text)
    shown = f"{what} {raw!r}".lstrip()
    match = _SPLIT.fullmatch(raw)
    if not raw or match is None:
        hint = f"; sizes take no B: write {raw[:-1]!r}" if raw.endswith("B") and _SPLIT.fullmatch(raw[:-1]) else ""
        raise QuantityError(
            f"{shown} is not a Kubernetes quantity: it must match {CANONICAL_PATTERN} "
            f"(such as 150Gi, 500m, 2 or 1e9){hint}"
        )
    suffix = match["suffix"]
    exponent2 = 0
    if suffix in _DECIMAL_SI:
        exponent10, form = _DECIMAL_SI[suffix], Format.DECIMAL_SI
    elif suffix in _BINARY_SI:
        exponent10, exponent2, form = 0, _BINARY_SI[suffix], Format.BINARY_SI
    elif len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix[1:]):
        exponent10, form = int(suffix[1:]), Format.DECIMAL_EXPONENT
        if not _INT32[0] <= exponent10 <= _INT32[1]:
            raise QuantityError(f"{shown} is out of range: its exponent does not fit in 32 bits")
    else:
        raise QuantityError(
            f"{shown} has an unknown suffix {suffix!r} (use n, u, m, k, M, G, T, P, E, "
            "Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3)"
        )
    denom = match["denom"] or ""
    digits = (match["num"] + denom).lstrip("0")
    nanos = 0
    if digits:
        if len(digits) + exponent10 - len(denom) > 19:  # at least 10^19 before any binary factor
            nanos = INT64_MAX * NANOS + 1
        else:
            nanos = _nanos(digits, exponent10 - len(denom), exponent2)
    if nanos > INT64_MAX * NANOS:
        raise QuantityError(f"{shown} {_TOO_LARGE}")
    amount = Fraction(-nanos if match["sign"] == "-" else nanos, NANOS)
    if form is Format.BINARY_SI and 0 < abs(amount) < 1:
        form = Format.DECIMAL_SI  # as upstream: a binary suffix on less than one prints in decimal
    return Quantity(amount, form)


def parse_bytes(text: object, what: str = "") -> int:
    """A size in bytes (``Value()`` of the quantity, so ``500m`` is 1), refusing a negative one."""
    size = parse_quantity(text, what).bytes
    if size < 0:
        raise QuantityError(f"{what} {text!r} is negative: a size is at least 0".lstrip())
    return size
