"""Write millpond's JSON Schemas for Katib's Experiment, Suggestion and Trial from Katib's CRDs.

Derived from Katib's CRDs (kubeflow/katib, ``manifests/v1beta1/components/crd/{experiment,suggestion,
trial}.yaml``, copied in ``shared/reference/katib/``), Apache-2.0. Katib's CRDs carry no structural
schema (``type: object`` with ``x-kubernetes-preserve-unknown-fields``): every check of an Experiment is
its validating webhook's, which millpond does in ``katib.webhook``. The derivation keeps what the CRD
says (an object, unknown fields kept) and the envelope every object has (``apiVersion``, ``kind``,
``metadata`` strings and maps, ``spec`` and ``status`` objects), one file per kind under
``src/millpond/katib/schemas/``:

    .venv/bin/python scripts/derive_katib_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, compact, write_schema  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference" / "katib"
DEFAULT_OUT = ROOT / "src" / "millpond" / "katib" / "schemas"
FILES = ("experiment.yaml", "suggestion.yaml", "trial.yaml")
VERSION = "v1beta1"


def derived(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD's schema of ``VERSION`` (an open object upstream) with the envelope's fields typed."""
    [version] = [one for one in crd["spec"]["versions"] if one["name"] == VERSION]
    schema = compact(version["schema"]["openAPIV3Schema"])
    properties = schema.setdefault("properties", {})
    properties.setdefault("apiVersion", {"type": "string"})
    properties.setdefault("kind", {"type": "string"})
    properties.setdefault("metadata", {"type": "object"})
    properties.setdefault("spec", {"type": "object"})
    properties.setdefault("status", {"type": "object"})
    return schema


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="the folder of Katib's CRDs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON Schemas go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for file in FILES:
        crd = yaml.safe_load((args.reference / file).read_text(encoding="utf-8"))
        write_schema(args.out / f"{crd['spec']['names']['kind'].lower()}.{VERSION}.json", derived(crd))


if __name__ == "__main__":
    main()
