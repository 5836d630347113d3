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

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, crd_schema  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference" / "kueue"
DEFAULT_OUT = ROOT / "src" / "millpond" / "scheduling" / "queues" / "schemas"
FILES = ("resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses", "cohorts")
VERSIONS = ("v1beta1", "v1beta2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="the folder of Kueue's CRDs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON Schemas go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for file in FILES:
        for version in VERSIONS:
            kind, schema = crd_schema(args.reference / f"kueue.x-k8s.io_{file}.yaml", version)
            target = args.out / f"{kind.lower()}.{version}.json"
            target.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
            print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")


if __name__ == "__main__":
    main()
