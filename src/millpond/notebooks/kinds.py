"""Kubeflow's Notebook kind, by the names kubectl accepts for it: a light table.

The notebook controller's CRD (``kubeflow.org_notebooks.yaml``) serves ``v1`` (its storage version),
``v1beta1`` and ``v1alpha1``; millpond reads ``v1`` and ``v1beta1`` (same schema; ``v1alpha1`` is
deprecated upstream), each against a JSON Schema derived from the CRD with its install's validation
patch (``scripts/derive_notebook_schemas.py``). The CRD declares no short names; neither does millpond.
The handler (``notebooks.handler``) alone imports what runs a notebook.
"""

from __future__ import annotations

from pathlib import Path

from millpond.errors import UserError
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "notebooks"
GROUP = "kubeflow.org"
VERSIONS = ("v1", "v1beta1")
SCHEMAS_DIR = Path(__file__).parent / "schemas"
NOTEBOOK = KindName("Notebook", "notebooks", GROUP, VERSIONS, OWNER)
# The notebook controller's vocabulary: the annotation that stops a notebook (its value: when), the one the
# culler writes, the labels of the notebook's pod, and the base URL the image's Jupyter is started with.
STOP_ANNOTATION = "kubeflow-resource-stopped"
LAST_ACTIVITY_ANNOTATION = "notebooks.kubeflow.org/last-activity"
NAME_LABEL = "notebook-name"
STATEFULSET_LABEL = "statefulset"
PREFIX = "/notebook"

REGISTRY.register([NOTEBOOK])  # the handler: notebooks.handler


def base_url(namespace: str, name: str) -> str:
    """Kubeflow's ``NB_PREFIX``: ``/notebook/NAMESPACE/NAME``, the path the notebook is reached at."""
    return f"{PREFIX}/{namespace}/{name}"


def schema_file(api_version: str) -> Path:
    """The JSON Schema of the document's apiVersion; UserError names the versions millpond reads."""
    group, _, version = api_version.partition("/")
    if group != GROUP or version not in VERSIONS:
        raise UserError(f"Notebook: apiVersion {api_version!r} is not supported (millpond reads "
                        f"{', '.join(f'{GROUP}/{v}' for v in VERSIONS)})")
    return SCHEMAS_DIR / f"notebook.{version}.json"
