"""Model loaders behind one interface (``Model``): ``load_model`` picks the framework by format."""

from __future__ import annotations

from pathlib import Path

from millpond.serving.formats import SERVED_FORMATS
from millpond.serving.models.base import (
    DATATYPES,
    InferenceInputError,
    Model,
    ModelLoadError,
    TensorSpec,
    check_inputs,
    datatype_of,
)
from millpond.serving.models.files import PYTORCH_EXTENSIONS, SKLEARN_EXTENSIONS, mlflow_sklearn_file, one_model_file

FORMATS = SERVED_FORMATS
_FRAMEWORKS = {"sklearn": "scikit-learn", "pytorch": "PyTorch"}


def load_model(name: str, model_dir: Path, fmt: str, module: str | None = None, version: str | None = None,
               method: str | None = None) -> Model:
    """Load the model in ``model_dir`` as ``fmt`` ("sklearn" or "pytorch"); ModelLoadError if it cannot be.

    ``method``: the scikit-learn estimator's method that answers (``predict`` unless given; Seldon's)."""
    if fmt not in FORMATS:
        raise ModelLoadError(f"unknown model format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if not (fmt == "sklearn" and mlflow_sklearn_file(model_dir)):  # an MLflow folder names its own file
        one_model_file(model_dir, SKLEARN_EXTENSIONS if fmt == "sklearn" else PYTORCH_EXTENSIONS, _FRAMEWORKS[fmt])
    if fmt == "sklearn":
        if module:
            raise ModelLoadError("--module is for pytorch state dicts; a scikit-learn model needs none")
        from millpond.serving.models.sklearn import SklearnModel  # noqa: PLC0415 - torch or sklearn, not both

        return SklearnModel(name, model_dir, version, method or "predict")
    if method:
        raise ModelLoadError("--method is for scikit-learn models (Seldon's SKLEARN_SERVER); a pytorch model has none")
    from millpond.serving.models.pytorch import PyTorchModel  # noqa: PLC0415 - importing torch takes ~1 s

    return PyTorchModel(name, model_dir, module, version)


__all__ = [
    "DATATYPES",
    "FORMATS",
    "InferenceInputError",
    "Model",
    "ModelLoadError",
    "TensorSpec",
    "check_inputs",
    "datatype_of",
    "load_model",
]
