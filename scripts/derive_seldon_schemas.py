"""Write millpond's JSON Schemas for Seldon Core v1's SeldonDeployment from its CRD.

Derived from Seldon Core's CRD (SeldonIO/seldon-core, tag ``v1.17.1``, commit 822053e7,
``operator/config/crd/bases/machinelearning.seldon.io_seldondeployments.yaml``), Apache-2.0 at that tag.
The same derivation as Fluid's (``derive_fluid_schemas.compact``: prose dropped, structure kept, unknown
fields closed, ``status`` open); one file per served version (v1, the storage version, v1alpha2 and
v1alpha3), under ``src/millpond/serving/seldon/schemas/``. ``graph.children`` is ``items: {}`` in the base
CRD (the install's ``graph_children.yaml`` patch spells the recursion out a few levels): millpond checks each
child node itself (``serving.seldon.graph``), to any depth it accepts.

    .venv/bin/python scripts/derive_seldon_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, derive_versions  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference"
DEFAULT_OUT = ROOT / "src" / "millpond" / "serving" / "seldon" / "schemas"
SOURCE = "seldon/machinelearning.seldon.io_seldondeployments.yaml"
VERSIONS = ("v1", "v1alpha2", "v1alpha3")


def main() -> None:
    derive_versions(__doc__, DEFAULT_REFERENCE, DEFAULT_OUT, [(SOURCE, version) for version in VERSIONS])


if __name__ == "__main__":
    main()
