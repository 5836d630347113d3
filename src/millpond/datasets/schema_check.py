"""Check a manifest against its kind's JSON Schema (derived from a CRD) with ``jsonschema``.

Fluid's kinds use ``SCHEMAS_DIR``; other packages (training's Kubeflow kinds) pass their own
schema file to ``check_schema_file``, so there is one validator and one way of naming a field.

The first problem becomes one line that names the field as kubectl would:
``spec.replicas: "two" is not of type integer``, ``unknown field "spec.foo"``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from millpond.datasets.fields import field_path, show
from millpond.errors import UserError

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

SCHEMAS_DIR = Path(__file__).parent / "schemas"

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _in_range(fmt: str, value: object) -> bool:
    """An int32/int64 field's value fits; 2147483648.0 counts too (JSON's integers include 2.0, as jsonschema's)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    low, high = _INT_RANGES[fmt]
    return low <= value <= high


@functools.cache
def _validator(schema_file: Path) -> "Validator":
    from jsonschema import Draft202012Validator, FormatChecker  # noqa: PLC0415 - jsonschema with the first check

    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    checker = FormatChecker(formats=())  # only the integer widths the CRDs declare
    for fmt in _INT_RANGES:
        checker.checks(fmt)(functools.partial(_in_range, fmt))
    return Draft202012Validator(schema, format_checker=checker)


def check_schema(kind: str, document: dict[str, Any]) -> None:
    """Raise UserError for the first field of ``document`` its (Fluid) kind's schema refuses."""
    check_schema_file(SCHEMAS_DIR / f"{kind.lower()}.json", document)


def check_schema_file(schema_file: Path, document: dict[str, Any]) -> None:
    """Raise UserError for the first field of ``document`` the JSON Schema in ``schema_file`` refuses."""
    from jsonschema.exceptions import best_match  # noqa: PLC0415 - jsonschema with the first check

    error = best_match(_validator(schema_file).iter_errors(document))
    if error is not None:
        raise UserError(describe(error))


def _types(expected: object) -> str:
    return " or ".join(expected) if isinstance(expected, list) else str(expected)


def describe(error: "ValidationError") -> str:
    """One line for one schema error, led by the field's path."""
    path = list(error.absolute_path)
    where = field_path(path)
    # The value and the rule are whatever JSON the document and the schema hold there (jsonschema
    # types them Any, or unset: they are always set on an error that validation raised).
    value, rule, keyword = cast(Any, error.instance), cast(Any, error.validator_value), error.validator
    if keyword == "additionalProperties" and isinstance(value, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        unknown = [key for key in value if key not in allowed]
        names = ", ".join(f'"{field_path([*path, key])}"' for key in unknown)
        return f"unknown field{'s' if len(unknown) > 1 else ''} {names}"
    if keyword == "required":
        missing = [key for key in rule if key not in value]
        return f"{field_path([*path, missing[0]])}: required field is missing"
    if keyword == "type":
        return f"{where}: {show(value)} is not of type {_types(rule)}"
    if keyword == "anyOf" and all("type" in option and len(option) == 1 for option in rule):
        return f"{where}: {show(value)} is not of type {_types([option['type'] for option in rule])}"
    if keyword == "enum":
        return f"{where}: {show(value)} is not one of " + ", ".join(show(option) for option in rule)
    if keyword == "pattern" and "[KMGTPE]i" in rule:
        what = "a comma-separated list of quantities" if rule.startswith("^((") else "a quantity"
        return f"{where}: {show(value)} is not {what} (such as 150Gi, 20M or 40960)"
    if keyword == "format":
        return f"{where}: {show(value)} is out of range for {rule}"
    if keyword in ("minimum", "maximum"):
        bound = "below the minimum" if keyword == "minimum" else "above the maximum"
        return f"{where}: {show(value)} is {bound} {rule}"
    if keyword in ("minLength", "minItems"):
        unit = ("character" if keyword == "minLength" else "item") + ("s" if rule != 1 else "")
        shown = "an empty array" if value == [] else show(value)
        return f"{where}: {shown} is too short (at least {rule} {unit})"
    if keyword in ("maxLength", "maxItems", "maxProperties"):  # say how long, not the whole value (it may be huge)
        unit = {"maxLength": "character", "maxItems": "item", "maxProperties": "field"}[keyword]
        return f"{where}: {len(value)} {unit}s, at most {rule} allowed"
    return f"{where or 'the document'}: {error.message}"
