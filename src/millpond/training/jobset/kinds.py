"""``jobset.x-k8s.io/v1alpha2`` JobSet in the one registry of kinds: kubectl's names for it (``jobset``,
``jobsets``, ``jobsets.jobset.x-k8s.io``). JobSet's CRD declares no short name, so millpond has none.
The handler is ``training.jobset.handler``.
"""

from __future__ import annotations

from pathlib import Path

from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "training.jobset"
GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "JobSet"
SCHEMA = Path(__file__).parent / "schemas" / "jobset.v1alpha2.json"  # scripts/derive_jobset_schemas.py

JOBSET = KindName(KIND, "jobsets", GROUP, (VERSION,), OWNER)

REGISTRY.register([JOBSET])
