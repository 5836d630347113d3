"""Write millpond's JSON Schema for Kubernetes' ``jobset.x-k8s.io/v1alpha2`` JobSet from JobSet's CRD.

Schema derived from the CRD of JobSet (kubernetes-sigs/jobset, ``config/components/crd/bases``,
Apache-2.0), the same derivation as Fluid's, Kubeflow's and Kueue's (``derive_fluid_schemas.crd_schema``:
prose dropped, structure kept, unknown fields closed, ``status`` open), committed under
``src/millpond/training/jobset/schemas/`` as ``jobset.v1alpha2.json``. JobSet's webhook rules (an unnamed
failure-policy rule named ``failurePolicyRuleN``, unique rule names, ``dependsOn`` naming an earlier
replicatedJob…) are not JSON Schema: ``training.jobset.manifest`` applies them. Run it again when the CRD
changes:

    .venv/bin/python scripts/derive_jobset_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, derive_versions  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference" / "jobset"
DEFAULT_OUT = ROOT / "src" / "millpond" / "training" / "jobset" / "schemas"


def main() -> None:
    derive_versions(__doc__, DEFAULT_REFERENCE, DEFAULT_OUT, [("jobset.x-k8s.io_jobsets.yaml", "v1alpha2")])


if __name__ == "__main__":
    main()
