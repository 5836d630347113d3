"""Write millpond's JSON Schemas for KServe's serving manifests from KServe's CRDs.

Schemas derived from the CRDs of KServe (kserve/kserve, ``config/crd/full``, Apache-2.0), the
same derivation as Fluid's, Kubeflow's and Kueue's (``derive_fluid_schemas.crd_schema``: prose
dropped, structure kept, unknown fields closed, ``status`` open), one file per kind and served
version, committed under ``src/millpond/serving/schemas/`` as ``<kind>.<version>.json``.
KServe's webhook rules (one predictor implementation, a storageUri millpond can read…) are not
JSON Schema: ``serving.manifests`` and ``serving.spec`` apply them. Run it again when the CRDs change:

    .venv/bin/python scripts/derive_kserve_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, derive_versions  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference" / "kserve"
DEFAULT_OUT = ROOT / "src" / "millpond" / "serving" / "schemas"
FILES = (("inferenceservices", "v1beta1"), ("servingruntimes", "v1alpha1"), ("clusterservingruntimes", "v1alpha1"))


def main() -> None:
    derive_versions(__doc__, DEFAULT_REFERENCE, DEFAULT_OUT,
                    [(f"serving.kserve.io_{file}.yaml", version) for file, version in FILES])


if __name__ == "__main__":
    main()
