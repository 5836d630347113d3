"""The Fluid kinds millpond knows, by the names kubectl accepts for them.

One table says, for each ``data.fluid.io/v1alpha1`` kind, what it is (dataset, runtime or
data operation), how kubectl spells it (``datasets``, ``alluxio``, ``load``…) and which of
its spec fields millpond acts on; the other fields are recorded and reported, not applied.
Its names go into ``millpond.kinds.REGISTRY`` with the family's handler (``datasets.handler``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "datasets"
GROUP = "data.fluid.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

Category = Literal["dataset", "runtime", "operation"]


@dataclass(frozen=True)
class KindInfo:
    kind: str
    plural: str
    category: Category
    # Spec fields millpond acts on; any other field is accepted and "recorded only".
    applicable: frozenset[str]
    short_names: tuple[str, ...] = ()

    @property
    def resource(self) -> str:
        """How kubectl names the resource in its output: ``dataset.data.fluid.io``."""
        return f"{self.kind.lower()}.{GROUP}"

    @property
    def names(self) -> KindName:
        """Its names in the one registry of kinds."""
        return KindName(self.kind, self.plural, GROUP, (VERSION,), OWNER, self.short_names)


_RUNTIME_FIELDS = frozenset({"tieredstore", "management", "replicas"})
_OPERATION_FIELDS = frozenset({"policy", "schedule", "ttlSecondsAfterFinished", "runAfter"})

KINDS: dict[str, KindInfo] = {info.kind: info for info in (
    KindInfo("Dataset", "datasets", "dataset",
             frozenset({"mounts", "accessModes", "sharedOptions", "sharedEncryptOptions", "owner"})),
    KindInfo("AlluxioRuntime", "alluxioruntimes", "runtime", _RUNTIME_FIELDS, ("alluxio",)),
    KindInfo("JuiceFSRuntime", "juicefsruntimes", "runtime", _RUNTIME_FIELDS, ("juicefs",)),
    KindInfo("JindoRuntime", "jindoruntimes", "runtime", _RUNTIME_FIELDS, ("jindo",)),
    KindInfo("EFCRuntime", "efcruntimes", "runtime", _RUNTIME_FIELDS, ("efc",)),
    KindInfo("ThinRuntime", "thinruntimes", "runtime", _RUNTIME_FIELDS, ("thin",)),
    KindInfo("VineyardRuntime", "vineyardruntimes", "runtime", _RUNTIME_FIELDS, ("vineyard",)),
    KindInfo("CacheRuntime", "cacheruntimes", "runtime", _RUNTIME_FIELDS, ("cache",)),
    KindInfo("DataLoad", "dataloads", "operation",
             _OPERATION_FIELDS | {"dataset", "target", "loadMetadata", "options"}, ("load",)),
    KindInfo("DataMigrate", "datamigrates", "operation",
             _OPERATION_FIELDS | {"from", "to", "options", "parallelism", "parallelOptions", "block"}, ("migrate",)),
    KindInfo("DataProcess", "dataprocesses", "operation", _OPERATION_FIELDS | {"dataset", "processor"}),
    KindInfo("DataBackup", "databackups", "operation", _OPERATION_FIELDS | {"dataset", "backupPath"}, ("backup",)),
)}

# Kinds of Fluid that mean nothing on one machine: refused with the reason.
NOT_ON_ONE_MACHINE = {
    "CacheRuntimeClass": (
        "CacheRuntimeClass is a cluster-wide template for deploying a third-party cache system's pods; "
        "it has no meaning on one machine, where millpond's own cache serves every runtime"
    ),
}
# The names ``get``/``delete`` refuse with the reason (the kind and its plural).
REFUSED_NAMES = {name: reason for kind, reason in NOT_ON_ONE_MACHINE.items()
                 for name in (kind, kind.lower() + "es")}
REGISTRY.register((info.names for info in KINDS.values()), REFUSED_NAMES)  # the handler: datasets.handler


def dataset_reference(kind: str, spec: dict[str, Any]) -> tuple[str, str | None] | None:
    """The dataset a data operation works on, as (name, namespace or None): what ``get`` shows as DATASET.

    DataBackup names it as a string; DataMigrate on one side (``from`` or ``to``) of the copy.
    """
    if kind == "DataBackup":
        return (spec["dataset"], None) if isinstance(spec.get("dataset"), str) else None
    if kind == "DataMigrate":
        for side in ("from", "to"):
            ref = (spec.get(side) or {}).get("dataset")
            if isinstance(ref, dict) and ref.get("name"):
                return ref["name"], ref.get("namespace")
        return None
    ref = spec.get("dataset")
    if isinstance(ref, dict) and ref.get("name"):
        return ref["name"], ref.get("namespace")
    return None


def owner_dataset(kind: str, spec: dict[str, Any], namespace: str) -> tuple[str, str] | None:
    """The (name, namespace) of the dataset that owns a data operation: deleting it deletes them.

    Fluid's operation controller gives each operation an owner reference to its target dataset:
    ``spec.dataset`` (a DataBackup's, a name, is in its own namespace); for a DataMigrate, the
    ``to`` dataset, else the ``from`` one. A reference without a namespace means the operation's.
    """
    if kind == "DataMigrate":
        sides = [(spec.get(side) or {}).get("dataset") for side in ("to", "from")]
        ref = next((side for side in sides if isinstance(side, dict) and side.get("name")), None)
    else:
        ref = spec.get("dataset")
    if isinstance(ref, str) and ref:
        return ref, namespace
    if isinstance(ref, dict) and ref.get("name"):
        return str(ref["name"]), str(ref.get("namespace") or namespace)
    return None
