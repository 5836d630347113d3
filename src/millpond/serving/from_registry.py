"""A registered model version as an InferenceService: what ``millpond serve --model NAME[:VERSION]`` serves.

The predictor's ``storageUri`` is the reference ``model-registry://NAME/VERSION`` (``model-registry://NAME``:
the latest version), resolved by the supervisor's fetch as the model registry's KServe storage initializer
resolves it (``serving.registry_refs``), so the stored object reads as one a user would write for KServe.
The reference is checked here first, so a missing model or version is an error before anything is stored.
The format is the one asked, else the model artifact's ``modelFormatName`` (``sklearn``/``scikit-learn``,
``pytorch``/``torch``).
"""

from __future__ import annotations

import re
from typing import Any

from millpond.errors import UserError
from millpond.serving.formats import SERVED_FORMATS
from millpond.serving.from_run import shorthand_service
from millpond.serving.registry_refs import SCHEME, UnresolvedReference, resolve_artifact
from millpond.store.model_registry import RegistryStore

_FORMATS = {"sklearn": "sklearn", "scikit-learn": "sklearn", "scikit_learn": "sklearn", "pytorch": "pytorch",
            "torch": "pytorch", "torchscript": "pytorch"}
REGISTERED_ANNOTATION = "millpond.io/registered-model"  # NAME:VERSION the service was made from


def reference(model: str) -> str:
    """``NAME[:VERSION]`` as a ``model-registry://`` reference; UserError for an empty name or version."""
    name, sep, version = model.rpartition(":") if ":" in model else (model, "", "")
    if not name.strip() or (sep and not version.strip()) or "/" in name or "/" in version:
        raise UserError(f"--model {model!r}: expected NAME or NAME:VERSION of a registered model")
    return f"{SCHEME}://{name}/{version}" if sep else f"{SCHEME}://{name}"


def default_name(model: str) -> str:
    """An InferenceService name for ``NAME[:VERSION]``: a DNS label led by a letter."""
    raw = re.sub(r"[^a-z0-9-]+", "-", model.lower()).strip("-")
    raw = raw if raw[:1].isalpha() else f"model-{raw}"
    return raw[:63].rstrip("-") or "model"


def inference_service(model: str, name: str, namespace: str, fmt: str, replicas: int,
                      store: RegistryStore) -> dict[str, Any]:
    """The InferenceService serving registered ``NAME[:VERSION]`` of ``namespace``'s registry."""
    uri = reference(model)
    try:
        artifact = resolve_artifact(uri, namespace, store)
    except UnresolvedReference as exc:  # bad input here: nothing is stored
        raise UserError(f"--model {model}: {exc}") from None
    declared = str(artifact.properties.get("modelFormatName") or "").strip().lower()
    chosen = fmt.strip().lower() or _FORMATS.get(declared, "")
    if not chosen:
        raise UserError(f"--model {model}: its model artifact's modelFormatName is {declared or 'empty'!r}: give "
                        f"--format ({' or '.join(SERVED_FORMATS)})")
    return shorthand_service(name, namespace, chosen, uri, replicas, annotations={REGISTERED_ANNOTATION: model})
