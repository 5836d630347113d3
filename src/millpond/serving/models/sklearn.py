"""scikit-learn models, found in a model directory the way KServe's sklearnserver finds them.

KServe's sklearnserver loads the one file of the model directory ending in ``.joblib``, ``.pkl``
or ``.pickle`` (``model.joblib``, written by ``joblib.dump``, in its samples) and refuses a
directory with none or several; so does this loader (``files.one_model_file``).
The file is unpickled: as with KServe, a model directory is trusted code, never a request.

A model must be able to answer before the server opens its port: an estimator that was never
fitted (``check_is_fitted``), or whose ``predict`` fails on one row of its declared input for a
reason other than that row's values, cannot load (the supervisor's ``ModelLoadFailed``), rather than
serving 400s that blame every client. A ``NotFittedError`` at predict time is the server's failure: 500.
"""

from __future__ import annotations

from pathlib import Path

import joblib
import numpy as np

from millpond.serving.models.base import InferenceInputError, ModelFailure, ModelLoadError, TensorSpec, datatype_of
from millpond.serving.models.files import SKLEARN_EXTENSIONS, mlflow_sklearn_file, one_model_file

METHODS = ("predict", "predict_proba", "decision_function")


class SklearnModel:
    """A fitted estimator answering ``predict`` (KServe's sklearnserver does the same by default), or ``method``:
    Seldon's SKLEARN_SERVER answers ``predict_proba`` by default, and its ``method`` parameter picks any of
    ``METHODS`` (Seldon's ``SKLearnServer(method=...)``)."""

    platform = "sklearn"

    def __init__(self, name: str, model_dir: Path, version: str | None = None, method: str = "predict") -> None:
        self.name = name
        self.version = version
        if method not in METHODS:
            raise ModelLoadError(f"method {method!r}: expected one of {', '.join(METHODS)}")
        self.method = method
        path = mlflow_sklearn_file(model_dir) or one_model_file(model_dir, SKLEARN_EXTENSIONS, "scikit-learn")
        try:
            estimator = joblib.load(path)  # reads plain pickles too, as KServe loads every extension
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad model file
            raise ModelLoadError(f"cannot load {path}: {type(exc).__name__}: {exc}") from None
        if not callable(getattr(estimator, "predict", None)):
            raise ModelLoadError(f"{path} holds a {type(estimator).__name__}, which has no predict()")
        if not callable(getattr(estimator, method, None)):
            raise ModelLoadError(f"{path} holds a {type(estimator).__name__}, which has no {method}() (the method "
                                 f"asked: Seldon's SKLEARN_SERVER calls predict_proba unless its 'method' parameter "
                                 f"names another)")
        self._estimator = estimator
        features = getattr(estimator, "n_features_in_", None)
        shape = (-1, int(features)) if isinstance(features, (int, np.integer)) else (-1,)
        self.inputs: tuple[TensorSpec, ...] = (TensorSpec("input-0", "FP64", shape),)
        classes = getattr(estimator, "classes_", None)
        out_type = datatype_of(np.asarray(classes).dtype) if classes is not None else "FP64"
        self.outputs: tuple[TensorSpec, ...] = (TensorSpec("output-0", out_type, (-1,)),)
        if method == "predict_proba":
            columns = (len(classes),) if classes is not None else (-1,)
            self.outputs = (TensorSpec("output-0", "FP64", (-1, *columns)),)
        elif method == "decision_function":
            self.outputs = (TensorSpec("output-0", "FP64", (-1,)),)
        self._answer = getattr(estimator, method)
        _check_answers(estimator, path, shape)

    def predict(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        from sklearn.exceptions import NotFittedError  # noqa: PLC0415 - scikit-learn is optional (the sklearn model format only)

        (rows,) = inputs
        try:
            return [np.asarray(self._answer(rows))]
        except NotFittedError as exc:  # a ValueError, but no fault of the request's
            raise ModelFailure(f"model {self.name!r} cannot predict: {exc}") from None
        except (ValueError, TypeError) as exc:  # sklearn's own input checks (NaN, strings, wrong width)
            raise InferenceInputError(f"model {self.name!r} refused the input: {exc}") from None


def _check_answers(estimator: object, path: Path, shape: tuple[int, ...]) -> None:
    """ModelLoadError when the estimator was never fitted, or cannot predict one row of zeros of its declared
    width for a reason other than the row's values (ValueError/TypeError: it may refuse zeros, not real rows)."""
    from sklearn.exceptions import NotFittedError  # noqa: PLC0415 - scikit-learn is optional (the sklearn model format only)
    from sklearn.utils.validation import check_is_fitted  # noqa: PLC0415 - scikit-learn is optional (the sklearn model format only)

    kind = type(estimator).__name__
    try:
        check_is_fitted(estimator)
    except NotFittedError as exc:
        raise ModelLoadError(f"{path} holds a {kind} that was never fitted: {exc}") from None
    except TypeError:  # not a scikit-learn estimator (a plain object with predict): the sample tells
        pass
    if len(shape) != 2:
        return
    try:
        estimator.predict(np.zeros((1, shape[1])))  # type: ignore[attr-defined]  # any object with predict
    except NotFittedError as exc:
        raise ModelLoadError(f"{path} holds a {kind} that was never fitted: {exc}") from None
    except (ValueError, TypeError):
        pass
    except Exception as exc:  # noqa: BLE001 - whatever else breaks it breaks every request
        raise ModelLoadError(f"{path}: its {kind} cannot predict one row of {shape[1]} zeros: "
                             f"{type(exc).__name__}: {exc}") from None
