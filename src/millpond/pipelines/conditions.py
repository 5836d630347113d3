"""CEL, as the KFP driver uses it: task trigger conditions and parameter expression selectors.

Conditions see ``inputs.parameter_values`` (the task's resolved input parameters);
selectors see the selected value as ``string_value`` / ``number_value`` / ``bool_value`` /
``struct_value`` / ``list_value``, with KFP's extra ``parseJson`` function. Expressions are
compiled once at load time, so one that does not parse is the user's error, not the task's.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from millpond.errors import TaskFailure, UserError


class ConditionError(TaskFailure):
    """A CEL expression failed while evaluating: the task fails with this message."""


@functools.cache
def _environment() -> Any:
    import celpy

    return celpy.Environment()


def _parse_json(value: Any) -> Any:
    import celpy

    return celpy.json_to_cel(json.loads(str(value)))


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    import celpy

    environment = _environment()
    try:
        ast = environment.compile(expression)
    except celpy.CELParseError as exc:
        line = getattr(exc, "line", None)
        column = getattr(exc, "column", None)
        where = f" at line {line}, column {column}" if line is not None else ""
        raise UserError(f"CEL expression does not parse{where}: {expression}") from None
    return environment.program(ast, functions={"parseJson": _parse_json})


def check_expression(expression: str, where: str) -> None:
    """Compile an expression, naming ``where`` it sits when it does not parse."""
    try:
        _program(expression)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def _evaluate(expression: str, variables: dict[str, Any]) -> Any:
    import celpy

    activation = {name: celpy.json_to_cel(value) for name, value in variables.items()}
    try:
        result = _program(expression).evaluate(activation)
    except Exception as exc:  # celpy raises its own error types and TypeErrors from overloads
        raise ConditionError(f"CEL expression {expression!r} failed: {exc}") from None
    if isinstance(result, Exception):
        raise ConditionError(f"CEL expression {expression!r} failed: {result}")
    return result


def condition_holds(expression: str, parameter_values: dict[str, Any]) -> bool:
    result = _to_json(_evaluate(expression, {"inputs": {"parameter_values": parameter_values}}))
    if not isinstance(result, bool):
        raise ConditionError(f"condition {expression!r} gave {result!r}, not a boolean")
    return bool(result)


def select(expression: str, value: Any) -> Any:
    """Apply a parameterExpressionSelector to a value and return plain JSON."""
    variables: dict[str, Any] = {
        "string_value": value if isinstance(value, str) else json.dumps(value),
    }
    if isinstance(value, bool):
        variables["bool_value"] = value
    elif isinstance(value, (int, float)):
        variables["number_value"] = value
    elif isinstance(value, dict):
        variables["struct_value"] = value
    elif isinstance(value, list):
        variables["list_value"] = value
    return _to_json(_evaluate(expression, variables))


def _to_json(value: Any) -> Any:
    """celpy's result types back to plain Python JSON values."""
    from celpy import celtypes

    if isinstance(value, (bool, celtypes.BoolType)):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value
