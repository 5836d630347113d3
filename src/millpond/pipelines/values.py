"""The one place that converts KFP parameter values between text, JSON and Python.

KFP's IR types every parameter (NUMBER_INTEGER, NUMBER_DOUBLE, STRING, BOOLEAN, LIST,
STRUCT, TASK_FINAL_STATUS); users hand values in as command-line text or JSON, and
container components hand them back as the text of an output file.

Integers are 64-bit, as the IR's integer fields and the KFP backend (Go ``int64``) hold them;
doubles are finite; JSON values obey ``millpond.documents``' limits (depth, size, no NUL).
"""

from __future__ import annotations

import json
import math
from typing import Any

from millpond.documents import INT64_MAX, INT64_MIN, DocumentError, check_value, load_json
from millpond.errors import UserError

PARAMETER_TYPES = ("NUMBER_INTEGER", "NUMBER_DOUBLE", "STRING", "BOOLEAN", "LIST", "STRUCT", "TASK_FINAL_STATUS")

_TYPE_WORDS = {
    "NUMBER_INTEGER": "an integer",
    "NUMBER_DOUBLE": "a number",
    "STRING": "a string",
    "BOOLEAN": "a boolean (true or false)",
    "LIST": "a JSON list",
    "STRUCT": "a JSON object",
    "TASK_FINAL_STATUS": "a JSON object",
}


def describe_type(parameter_type: str) -> str:
    return _TYPE_WORDS.get(parameter_type, parameter_type)


def _bad(where: str, parameter_type: str, shown: str) -> UserError:
    return UserError(f"{where}: expected {describe_type(parameter_type)}, got {shown}")


def parse_text(text: str, parameter_type: str, where: str) -> Any:
    """Parse a value typed on a command line (``-p NAME=VALUE``) into its typed form."""
    shown = repr(text)
    if parameter_type == "STRING":
        return text
    if parameter_type == "NUMBER_INTEGER":
        try:
            return _int64(int(text.strip()), where)
        except ValueError:
            raise _bad(where, parameter_type, shown[:60]) from None
    if parameter_type == "NUMBER_DOUBLE":
        try:
            value = float(text.strip())
        except (ValueError, OverflowError):
            raise _bad(where, parameter_type, shown) from None
        if not math.isfinite(value):
            raise _bad(where, parameter_type, shown)
        return value
    if parameter_type == "BOOLEAN":
        lowered = text.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise _bad(where, parameter_type, shown)
    if parameter_type in ("LIST", "STRUCT", "TASK_FINAL_STATUS"):
        try:
            value = load_json(text, where)
        except DocumentError as exc:
            problem = str(exc).removeprefix(where).lstrip(":0123456789 ")
            raise UserError(
                f"{where}: expected {describe_type(parameter_type)}, got invalid JSON ({problem})"
            ) from None
        return check_json(value, parameter_type, where)
    raise UserError(f"{where}: unknown parameter type {parameter_type!r}")


def check_json(value: Any, parameter_type: str, where: str) -> Any:
    """Check a JSON value (from a params file, an API body or the IR) against its type; ints widen to doubles."""
    check_value(value, where)
    shown = f"{json.dumps(value)[:60]} ({type(value).__name__})"
    if parameter_type == "STRING":
        if isinstance(value, str):
            return value
        raise _bad(where, parameter_type, shown)
    if parameter_type == "NUMBER_INTEGER":
        if isinstance(value, bool):
            raise _bad(where, parameter_type, shown)
        if isinstance(value, int):
            return _int64(value, where)
        if isinstance(value, float) and value.is_integer():
            return _int64(int(value), where)
        raise _bad(where, parameter_type, shown)
    if parameter_type == "NUMBER_DOUBLE":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)  # finite: check_value refused NaN, Infinity and ints beyond 64 bits
        raise _bad(where, parameter_type, shown)
    if parameter_type == "BOOLEAN":
        if isinstance(value, bool):
            return value
        raise _bad(where, parameter_type, shown)
    if parameter_type == "LIST":
        if isinstance(value, list):
            return value
        raise _bad(where, parameter_type, shown)
    if parameter_type in ("STRUCT", "TASK_FINAL_STATUS"):
        if isinstance(value, dict):
            return value
        raise _bad(where, parameter_type, shown)
    raise UserError(f"{where}: unknown parameter type {parameter_type!r}")


def _int64(value: int, where: str) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise UserError(f"{where}: integer {str(value)[:20]}… does not fit in 64 bits (the IR's int64)")
    return value


def coerce(value: Any, parameter_type: str) -> Any:
    """Bring a value already in flight to its declared type, as the KFP backend's protobuf does.

    IR constants and defaults carry numbers as doubles (``2.0`` for an int input); the
    backend hands ``2`` to an integer input. Values that do not fit are passed unchanged.
    """
    if parameter_type == "NUMBER_INTEGER" and isinstance(value, float) and value.is_integer():
        return int(value)
    if parameter_type == "NUMBER_DOUBLE" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def from_output_file(text: str, parameter_type: str, where: str) -> Any:
    """Read an output parameter file written by a container component (the KFP launcher's rule).

    Strings are taken verbatim; other types are parsed, and a value that does not parse
    is an error of the task, not of the user.
    """
    if parameter_type == "STRING":
        return text
    if parameter_type in ("LIST", "STRUCT", "TASK_FINAL_STATUS"):
        return check_json(load_json(text, where), parameter_type, where)
    return parse_text(text, parameter_type, where)


def to_placeholder_text(value: object) -> str:
    """How a parameter value is spliced into a command line: strings raw, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value)
