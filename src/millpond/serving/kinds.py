"""KServe's serving kinds millpond applies, by the names kubectl accepts for them.

InferenceService (``serving.kserve.io/v1beta1``, short name ``isvc``) is the model to serve;
ServingRuntime and ClusterServingRuntime (``v1alpha1``) name the model servers a predictor's
``modelFormat`` may pick (``serving.spec`` maps formats to runtimes as KServe's default
ClusterServingRuntimes do). Each has a JSON Schema derived from its CRD by
``scripts/derive_kserve_schemas.py``; their names go into ``millpond.kinds.REGISTRY`` with the family's
handler (``serving.handler``).

KServe's other kinds are refused in one line (``REFUSED``): routing graphs, LLM services and
node-local model caches need pieces millpond does not have, or has not built yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from millpond.errors import UserError
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "serving"
GROUP = "serving.kserve.io"
SCHEMAS_DIR = Path(__file__).parent / "schemas"


@dataclass(frozen=True)
class ServingKind:
    kind: str
    plural: str
    version: str
    short_names: tuple[str, ...] = ()
    cluster_scoped: bool = False

    @property
    def resource(self) -> str:
        """How kubectl names the resource in its output: ``inferenceservice.serving.kserve.io``."""
        return f"{self.kind.lower()}.{GROUP}"

    @property
    def names(self) -> KindName:
        """Its names in the one registry of kinds."""
        # an InferenceService's status is reset by the apply that changes its spec (objects.apply): it follows it
        return KindName(self.kind, self.plural, GROUP, (self.version,), OWNER, self.short_names, self.cluster_scoped,
                        status_follows_spec=self.kind == "InferenceService")

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.version}"

    @property
    def schema_file(self) -> Path:
        return SCHEMAS_DIR / f"{self.kind.lower()}.{self.version}.json"


KINDS: dict[str, ServingKind] = {info.kind: info for info in (
    ServingKind("InferenceService", "inferenceservices", "v1beta1", ("isvc",)),
    ServingKind("ServingRuntime", "servingruntimes", "v1alpha1"),
    ServingKind("ClusterServingRuntime", "clusterservingruntimes", "v1alpha1", cluster_scoped=True),
)}

_CACHE = ("node-local model caches are filled by KServe's agent on each Kubernetes node; millpond "
          "reads a predictor's storageUri directly")
REFUSED = {
    "InferenceGraph": ("InferenceGraph: routing between InferenceServices (Sequence, Switch, Ensemble, Splitter) "
                       "is not served by millpond yet; query each InferenceService itself"),
    "TrainedModel": ("TrainedModel: multi-model serving loads models into a shared KServe server; millpond serves "
                     "one model per InferenceService"),
    "LLMInferenceService": ("LLMInferenceService: it deploys vLLM with the Gateway API and llm-d schedulers "
                            "of a Kubernetes cluster; millpond has neither"),
    "LLMInferenceServiceConfig": ("LLMInferenceServiceConfig: it configures LLMInferenceServices, which "
                                  "millpond does not run"),
    "ClusterStorageContainer": ("ClusterStorageContainer: it adds a storage-initializer container to a "
                                "Kubernetes pod; millpond fetches a storageUri itself"),
    "LocalModelCache": f"LocalModelCache: {_CACHE}",
    "LocalModelNamespaceCache": f"LocalModelNamespaceCache: {_CACHE}",
    "LocalModelNodeGroup": f"LocalModelNodeGroup: {_CACHE}",
    "LocalModelNode": f"LocalModelNode: {_CACHE}",
}
_REFUSED_NAMES = {"InferenceGraph": ("inferencegraphs", "ig"), "TrainedModel": ("trainedmodels", "tm"),
                  "LLMInferenceService": ("llminferenceservices", "llmisvc"),
                  "LLMInferenceServiceConfig": ("llminferenceserviceconfigs",),
                  "ClusterStorageContainer": ("clusterstoragecontainers",),
                  "LocalModelCache": ("localmodelcaches",), "LocalModelNamespaceCache": ("localmodelnamespacecaches",),
                  "LocalModelNodeGroup": ("localmodelnodegroups",), "LocalModelNode": ("localmodelnodes",)}

REFUSED_NAMES = {name: REFUSED[kind] for kind, names in _REFUSED_NAMES.items() for name in (kind, *names)}
REGISTRY.register((info.names for info in KINDS.values()), REFUSED_NAMES)  # the handler: serving.handler


def refusal(doc: object) -> str | None:
    """Why a KServe document of a kind millpond does not apply is refused, or None."""
    if not isinstance(doc, dict) or not str(doc.get("apiVersion") or "").startswith(f"{GROUP}/"):
        return None
    kind = doc.get("kind")
    return REFUSED.get(kind) if isinstance(kind, str) else None


def check_api_version(info: ServingKind, api_version: object) -> str:
    """The document's apiVersion if millpond reads it for this kind; UserError names the one it reads."""
    if api_version == info.api_version:
        return info.api_version
    raise UserError(f"{info.kind}: apiVersion {api_version!r} is not supported (millpond reads {info.api_version})")
