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

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, crd_schema  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference" / "kserve"
DEFAULT_OUT = ROOT / "src" / "millpond" / "serving" / "schemas"
FILES = (("inferenceservices", "v1beta1"), ("servingruntimes", "v1alpha1"), ("clusterservingruntimes", "v1alpha1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="the folder of KServe's CRDs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON Schemas go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for file, version in FILES:
        kind, schema = crd_schema(args.reference / f"serving.kserve.io_{file}.yaml", version)
        target = args.out / f"{kind.lower()}.{version}.json"
        target.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
        print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")


if __name__ == "__main__":
    main()
