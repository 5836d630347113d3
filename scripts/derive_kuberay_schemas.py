"""Write millpond's JSON Schemas for KubeRay's manifests from KubeRay's CRDs.

Schemas derived from the CRDs of KubeRay (ray-project/kuberay, ``ray-operator/config/crd/bases``,
v1.7.0), Apache-2.0. The same derivation as Fluid's (``derive_fluid_schemas.compact``: prose
dropped, structure kept, unknown fields closed, ``status`` open), one file per kind, committed
under ``src/millpond/kuberay/schemas/`` as ``<kind>.v1.json``. Run it again when the CRDs change:

    .venv/bin/python scripts/derive_kuberay_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, derive_versions  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference"
DEFAULT_OUT = ROOT / "src" / "millpond" / "kuberay" / "schemas"

# (file under the reference folder, version): the kinds millpond's KubeRay family reads.
SOURCES = (
    ("kuberay/ray.io_rayclusters.yaml", "v1"),
    ("kuberay/ray.io_rayjobs.yaml", "v1"),
)


def main() -> None:
    derive_versions(__doc__, DEFAULT_REFERENCE, DEFAULT_OUT, SOURCES)


if __name__ == "__main__":
    main()
