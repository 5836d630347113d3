"""Kueue's queueing kinds millpond applies, by the names kubectl accepts for them.

Five kinds make Kueue's model (``queues.model``): ResourceFlavor, ClusterQueue, LocalQueue,
WorkloadPriorityClass and Cohort, each read at ``kueue.x-k8s.io/v1beta2`` (Kueue's storage
version) and ``v1beta1`` (still served), with a JSON Schema per version derived from its CRD by
``scripts/derive_kueue_schemas.py``. Their names (kubectl's short names included: ``cq``,
``lq``/``queue``, ``rf``/``flavor``, ``wpc``, ``co``) go into ``millpond.kinds.REGISTRY`` with the
family's handler (``queues.handler``).

The rest of Kueue's kinds exist to reach beyond one cluster's scheduler, which millpond (one
machine, or a Ray cluster without Kubernetes nodes) does not have: ``REFUSED`` says why, in the
one line a user sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from millpond.errors import UserError
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY
from millpond.scheduling.queues.model import GROUP

OWNER = "scheduling.queues"
SCHEMAS_DIR = Path(__file__).parent / "schemas"
VERSIONS = ("v1beta2", "v1beta1")


@dataclass(frozen=True)
class QueueKind:
    kind: str
    plural: str
    short_names: tuple[str, ...] = ()
    cluster_scoped: bool = True  # every Kueue queueing kind but LocalQueue

    @property
    def resource(self) -> str:
        """How kubectl names the resource in its output: ``clusterqueue.kueue.x-k8s.io``."""
        return f"{self.kind.lower()}.{GROUP}"

    @property
    def names(self) -> KindName:
        """Its names in the one registry of kinds."""
        return KindName(self.kind, self.plural, GROUP, VERSIONS, OWNER, self.short_names, self.cluster_scoped)

    def api_versions(self) -> tuple[str, ...]:
        return tuple(f"{GROUP}/{version}" for version in VERSIONS)

    def schema_file(self, api_version: str) -> Path:
        return SCHEMAS_DIR / f"{self.kind.lower()}.{api_version.rsplit('/', 1)[-1]}.json"


KINDS: dict[str, QueueKind] = {info.kind: info for info in (
    QueueKind("ResourceFlavor", "resourceflavors", ("flavor", "flavors", "rf")),
    QueueKind("ClusterQueue", "clusterqueues", ("cq",)),
    QueueKind("LocalQueue", "localqueues", ("queue", "queues", "lq"), cluster_scoped=False),
    QueueKind("WorkloadPriorityClass", "workloadpriorityclasses", ("wpc",)),
    QueueKind("Cohort", "cohorts", ("co",)),
)}

_CHECKS = "run by a controller of a Kubernetes cluster"
REFUSED = {
    "AdmissionCheck": f"AdmissionCheck: Kueue's admission checks (MultiKueue, ProvisioningRequest) are {_CHECKS}; "
                      "millpond admits on quota alone",
    "MultiKueueConfig": "MultiKueueConfig: MultiKueue dispatches workloads to remote Kubernetes clusters; "
                        "millpond runs them on this machine or its Ray cluster",
    "MultiKueueCluster": "MultiKueueCluster: MultiKueue dispatches workloads to remote Kubernetes clusters "
                         "(a kubeconfig); millpond runs them on this machine or its Ray cluster",
    "ProvisioningRequestConfig": "ProvisioningRequestConfig: ProvisioningRequests ask a cluster autoscaler for "
                                 "nodes; millpond has no autoscaler",
    "Topology": "Topology: topology-aware scheduling places pods by the node labels of a Kubernetes cluster "
                "(blocks, racks, hosts); millpond has no such nodes",
    "DynamicResourceAllocationConfig": "DynamicResourceAllocationConfig: it maps a Kubernetes cluster's DRA "
                                       "device classes to quota; millpond has no DRA devices",
    "Workload": "Workload: Kueue makes Workloads from jobs itself; submit the job with a "
                "kueue.x-k8s.io/queue-name label (or --queue) instead",
}

_PLURALS = {"AdmissionCheck": "admissionchecks", "MultiKueueConfig": "multikueueconfigs",
            "MultiKueueCluster": "multikueueclusters", "ProvisioningRequestConfig": "provisioningrequestconfigs",
            "Topology": "topologies", "DynamicResourceAllocationConfig": "dynamicresourceallocationconfigs"}
# The names ``get``/``delete`` refuse with the reason. (Workload is left to whoever shows workloads:
# ``millpond queue get`` does.)
REFUSED_NAMES = {name: REFUSED[kind] for kind, plural in _PLURALS.items() for name in (kind, plural)}
REGISTRY.register((info.names for info in KINDS.values()), REFUSED_NAMES)  # the handler: queues.handler


def check_api_version(info: QueueKind, api_version: object) -> str:
    """The document's apiVersion if millpond reads it for this kind; UserError names the ones it reads."""
    if api_version in info.api_versions():
        return str(api_version)
    raise UserError(f"{info.kind}: apiVersion {api_version!r} is not supported "
                    f"(millpond reads {' and '.join(info.api_versions())})")


# An AdmissionCheck's controller, by its controllerName: what the refusal names.
_CONTROLLERS = {f"{GROUP}/multikueue": "MultiKueueConfig", f"{GROUP}/provisioning-request": "ProvisioningRequestConfig"}


def refusal(doc: object) -> str | None:
    """Why a Kueue document of a kind millpond cannot give meaning to is refused, or None.

    An AdmissionCheck is refused for what its controller does (MultiKueue, ProvisioningRequest).
    """
    if not isinstance(doc, dict) or not str(doc.get("apiVersion") or "").startswith(f"{GROUP}/"):
        return None
    kind = doc.get("kind")
    if kind == "AdmissionCheck":
        spec = doc.get("spec")
        name = spec.get("controllerName") if isinstance(spec, dict) else None
        controller = _CONTROLLERS.get(name) if isinstance(name, str) else None
        if controller is not None:
            return "AdmissionCheck: " + REFUSED[controller].split(": ", 1)[1]
    return REFUSED.get(kind) if isinstance(kind, str) else None
