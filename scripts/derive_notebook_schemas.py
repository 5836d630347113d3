"""Write millpond's JSON Schemas for Kubeflow's Notebook from the notebook controller's CRD.

Derived from Kubeflow Notebooks' CRD (kubeflow/notebooks, branch ``notebooks-v1``,
``components/notebook-controller/config/crd/bases/kubeflow.org_notebooks.yaml``), Apache-2.0, with the
install's ``patches/validation_patches.yaml`` applied (each container needs ``name`` and ``image``,
``containers`` at least one item). The same derivation as Fluid's (``derive_fluid_schemas.compact``:
prose dropped, structure kept, unknown fields closed, ``status`` open); one file per served version
millpond reads (v1, the storage version, and v1beta1), under ``src/millpond/notebooks/schemas/``:

    .venv/bin/python scripts/derive_notebook_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, derive_versions  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference"
DEFAULT_OUT = ROOT / "src" / "millpond" / "notebooks" / "schemas"
SOURCE = "notebooks/kubeflow.org_notebooks.yaml"
VERSIONS = ("v1", "v1beta1")


def patched(schema: dict) -> dict:
    """The validation patch of the notebook controller's install, on the derived schema."""
    containers = schema["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"][
        "containers"]
    containers["items"]["required"] = ["name", "image"]
    containers["minItems"] = 1
    return schema


def main() -> None:
    derive_versions(__doc__, DEFAULT_REFERENCE, DEFAULT_OUT, [(SOURCE, version) for version in VERSIONS], patched)


if __name__ == "__main__":
    main()
