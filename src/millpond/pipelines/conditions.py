"""CEL, as the KFP driver uses it: task trigger conditions and parameter expression selectors.

Conditions see ``inputs.parameter_values`` (the task's resolved input parameters);
selectors see the selected value as ``string_value`` / ``number_value`` / ``bool_value`` /
``struct_value`` / ``list_value``, with KFP's extra ``parseJson`` function. Expressions are
compiled once at load time, so one that does not parse is the user's error, not the task's.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from millpond.errors import TaskFailure, UserError
from millpond.pipelines.argo import templating, when


class ConditionError(TaskFailure):
    """A CEL expression failed while evaluating: the task fails with this message."""


@functools.cache
def _environment() -> Any:
    import celpy  # noqa: PLC0415 - celpy and lark (~140 ms) only once a pipeline has CEL

    return celpy.Environment()


def _parse_json(value: Any) -> Any:
    import celpy  # noqa: PLC0415 - celpy and lark (~140 ms) only once a pipeline has CEL

    return celpy.json_to_cel(json.loads(str(value)))


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    import celpy  # noqa: PLC0415 - celpy and lark (~140 ms) only once a pipeline has CEL

    environment = _environment()
    try:
        ast = environment.compile(expression)
    except celpy.CELParseError as exc:
        line = getattr(exc, "line", None)
        column = getattr(exc, "column", None)
        where = f" at line {line}, column {column}" if line is not None else ""
        raise UserError(f"CEL expression does not parse{where}: {expression}") from None
    return environment.program(ast, functions={
        "parseJson": _parse_json, "argoWhen": _argo_when, "argoTrim": _argo_trim, "argoItem": _argo_item,
    })


# KFP v1 (Argo) workflows translated to IR (``pipelines.argo.to_ir``) call these three: Argo's
# own rules for a ``when``, an output parameter's text and a loop item's text, which CEL lacks.
def _argo_when(expression: Any, values: Any) -> Any:
    """A translated ``when``: Argo's govaluate over the task's ``argo-when-N`` inputs (as text)."""
    import celpy  # noqa: PLC0415 - celpy and lark (~140 ms) only once a pipeline has CEL

    texts = {f"inputs.parameters.{k}": templating.value_text(_to_json(v)) for k, v in dict(values).items()}
    return celpy.celtypes.BoolType(when.holds(str(expression), texts))


def _argo_trim(value: Any) -> Any:
    """An output parameter as Argo's executor saves it: the file's text less one trailing newline."""
    import celpy  # noqa: PLC0415 - celpy and lark (~140 ms) only once a pipeline has CEL

    text = str(value)
    return celpy.celtypes.StringType(text[:-1] if text.endswith("\n") else text)


def _argo_item(value: Any, key: Any) -> Any:
    """The text Argo substitutes for ``{{item}}`` (key "") or ``{{item.KEY}}`` of one loop item."""
    import celpy  # noqa: PLC0415 - celpy and lark (~140 ms) only once a pipeline has CEL

    text = str(value)
    try:
        item = json.loads(text)
    except ValueError:
        item = text
    if str(key):
        if not isinstance(item, dict) or str(key) not in item:
            raise ConditionError(f"loop item {text[:60]!r} has no field {str(key)!r}")
        item = item[str(key)]
    return celpy.celtypes.StringType(templating.value_text(item))


def check_expression(expression: str, where: str) -> None:
    """Compile an expression, naming ``where`` it sits when it does not parse."""
    try:
        _program(expression)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def _evaluate(expression: str, variables: dict[str, Any]) -> Any:
    import celpy  # noqa: PLC0415 - celpy and lark (~140 ms) only once a pipeline has CEL

    activation = {name: celpy.json_to_cel(value) for name, value in variables.items()}
    try:
        result = _program(expression).evaluate(activation)
    except Exception as exc:  # celpy raises its own error types and TypeErrors from overloads
        raise ConditionError(f"CEL expression {expression!r} failed: {exc}") from None
    if isinstance(result, Exception):
        raise ConditionError(f"CEL expression {expression!r} failed: {result}")
    return result


# The exact calls ``pipelines.argo.to_ir`` writes: evaluated directly, not through celpy, whose
# evaluator is deep (a kfp 1.x recursive graph nests DAGs, and each level's conditions and
# selectors run further down the engine's stack) and slower.
_ARGO_WHEN = re.compile(r'argoWhen\(("(?:[^"\\]|\\.)*"), inputs\.parameter_values\)')
_ARGO_TRIM = "argoTrim(string_value)"
_ARGO_ITEM = re.compile(r'argoItem\(string_value, ("(?:[^"\\]|\\.)*")\)')


def _argo_call(expression: str, value: Any) -> tuple[bool, Any]:
    """(True, result) when ``expression`` is one of to_ir's calls, evaluated in Python; else (False, None).

    Its failures are ConditionErrors, as the same call's through CEL are: the task fails with it.
    """
    try:
        return _argo_direct(expression, value)
    except ConditionError:
        raise
    except TaskFailure as exc:
        raise ConditionError(f"CEL expression {expression!r} failed: {exc}") from None


def _argo_direct(expression: str, value: Any) -> tuple[bool, Any]:
    when_call = _ARGO_WHEN.fullmatch(expression)
    if when_call and isinstance(value, dict):
        return True, bool(_argo_when(json.loads(when_call.group(1)), value))
    item_call = _ARGO_ITEM.fullmatch(expression)
    if expression == _ARGO_TRIM or item_call:
        text = value if isinstance(value, str) else json.dumps(value)
        if item_call is None:
            return True, str(_argo_trim(text))
        return True, str(_argo_item(text, json.loads(item_call.group(1))))
    return False, None


def condition_holds(expression: str, parameter_values: Mapping[str, object]) -> bool:
    direct, result = _argo_call(expression, parameter_values)
    if direct:
        return bool(result)
    result = _to_json(_evaluate(expression, {"inputs": {"parameter_values": parameter_values}}))
    if not isinstance(result, bool):
        raise ConditionError(f"condition {expression!r} gave {result!r}, not a boolean")
    return bool(result)


def select(expression: str, value: Any) -> Any:
    """Apply a parameterExpressionSelector to a value and return plain JSON."""
    direct, result = _argo_call(expression, value)
    if direct:
        return result
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
    from celpy import celtypes  # noqa: PLC0415 - celpy and lark (~140 ms) only once a pipeline has CEL

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
