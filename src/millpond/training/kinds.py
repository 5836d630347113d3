"""Kubeflow's training kinds millpond applies, by the names kubectl accepts for them.

One table says, for each kind, its API group and the versions read (each with a JSON Schema
derived from its CRD by ``scripts/derive_training_schemas.py``), how kubectl spells it
(``pytorchjobs``, ``trainjob``…), the trainer it runs as, and the container the operator
treats as the training one (``pytorch``, ``tensorflow``; MPIJob v1 ``mpi``); the names go into
``millpond.kinds.REGISTRY`` with the family's handler (``training.handler``). Runtimes
(``ClusterTrainingRuntime``, ``TrainingRuntime``) run nothing: they give a TrainJob its meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from millpond.errors import UserError
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY
from millpond.training.spec import Trainer

OWNER = "training"
SCHEMAS_DIR = Path(__file__).parent / "schemas"
V1_GROUP = "kubeflow.org"
TRAINER_GROUP = "trainer.kubeflow.org"


@dataclass(frozen=True)
class TrainingKind:
    kind: str
    plural: str
    group: str
    versions: tuple[str, ...]
    trainer: Trainer | None  # None: a runtime, which runs nothing itself
    container: str = ""  # the operator's default container name ("" = the first container)
    short_names: tuple[str, ...] = ()
    cluster_scoped: bool = False

    @property
    def resource(self) -> str:
        """How kubectl names the resource in its output: ``pytorchjob.kubeflow.org``."""
        return f"{self.kind.lower()}.{self.group}"

    @property
    def names(self) -> KindName:
        """Its names in the one registry of kinds."""
        return KindName(self.kind, self.plural, self.group, self.versions, OWNER, self.short_names,
                        self.cluster_scoped)

    def api_versions(self) -> tuple[str, ...]:
        return tuple(f"{self.group}/{version}" for version in self.versions)

    def schema_file(self, api_version: str) -> Path:
        return SCHEMAS_DIR / f"{self.kind.lower()}.{api_version.rsplit('/', 1)[-1]}.json"


KINDS: dict[str, TrainingKind] = {info.kind: info for info in (
    TrainingKind("PyTorchJob", "pytorchjobs", V1_GROUP, ("v1",), Trainer.PYTORCH, "pytorch"),
    TrainingKind("MPIJob", "mpijobs", V1_GROUP, ("v1", "v2beta1"), Trainer.MPI, "mpi"),
    TrainingKind("TFJob", "tfjobs", V1_GROUP, ("v1",), Trainer.TF, "tensorflow"),
    TrainingKind("TrainJob", "trainjobs", TRAINER_GROUP, ("v1alpha1",), Trainer.PYTORCH, "node"),
    TrainingKind("TrainingRuntime", "trainingruntimes", TRAINER_GROUP, ("v1alpha1",), None),
    TrainingKind("ClusterTrainingRuntime", "clustertrainingruntimes", TRAINER_GROUP, ("v1alpha1",), None,
                 cluster_scoped=True),
)}

# What `arena submit` made, seen as a Kubeflow kind (Arena creates these objects on a cluster).
KIND_OF_TRAINER = {Trainer.PYTORCH: "PyTorchJob", Trainer.MPI: "MPIJob", Trainer.TF: "TFJob", Trainer.RAY: "RayJob"}

REGISTRY.register(info.names for info in KINDS.values())  # the handler: training.handler



def check_api_version(info: TrainingKind, api_version: object) -> str:
    """The document's apiVersion if millpond reads it for this kind; UserError names the ones it reads."""
    if api_version in info.api_versions():
        return str(api_version)
    raise UserError(f"{info.kind}: apiVersion {api_version!r} is not supported "
                    f"(millpond reads {' and '.join(info.api_versions())})")


def job_kind(trainer: str, manifest: dict[str, object]) -> str:
    """The Kubeflow kind a stored job shows as: its manifest's kind, else what Arena would have created."""
    kind = manifest.get("kind") if isinstance(manifest, dict) else None
    return str(kind) if isinstance(kind, str) and kind in KINDS else KIND_OF_TRAINER[Trainer(trainer)]
