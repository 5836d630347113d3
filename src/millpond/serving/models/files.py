"""Finding the one model file in a model directory, before any framework is imported.

KServe's sklearnserver takes the one file in the model directory whose name ends in ``.joblib``,
``.pkl`` or ``.pickle`` (``model.joblib`` in its samples) and refuses a directory with none or
several; the PyTorch loader does the same with ``.pt``/``.pth`` (``model.pt`` in KServe's samples,
TorchServe's ``--serialized-file``). Checking this first (no torch import, ~1 s) lets a wrong
directory fail at once, naming what was looked for.
"""

from __future__ import annotations

from pathlib import Path

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
