"""JSON request bodies to numpy arrays and back, with every check a protocol needs to answer 400.

Two shapes of input reach a model:

- rows (KServe v1 ``instances``, Seldon's ``ndarray``): nested JSON lists, which must be
  rectangular and hold only numbers (→ float64, or int64 when all are integers) or only strings
  (→ an object array, for models that take text);
- typed tensors (OIP v2 ``{"name", "shape", "datatype", "data"}`` and Seldon's ``tensor``): ``data``
  flat or nested, read in row-major order, with exactly ``prod(shape)`` elements of the declared
  datatype — an INT8 of 300, a float where an integer is declared or a string in FP32 is refused,
  never silently cast.

Bodies are read with a byte limit (``read_json``) before parsing. They are parsed with
``json.loads`` rather than ``millpond.documents.load_json``: that one's walk over every value
(node count, NUL characters, 64-bit integers) cost 45 µs of a 650 µs request, and an inference body
carries only arrays whose every element the converters here check anyway (type, range for the
datatype, finiteness); what remains of the document limits is kept: the byte limit bounds the
node count, nesting deeper than Python's recursion limit and NaN/Infinity are refused.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from starlette.requests import Request

from millpond.errors import UserError
from millpond.serving.models import DATATYPES, datatype_of

# 16 MiB: a batch of 10,000 MNIST images as JSON floats is ~12 MiB; larger batches belong in a
# batch job, not a request. The model server's --max-body-bytes changes it.
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_ELEMENTS = 4_000_000  # elements of one tensor: what 16 MiB of one-digit JSON numbers can hold


class BodyTooLarge(UserError):
    """A request body over the server's limit: answered 413."""


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused with BodyTooLarge past ``limit`` bytes (counted as it streams)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"request body of {int(declared):,} bytes is over the limit of {limit:,}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"request body is over the limit of {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int, where: str) -> Any:
    """The request's JSON body, refused with BodyTooLarge past ``limit`` bytes (counted as it streams)."""
    data = await read_body(request, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: the body is not UTF-8 text") from None
    if not text.strip():
        raise UserError(f"{where}: empty body, expected a JSON object")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}:{exc.lineno}:{exc.colno}: malformed JSON: {exc.msg}") from None
    except RecursionError:
        raise UserError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # NaN/Infinity, or an integer of more than 4,300 digits
        raise UserError(f"{where}: malformed JSON: {str(exc).splitlines()[0]}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def require_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a JSON object, got {_kind(value)}")
    return value


def rows_to_array(rows: Any, where: str) -> np.ndarray:
    """Nested rows (``instances``, ``ndarray``) as one array: rectangular, all numbers or all strings."""
    if not isinstance(rows, list) or not rows:
        raise UserError(f"{where}: expected a non-empty list of rows")
    shape = _shape_of(rows, where)
    flat = _flatten(rows, len(shape))
    if all(isinstance(x, str) for x in flat):
        array = np.empty(len(flat), dtype=object)
        array[:] = flat
        return array.reshape(shape)
    for x in flat:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise UserError(f"{where}: rows must hold only numbers or only strings, found {_kind(x)}")
    try:
        if all(isinstance(x, int) for x in flat):
            return np.array(flat, dtype=np.int64).reshape(shape)
        array = np.array(flat, dtype=np.float64).reshape(shape)
    except OverflowError:
        raise UserError(f"{where}: a number is out of range (64-bit integers, finite floats)") from None
    if not np.isfinite(array).all():
        raise UserError(f"{where}: a number is out of range (64-bit integers, finite floats)")
    return array


