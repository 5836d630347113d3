"""The units a graph may name that are built into Seldon, computed in the executor's process: no container.

Seldon Core v1.17.1's Go executor implements RANDOM_ABTEST itself (``components.go``: child 0 with
probability ``ratioA``, 0.5 unless the unit's one parameter sets it, else child 1). SIMPLE_MODEL, SIMPLE_ROUTER
and AVERAGE_COMBINER are the Java engine's (Seldon before the Go executor): a model answering the fixed
probabilities 0.1, 0.9, 0.5 of classes ``class0``…``class2`` as a 1×3 tensor, a router that always picks child 0,
and a combiner averaging its children's answers element by element (every answer of one shape; the first
answer's names and form kept). They are served here as that engine served them; a simplification where the Go
executor would call a container that Seldon's operator never creates for them.

Also here: how the executor reads a ROUTER's answer (``ExtractRouteFromSeldonJson``: the first number of a
SeldonMessage's ``data``, else of a bare JSON array).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from millpond.errors import UserError
from millpond.serving.protocols.tensors import to_json

SIMPLE_MODEL_NAMES = ["class0", "class1", "class2"]
SIMPLE_MODEL_VALUES = [0.1, 0.9, 0.5]
DEFAULT_RATIO_A = 0.5


def simple_model() -> dict[str, Any]:
    return {"data": {"names": list(SIMPLE_MODEL_NAMES),
                     "tensor": {"shape": [1, len(SIMPLE_MODEL_VALUES)], "values": list(SIMPLE_MODEL_VALUES)}},
            "meta": {}}


def ab_test_route(unit: dict[str, Any]) -> int:
    """RANDOM_ABTEST: child 0 with probability ``ratioA`` (the unit's only parameter), else child 1."""
    ratio = DEFAULT_RATIO_A
    parameters = unit.get("parameters") or []
    if len(parameters) == 1 and isinstance(parameters[0], dict) and parameters[0].get("name") == "ratioA":
        try:
            ratio = float(str(parameters[0].get("value")))
        except (TypeError, ValueError):
            raise UserError(f"unit {unit.get('name')}: ratioA {parameters[0].get('value')!r} is not a number") from None
    return 0 if random.random() < ratio else 1


def data_array(message: Any, where: str) -> tuple[np.ndarray, str, list[str]]:
    """A SeldonMessage's ``data`` as an array, its form (``ndarray`` or ``tensor``) and its names."""
    data = message.get("data") if isinstance(message, dict) else None
    if not isinstance(data, dict):
        raise UserError(f"{where}: the answer has no data")
    found = data.get("names")
    names = [str(n) for n in found] if isinstance(found, list) else []
    try:
        if "ndarray" in data:
            return np.asarray(data["ndarray"], dtype=float), "ndarray", names
        tensor = data.get("tensor")
        if isinstance(tensor, dict):
            values = np.asarray(tensor.get("values") or [], dtype=float)
            return values.reshape([int(n) for n in tensor.get("shape") or [values.size]]), "tensor", names
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: data is not numbers of one shape: {exc}") from None
    raise UserError(f"{where}: data holds neither ndarray nor tensor")


def average(messages: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """AVERAGE_COMBINER: the element-wise mean of the children's answers, in the first answer's form and names."""
    arrays = [data_array(m, f"{where} child {i}") for i, m in enumerate(messages)]
    shapes = {a.shape for a, _, _ in arrays}
    if len(shapes) != 1:
        raise UserError(f"{where}: the children answered arrays of different shapes {sorted(shapes)}")
    mean = np.mean([a for a, _, _ in arrays], axis=0)
    _, form, names = arrays[0]
    data: dict[str, Any] = {"names": names}
    if form == "ndarray":
        data["ndarray"] = to_json(mean)
    else:
        data["tensor"] = {"shape": list(mean.shape), "values": to_json(mean.ravel())}
    return {"data": data, "meta": {}}


def route_of(answer: Any, where: str) -> int:
    """The child a ROUTER's answer names: the first number of its ``data`` (or of a bare JSON array)."""
    try:
        if isinstance(answer, dict):
            values, _, _ = data_array(answer, where)
        else:
            values = np.asarray(answer, dtype=float)
        first = values.ravel()[0]
    except (IndexError, TypeError, ValueError):
        raise UserError(f"{where}: the router's answer names no route") from None
    return int(first)
