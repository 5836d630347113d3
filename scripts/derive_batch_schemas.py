"""Write millpond's JSON Schema for Kubernetes' ``batch/v1`` Job from the JobSet CRD, which embeds it.

A Job is a built-in kind: no CRD of its own is in ``../shared/reference/``. JobSet's CRD
(kubernetes-sigs/jobset, Apache-2.0) holds, under ``spec.replicatedJobs[].template``, the whole
``batch/v1`` JobTemplateSpec generated from ``k8s.io/api/batch/v1`` (JobSpec with its pod template),
so the Job's schema is that JobSpec in the same envelope and with the same derivation as Fluid's
(``derive_fluid_schemas.compact``: prose dropped, structure kept, unknown fields closed). Written to
``src/millpond/training/batch/schemas/job.v1.json``; run it again when the reference changes:

    .venv/bin/python scripts/derive_batch_schemas.py [--reference DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_fluid_schemas import ROOT, compact, envelope, write_schema  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference"
DEFAULT_OUT = ROOT / "src" / "millpond" / "training" / "batch" / "schemas"
SOURCE = "jobset/jobset.x-k8s.io_jobsets.yaml"


def job_schema(reference: Path) -> dict[str, object]:
    """The Job's schema: JobSet's embedded JobSpec in a Kubernetes object's envelope."""
    crd = yaml.safe_load((reference / SOURCE).read_text(encoding="utf-8"))
    [version] = crd["spec"]["versions"][-1:]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicatedJobs"]
    return envelope(compact(spec["items"]["properties"]["template"]["properties"]["spec"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="the shared reference folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON Schema goes")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    write_schema(args.out / "job.v1.json", job_schema(args.reference))


if __name__ == "__main__":
    main()