def tensor_to_array(shape: Any, datatype: Any, data: Any, where: str) -> np.ndarray:
    """An OIP typed tensor as an array of its datatype, every element checked against it."""
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        raise UserError(f"{where}: unknown datatype {datatype!r}: expected one of {', '.join(DATATYPES)}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise UserError(f"{where}: shape must be a list of integers")
    if any(d < 0 for d in shape):
        raise UserError(f"{where}: shape {shape} has a negative dimension")
    count = math.prod(shape)
    if count > MAX_ELEMENTS:
        raise UserError(f"{where}: shape {shape} has more than {MAX_ELEMENTS:,} elements")
    if not isinstance(data, list):
        raise UserError(f"{where}: data must be a list")
    flat = _flatten_any(data, where)
    if len(flat) != count:
        raise UserError(f"{where}: shape {shape} needs {count} elements, data has {len(flat)}")
    _check_elements(flat, datatype, where)
    dtype = DATATYPES[datatype]
    if datatype == "BYTES":
        array = np.empty(count, dtype=object)
        array[:] = flat
    else:
        try:
            with np.errstate(over="ignore"):  # a float past FP16/FP32's range becomes inf: refused below
                array = np.array(flat, dtype=dtype)
        except OverflowError:
            raise UserError(f"{where}: a value is out of range for {datatype}") from None
        if dtype.kind == "f" and not np.isfinite(array).all():
            raise UserError(f"{where}: a value is out of range for {datatype}")
    return array.reshape(shape)


def array_to_tensor(name: str, array: np.ndarray) -> dict[str, Any]:
    """An output array as an OIP tensor: shape, datatype and row-major flat data."""
    array = np.asarray(array)
    return {
        "name": name,
        "shape": list(array.shape),
        "datatype": datatype_of(array.dtype),
        "data": to_json(array.ravel()),
    }


def to_json(array: np.ndarray) -> Any:
    """An array as JSON lists; bytes become UTF-8 text (replacement characters for invalid bytes)."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        array = np.where(np.isfinite(array), array, np.nan).astype(object)
        return _finite(array.tolist())
    if array.dtype.kind in "SO":
        return _text(array.tolist())
    return array.tolist()


def _finite(value: Any) -> Any:
    # JSON has no NaN or Infinity: such outputs travel as null, as KServe's orjson encoder writes them.
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _text(value: Any) -> Any:
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (np.generic,)):
        return value.item()
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def _check_elements(flat: list[Any], datatype: str, where: str) -> None:
    if datatype == "BYTES":
        ok = all(isinstance(x, str) for x in flat)
        wanted = "strings"
    elif datatype == "BOOL":
        ok = all(isinstance(x, bool) for x in flat)
        wanted = "true or false"
    elif datatype.startswith(("INT", "UINT")):
        ok = all(isinstance(x, int) and not isinstance(x, bool) for x in flat)
        wanted = "integers"
    else:
        ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in flat)
        wanted = "numbers"
    if not ok:
        bad = next(x for x in flat if not _fits(x, wanted))
        raise UserError(f"{where}: datatype {datatype} takes {wanted}, found {_kind(bad)} {bad!r:.40}")


def _fits(x: Any, wanted: str) -> bool:
    if wanted == "strings":
        return isinstance(x, str)
    if wanted == "true or false":
        return isinstance(x, bool)
    if wanted == "integers":
        return isinstance(x, int) and not isinstance(x, bool)
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _shape_of(rows: list[Any], where: str) -> tuple[int, ...]:
    shape = []
    item: Any = rows
    while isinstance(item, list):
        if not item:
            raise UserError(f"{where}: an empty list inside the rows")
        shape.append(len(item))
        item = item[0]
    _check_rectangular(rows, tuple(shape), where)
    return tuple(shape)


def _check_rectangular(rows: list[Any], shape: tuple[int, ...], where: str) -> None:
    level = [rows]
    for depth, size in enumerate(shape):
        nxt = []
        for item in level:
            if not isinstance(item, list) or len(item) != size:
                raise UserError(f"{where}: rows are not rectangular: expected shape {list(shape)} at depth {depth}")
            nxt.extend(item)
        level = nxt
    if any(isinstance(x, list) for x in level):
        raise UserError(f"{where}: rows are not rectangular: expected shape {list(shape)}")


def _flatten(rows: list[Any], depth: int) -> list[Any]:
    level = rows
    for _ in range(depth - 1):
        level = [x for item in level for x in item]
    return level


def _flatten_any(data: list[Any], where: str) -> list[Any]:
    """Row-major flattening of ``data``, nested or flat (OIP allows both)."""
    if not any(isinstance(x, list) for x in data):
        return data
    out: list[Any] = []
    stack: list[Any] = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            out.append(item)
        else:
            stack.pop()
    return out


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
