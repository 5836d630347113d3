"""scikit-learn models, found in a model directory the way KServe's sklearnserver finds them.

KServe's sklearnserver looks in the model directory for one file named ``model`` with the
extension ``.joblib``, ``.pkl`` or ``.pickle`` and refuses a directory with none or with more than
one; so does this loader (``model.joblib`` written by ``joblib.dump`` is what KServe's samples use).
The file is unpickled: as with KServe, a model directory is trusted code, never a request.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import joblib
import numpy as np

from millpond.serving.models.base import InferenceInputError, ModelLoadError, TensorSpec, datatype_of

MODEL_BASENAME = "model"
MODEL_EXTENSIONS = (".joblib", ".pkl", ".pickle")


def model_file(model_dir: Path) -> Path:
    """The one ``model.{joblib,pkl,pickle}`` in ``model_dir`` (ModelLoadError for none or several)."""
    if not model_dir.is_dir():
        raise ModelLoadError(f"model directory {model_dir} does not exist or is not a directory")
    found = [model_dir / f"{MODEL_BASENAME}{ext}" for ext in MODEL_EXTENSIONS]
    found = [path for path in found if path.is_file()]
    if not found:
        names = ", ".join(MODEL_BASENAME + ext for ext in MODEL_EXTENSIONS)
        raise ModelLoadError(f"no scikit-learn model in {model_dir}: expected one of {names}")
    if len(found) > 1:
        raise ModelLoadError(f"more than one model file in {model_dir}: {', '.join(p.name for p in found)}")
    return found[0]


class SklearnModel:
    """A fitted estimator answering ``predict`` (KServe's sklearnserver does the same by default)."""

    platform = "sklearn"

    def __init__(self, name: str, model_dir: Path, version: str | None = None) -> None:
        self.name = name
        self.version = version
        path = model_file(model_dir)
        try:
            estimator = joblib.load(path) if path.suffix == ".joblib" else pickle.loads(path.read_bytes())
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad model file
            raise ModelLoadError(f"cannot load {path}: {type(exc).__name__}: {exc}") from None
        if not callable(getattr(estimator, "predict", None)):
            raise ModelLoadError(f"{path} holds a {type(estimator).__name__}, which has no predict()")
        self._estimator = estimator
        features = getattr(estimator, "n_features_in_", None)
        shape = (-1, int(features)) if isinstance(features, (int, np.integer)) else (-1,)
        self._inputs = (TensorSpec("input-0", "FP64", shape),)
        classes = getattr(estimator, "classes_", None)
        out_type = datatype_of(np.asarray(classes).dtype) if classes is not None else "FP64"
        self._outputs = (TensorSpec("output-0", out_type, (-1,)),)

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    def predict(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        (rows,) = inputs
        try:
            return [np.asarray(self._estimator.predict(rows))]
        except (ValueError, TypeError) as exc:  # sklearn's own input checks (NaN, strings, wrong width)
            raise InferenceInputError(f"model {self.name!r} refused the input: {exc}") from None
