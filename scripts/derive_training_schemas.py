"""Write millpond's JSON Schemas for Kubeflow's training manifests from Kubeflow's CRDs.

Schemas derived from the CRDs of Kubeflow Training Operator v1 (kubeflow/training-operator),
the MPI Operator (kubeflow/mpi-operator) and Kubeflow Trainer v2 (kubeflow/trainer), Apache-2.0.

The same derivation as Fluid's (``derive_fluid_schemas.compact``: prose dropped, structure
kept, unknown fields closed, ``status`` open), one file per kind and version, committed under
``src/millpond/training/schemas/`` as ``<kind>.<version>.json``. Run it again when the CRDs change:

    .venv/bin/python scripts/derive_training_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, derive_versions  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference"
DEFAULT_OUT = ROOT / "src" / "millpond" / "training" / "schemas"

# (file under the reference folder, version): the kinds and versions millpond's training kinds read.
SOURCES = (
    ("kubeflow-training/kubeflow.org_pytorchjobs.yaml", "v1"),
    ("kubeflow-training/kubeflow.org_tfjobs.yaml", "v1"),
    ("kubeflow-training/kubeflow.org_mpijobs.yaml", "v1"),
    ("kubeflow-training/kubeflow.org_mpijobs.v2beta1.yaml", "v2beta1"),
    ("kubeflow-trainer/trainer.kubeflow.org_trainjobs.yaml", "v1alpha1"),
    ("kubeflow-trainer/trainer.kubeflow.org_trainingruntimes.yaml", "v1alpha1"),
    ("kubeflow-trainer/trainer.kubeflow.org_clustertrainingruntimes.yaml", "v1alpha1"),
)


def main() -> None:
    derive_versions(__doc__, DEFAULT_REFERENCE, DEFAULT_OUT, SOURCES)


if __name__ == "__main__":
    main()
