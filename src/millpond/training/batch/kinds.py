"""``batch/v1`` Job in the one registry of kinds: kubectl's names for it (``job``, ``jobs``, ``jobs.batch``).

kubectl knows no short name for jobs (``kubectl api-resources`` lists none), so millpond has none.
The handler is ``training.batch.handler``.
"""

from __future__ import annotations

from pathlib import Path

from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "training.batch"
GROUP = "batch"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Job"
SCHEMA = Path(__file__).parent / "schemas" / "job.v1.json"  # scripts/derive_batch_schemas.py

JOB = KindName(KIND, "jobs", GROUP, (VERSION,), OWNER)

REGISTRY.register([JOB])
