"""A search space: Katib's parameters checked, typed, and turned back into assignment strings.

Every algorithm reads the same :class:`Param` (numbers parsed once, errors named by field path) and
writes values through :func:`format_value`, so a value an algorithm suggests and the value a trial
reports back compare equal as strings (grid's visited points, hyperband's promoted trials).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from millpond.errors import UserError
from millpond.katib.suggestions.records import PARAMETER_TYPES, Assignment, ParameterSpec, TrialResult


@dataclass(frozen=True)
class Param:
    """A checked parameter: bounds and step as numbers (double/int), or its values (discrete/categorical)."""

    name: str
    type: str
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    values: tuple[str, ...] = ()
    decimals: int = 0  # digits after the point that min and step carry: stepped doubles are rounded to them

    @property
    def numeric(self) -> bool:
        return self.type in ("double", "int")


def _number(text: str | None, where: str, *, integer: bool) -> float:
    if text is None or str(text).strip() == "":
        raise UserError(f"{where}: required for this parameter type")
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        kind = "an integer" if integer else "a number"
        raise UserError(f"{where}: {text!r} is not {kind}") from None
    if not value.is_finite():
        raise UserError(f"{where}: {text!r} is not a finite number")
    if integer and value != value.to_integral_value():
        raise UserError(f"{where}: {text!r} is not an integer")
    return float(value)


def _decimals(*texts: str | None) -> int:
    places = 0
    for text in texts:
        if text:
            exponent = Decimal(str(text).strip()).as_tuple().exponent
            if isinstance(exponent, int):
                places = max(places, -exponent)
    return places


def check_param(spec: ParameterSpec, where: str) -> Param:
    """Katib's webhook checks of one parameter (``where`` is its path, ``spec.parameters[i]``)."""
    if not spec.name:
        raise UserError(f"{where}.name: required")
    if spec.parameter_type not in PARAMETER_TYPES:
        raise UserError(f"{where}.parameterType: {spec.parameter_type!r} is not one of {', '.join(PARAMETER_TYPES)}")
    feasible = f"{where}.feasibleSpace"
    if spec.parameter_type in ("discrete", "categorical"):
        if not spec.values:
            raise UserError(f"{feasible}.list: required (a {spec.parameter_type} parameter's values)")
        if len(set(spec.values)) != len(spec.values):
            raise UserError(f"{feasible}.list: values repeat")
        if spec.parameter_type == "discrete":
            for index, value in enumerate(spec.values):
                _number(value, f"{feasible}.list[{index}]", integer=False)
        return Param(spec.name, spec.parameter_type, values=tuple(spec.values))
    integer = spec.parameter_type == "int"
    low = _number(spec.min, f"{feasible}.min", integer=integer)
    high = _number(spec.max, f"{feasible}.max", integer=integer)
    if low > high:
        raise UserError(f"{feasible}: min {spec.min} > max {spec.max}")
    step = None
    if spec.step not in (None, ""):
        step = _number(spec.step, f"{feasible}.step", integer=integer)
        if step <= 0:
            raise UserError(f"{feasible}.step: {spec.step} is not greater than zero")
        if step > high - low and high > low:
            raise UserError(f"{feasible}.step: {spec.step} is larger than max - min ({high - low:g})")
    return Param(spec.name, spec.parameter_type, low, high, step, decimals=_decimals(spec.min, spec.step))


def check_params(parameters: Sequence[ParameterSpec]) -> tuple[Param, ...]:
    """Every parameter checked; names unique (Katib: "Detect duplicated parameter name")."""
    if not parameters:
        raise UserError("spec.parameters: at least one parameter is required")
    seen: set[str] = set()
    params = []
    for index, spec in enumerate(parameters):
        param = check_param(spec, f"spec.parameters[{index}]")
        if param.name in seen:
            raise UserError(f"spec.parameters[{index}].name: duplicated parameter name {param.name!r}")
        seen.add(param.name)
        params.append(param)
    return tuple(params)


def grid_values(param: Param) -> tuple[float, ...]:
    """The points a stepped numeric parameter can take: min, min+step, … up to max (Katib's np.arange)."""
    assert param.step is not None
    count = int(math.floor((param.high - param.low) / param.step + 1e-9)) + 1
    return tuple(snap(param, param.low + k * param.step) for k in range(count))


def snap(param: Param, value: float) -> float:
    """A number made a legal value of ``param``: clipped to its bounds, on its step, integral for int."""
    value = min(max(value, param.low), param.high)
    if param.step is not None:
        k = round((value - param.low) / param.step)
        value = param.low + k * param.step
        if value > param.high + 1e-12:
            value -= param.step
        value = round(value, param.decimals)
    if param.type == "int":
        value = float(round(value))
    return value


def format_value(param: Param, value: object) -> str:
    """The assignment string of a value: ints without a point, doubles as their shortest repr."""
    if param.type == "int":
        return str(int(round(float(value))))  # type: ignore[arg-type]
    if param.type == "double":
        number = float(value)  # type: ignore[arg-type]
        return repr(round(number, param.decimals)) if param.step is not None else repr(number)
    return str(value)


def assignments_of(params: Sequence[Param], values: Mapping[str, object]) -> tuple[Assignment, ...]:
    """Assignments in the parameters' order from ``{name: value}``."""
    return tuple(Assignment(p.name, format_value(p, values[p.name])) for p in params)


def assigned(trial: TrialResult) -> dict[str, str]:
    """A trial's assignments as ``{name: value}``."""
    return {a.name: a.value for a in trial.assignments}


def key(params: Sequence[Param], values: Mapping[str, str]) -> tuple[str, ...]:
    """A point as a hashable key in the parameters' order (grid's visited set, duplicate checks)."""
    return tuple(values.get(p.name, "") for p in params)
