"""scikit-learn models, found in a model directory the way KServe's sklearnserver finds them.

KServe's sklearnserver loads the one file of the model directory ending in ``.joblib``, ``.pkl``
or ``.pickle`` (``model.joblib``, written by ``joblib.dump``, in its samples) and refuses a
directory with none or several; so does this loader (``files.one_model_file``).
The file is unpickled: as with KServe, a model directory is trusted code, never a request.
"""

from __future__ import annotations

from pathlib import Path

import joblib
import numpy as np

from millpond.serving.models.base import InferenceInputError, ModelLoadError, TensorSpec, datatype_of
from millpond.serving.models.files import SKLEARN_EXTENSIONS, one_model_file


class SklearnModel:
    """A fitted estimator answering ``predict`` (KServe's sklearnserver does the same by default)."""

    platform = "sklearn"

    def __init__(self, name: str, model_dir: Path, version: str | None = None) -> None:
        self.name = name
        self.version = version
        path = one_model_file(model_dir, SKLEARN_EXTENSIONS, "scikit-learn")
        try:
            estimator = joblib.load(path)  # reads plain pickles too, as KServe loads every extension
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad model file
            raise ModelLoadError(f"cannot load {path}: {type(exc).__name__}: {exc}") from None
        if not callable(getattr(estimator, "predict", None)):
            raise ModelLoadError(f"{path} holds a {type(estimator).__name__}, which has no predict()")
        self._estimator = estimator
        features = getattr(estimator, "n_features_in_", None)
        shape = (-1, int(features)) if isinstance(features, (int, np.integer)) else (-1,)
        self.inputs: tuple[TensorSpec, ...] = (TensorSpec("input-0", "FP64", shape),)
        classes = getattr(estimator, "classes_", None)
        out_type = datatype_of(np.asarray(classes).dtype) if classes is not None else "FP64"
        self.outputs: tuple[TensorSpec, ...] = (TensorSpec("output-0", out_type, (-1,)),)

    def predict(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        (rows,) = inputs
        try:
            return [np.asarray(self._estimator.predict(rows))]
        except (ValueError, TypeError) as exc:  # sklearn's own input checks (NaN, strings, wrong width)
            raise InferenceInputError(f"model {self.name!r} refused the input: {exc}") from None
