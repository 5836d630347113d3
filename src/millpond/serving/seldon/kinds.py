"""Seldon Core v1's SeldonDeployment by the names kubectl accepts for it (short name ``sdep``): a light table.

Seldon's CRD (v1.17.1, the last Apache-2.0 release of Seldon Core v1) serves ``v1`` (its storage version),
``v1alpha2`` and ``v1alpha3`` with one schema; millpond reads all three, each against the JSON Schema
derived from the CRD (``scripts/derive_seldon_schemas.py``), and stores the object as written. The CRD has
no printer columns: kubectl shows NAME and AGE. The handler (``serving.seldon.handler``) alone imports
what serves one.
"""

from __future__ import annotations

from pathlib import Path

from millpond.errors import UserError
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "serving.seldon"
GROUP = "machinelearning.seldon.io"
VERSIONS = ("v1", "v1alpha2", "v1alpha3")
KIND = "SeldonDeployment"
SCHEMAS_DIR = Path(__file__).parent / "schemas"
SELDON_DEPLOYMENT = KindName(KIND, "seldondeployments", GROUP, VERSIONS, OWNER, ("sdep",))

REGISTRY.register([SELDON_DEPLOYMENT])  # the handler: serving.seldon.handler


def schema_file(api_version: object) -> Path:
    """The JSON Schema of the document's apiVersion; UserError names the versions millpond reads."""
    group, _, version = str(api_version or "").partition("/")
    if group != GROUP or version not in VERSIONS:
        raise UserError(f"{KIND}: apiVersion {api_version!r} is not supported (millpond reads "
                        f"{', '.join(f'{GROUP}/{v}' for v in VERSIONS)})")
    return SCHEMAS_DIR / f"seldondeployment.{version}.json"
