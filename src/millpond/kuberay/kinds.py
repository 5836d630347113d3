"""KubeRay's kinds millpond applies, by the names kubectl accepts for them: a light table.

RayCluster and RayJob are read at ``ray.io/v1`` (KubeRay's storage version; ``v1alpha1`` is
deprecated upstream and not read here), each with a JSON Schema derived from its CRD by
``scripts/derive_kuberay_schemas.py``. KubeRay's CRDs declare no short names, so kubectl knows
none; neither does millpond. The names go into ``millpond.kinds.REGISTRY`` with the family's
handler (``kuberay.handler``), which alone imports what runs them: resolving a name (``millpond
get rayclusters``) imports no Ray.

RayService (Ray Serve applications behind a RayCluster, upgraded with zero downtime) and RayCronJob
(a RayJob on a schedule) are refused with the reason in one line: ``REFUSED``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from millpond.errors import UserError
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "kuberay"
GROUP = "ray.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
SCHEMAS_DIR = Path(__file__).parent / "schemas"
CLUSTER_LABEL = "ray.io/cluster"  # KubeRay's label naming a RayCluster (a RayJob's clusterSelector reads it)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


@dataclass(frozen=True)
class RayKind:
    kind: str
    plural: str

    @property
    def names(self) -> KindName:
        """Its names in the one registry of kinds."""
        return KindName(self.kind, self.plural, GROUP, (VERSION,), OWNER)

    @property
    def resource(self) -> str:
        """How kubectl names the resource in its output: ``raycluster.ray.io``."""
        return f"{self.kind.lower()}.{GROUP}"

    def schema_file(self) -> Path:
        return SCHEMAS_DIR / f"{self.kind.lower()}.{VERSION}.json"


RAY_CLUSTER = RayKind("RayCluster", "rayclusters")
RAY_JOB = RayKind("RayJob", "rayjobs")
KINDS: dict[str, RayKind] = {info.kind: info for info in (RAY_CLUSTER, RAY_JOB)}

REFUSED = {
    "RayService": "RayService: Ray Serve applications upgraded with zero downtime behind a Kubernetes Service "
                  "are not served by millpond; run a RayCluster and `serve run` on it, or serve the model as a "
                  "KServe InferenceService",
    "RayCronJob": "RayCronJob: scheduled RayJobs are not run by millpond; apply the RayJob when it should run",
}
_PLURALS = {"RayService": "rayservices", "RayCronJob": "raycronjobs"}
# The names ``get``/``delete`` refuse with the reason.
REFUSED_NAMES = {name: REFUSED[kind] for kind, plural in _PLURALS.items() for name in (kind, plural)}
REGISTRY.register((info.names for info in KINDS.values()), REFUSED_NAMES)  # the handler: kuberay.handler


def check_api_version(info: RayKind, api_version: object) -> str:
    """The document's apiVersion if millpond reads it for this kind; UserError names the one it reads."""
    if api_version == API_VERSION:
        return API_VERSION
    raise UserError(f"{info.kind}: apiVersion {api_version!r} is not supported (millpond reads {API_VERSION})")


def refusal(doc: object) -> str | None:
    """Why a KubeRay document of a kind millpond does not run is refused, or None."""
    if not isinstance(doc, dict) or not str(doc.get("apiVersion") or "").startswith(f"{GROUP}/"):
        return None
    kind = doc.get("kind")
    return REFUSED.get(kind) if isinstance(kind, str) else None
