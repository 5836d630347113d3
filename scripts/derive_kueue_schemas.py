"""Write millpond's JSON Schemas for Kueue's queueing manifests from Kueue's CRDs.

Schemas derived from the CRDs of Kueue (kubernetes-sigs/kueue, ``config/components/crd/bases``,
Apache-2.0), the same derivation as Fluid's and Kubeflow's (``derive_fluid_schemas.crd_schema``:
prose dropped, structure kept, unknown fields closed, ``status`` open), one file per kind and
served version, committed under ``src/millpond/scheduling/queues/schemas/`` as
``<kind>.<version>.json``. The CRDs' CEL rules are not JSON Schema: ``queues.checks`` applies
them, with Kueue's webhooks. Run it again when the CRDs change:

    .venv/bin/python scripts/derive_kueue_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, derive_versions  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference" / "kueue"
DEFAULT_OUT = ROOT / "src" / "millpond" / "scheduling" / "queues" / "schemas"
FILES = ("resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses", "cohorts")
VERSIONS = ("v1beta1", "v1beta2")


def main() -> None:
    derive_versions(__doc__, DEFAULT_REFERENCE, DEFAULT_OUT,
                    [(f"kueue.x-k8s.io_{file}.yaml", version) for file in FILES for version in VERSIONS])


if __name__ == "__main__":
    main()
