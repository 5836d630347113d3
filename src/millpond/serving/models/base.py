"""The one interface every served model has, whatever framework it was trained with.

The protocols (KServe v1, Open Inference Protocol v2, Seldon v0.1) only ever see this: numpy arrays
in, numpy arrays out, and a description of the tensors (``TensorSpec``) that lets them check a
request's shape and datatype *before* the framework sees it, so bad input becomes a 400 naming the
problem rather than whatever exception the framework raises deep inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from millpond.errors import MillpondError, UserError


class ModelLoadError(UserError):
    """A model directory that holds no usable model (missing, ambiguous, unreadable file; bad --module)."""


class InferenceInputError(UserError):
    """A request's tensors do not fit the model (count, shape, datatype): the protocols answer 400."""


class ModelFailure(MillpondError):
    """The model failed on a request it accepted (an estimator that lost its fit): the server's fault, not the
    client's, so the protocols answer 500 in their own error shape (Seldon: ``MICROSERVICE_INTERNAL_ERROR``)."""


# The Open Inference Protocol's tensor datatypes and the numpy dtype each becomes. BYTES holds
# strings (JSON has no raw bytes); FP16 travels as JSON numbers like the other floats.
DATATYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(object),
}
_BY_DTYPE = {dtype: name for name, dtype in DATATYPES.items() if name != "BYTES"}


def datatype_of(dtype: np.dtype) -> str:
    """The OIP datatype of a numpy dtype: BYTES for strings, bytes and Python objects."""
    return _BY_DTYPE.get(np.dtype(dtype), "BYTES")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output as the Open Inference Protocol's metadata describes it.

    ``shape`` uses -1 for a dimension of any size (the batch, or everything when unknown).
    """

    name: str
    datatype: str
    shape: tuple[int, ...]

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}

    def check(self, array: np.ndarray) -> None:
        """Raise ``InferenceInputError`` when ``array``'s shape cannot be this tensor's."""
        if self.shape == (-1,) and self.datatype != "BYTES":  # unknown: any shape
            return
        if array.ndim != len(self.shape):
            raise InferenceInputError(
                f"input {self.name!r}: expected {len(self.shape)} dimensions {list(self.shape)}, "
                f"got shape {list(array.shape)}"
            )
        for want, got in zip(self.shape, array.shape, strict=True):
            if want != -1 and want != got:
                raise InferenceInputError(
                    f"input {self.name!r}: expected shape {list(self.shape)}, got {list(array.shape)}"
                )


class Model(Protocol):
    """A loaded model: what the model server and the protocols need of it."""

    name: str
    version: str | None
    platform: str  # the OIP metadata's platform ("sklearn", "pytorch_torchscript", "pytorch")

    inputs: tuple[TensorSpec, ...]  # in the order predict() takes them
    outputs: tuple[TensorSpec, ...]  # in the order predict() returns them

    def predict(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """One array per declared input in, one array per declared output out (same batch size).

        Raises ``InferenceInputError`` for input the model cannot take.
        """
        ...


def check_inputs(model: Model, inputs: list[np.ndarray]) -> None:
    """The count and shapes of ``inputs`` against ``model.inputs`` (InferenceInputError when they differ)."""
    if len(inputs) != len(model.inputs):
        raise InferenceInputError(f"model {model.name!r} takes {len(model.inputs)} input(s), got {len(inputs)}")
    for spec, array in zip(model.inputs, inputs, strict=True):
        spec.check(array)
        if array.ndim == 0 or array.shape[0] == 0:
            raise InferenceInputError(f"input {spec.name!r}: a batch of at least one row is needed")
