"""Finding the one model file in a model directory, before any framework is imported.

KServe's sklearnserver takes the one file in the model directory whose name ends in ``.joblib``,
``.pkl`` or ``.pickle`` (``model.joblib`` in its samples) and refuses a directory with none or
several; the PyTorch loader does the same with ``.pt``/``.pth`` (``model.pt`` in KServe's samples,
TorchServe's ``--serialized-file``). Checking this first (no torch import, ~1 s) lets a wrong
directory fail at once, naming what was looked for.

An MLflow model folder (an ``MLmodel`` file beside the model, as ``mlflow.sklearn.save_model`` writes it, what
Seldon's MLFLOW_SERVER loads with ``mlflow.pyfunc.load_model``) names its file itself: its ``sklearn`` flavor's
``pickled_model`` (:func:`mlflow_sklearn_file`). MLflow is not installed here, so only that flavor is served,
by the scikit-learn loader; another flavor is a ModelLoadError naming it (a simplification of pyfunc).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from millpond.serving.models.base import ModelLoadError

SKLEARN_EXTENSIONS = (".joblib", ".pkl", ".pickle")
PYTORCH_EXTENSIONS = (".pt", ".pth")


def one_model_file(model_dir: Path, extensions: tuple[str, ...], framework: str) -> Path:
    """The one file in ``model_dir`` ending in one of ``extensions`` (ModelLoadError: no dir, none, several)."""
    if not model_dir.is_dir():
        raise ModelLoadError(f"model directory {model_dir} does not exist or is not a directory")
    found = sorted(path for path in model_dir.iterdir() if path.suffix in extensions and path.is_file())
    if not found:
        raise ModelLoadError(
            f"no {framework} model in {model_dir}: expected one file ending in {', '.join(extensions)}"
        )
    if len(found) > 1:
        raise ModelLoadError(f"more than one model file in {model_dir}: {', '.join(p.name for p in found)}")
    return found[0]


MLMODEL = "MLmodel"


def mlflow_sklearn_file(model_dir: Path) -> Path | None:
    """The pickled estimator an MLflow model folder names (its ``sklearn`` flavor), or None for a folder that is
    not an MLflow model (no ``MLmodel``); ModelLoadError for another flavor, or a file outside the folder."""
    described = model_dir / MLMODEL
    if not described.is_file():
        return None
    try:
        flavors = (yaml.safe_load(described.read_text(encoding="utf-8")) or {}).get("flavors") or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError) as exc:
        raise ModelLoadError(f"{described}: not an MLflow model description: {exc}") from None
    sklearn = flavors.get("sklearn") if isinstance(flavors, dict) else None
    if not isinstance(sklearn, dict):
        names = ", ".join(sorted(flavors)) if isinstance(flavors, dict) else "none"
        raise ModelLoadError(f"{described}: an MLflow model of flavor(s) {names}: millpond serves MLflow's sklearn "
                             "flavor (MLflow itself is not installed here)")
    name = str(sklearn.get("pickled_model") or "model.pkl")
    path = (model_dir / name).resolve()
    if not path.is_relative_to(model_dir.resolve()) or not path.is_file():
        raise ModelLoadError(f"{described}: its sklearn flavor's pickled_model {name!r} is not a file of {model_dir}")
    return path
