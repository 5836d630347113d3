"""Request bodies of the KFP v2beta1 API: unknown fields are refused (HTTP 400), as Kubeflow does.

Output-only fields (ids, timestamps, state) are accepted and ignored, because clients echo
whole objects back; ``kfp_server_api`` drops fields that are None before sending.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from millpond.server.namespaces import BodyNamespace


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExperimentBody(_Body):
    display_name: str
    description: str | None = None
    namespace: BodyNamespace = None
    experiment_id: str | None = None
    created_at: str | None = None
    last_run_created_at: str | None = None
    storage_state: str | None = None


class PipelineVersionReference(_Body):
    pipeline_id: str | None = None
    pipeline_version_id: str | None = None


class RuntimeConfig(_Body):
    parameters: dict[str, Any] | None = None
    pipeline_root: str | None = None


class RunBody(_Body):
    display_name: str | None = None
    description: str | None = None
    experiment_id: str | None = None
    pipeline_spec: dict[str, Any] | None = None
    platform_spec: dict[str, Any] | None = None  # millpond's addition: the kfp-kubernetes document beside the IR
    pipeline_version_reference: PipelineVersionReference | None = None
    pipeline_version_id: str | None = None
    runtime_config: RuntimeConfig | None = None
    service_account: str | None = None
    # millpond's additions (a Kueue Workload's spec.queueName, spec.priorityClassName): its tasks' queue
    queue_name: str | None = None
    priority_class_name: str | None = None
    # output-only, echoed back by clients
    run_id: str | None = None
    storage_state: str | None = None
    created_at: str | None = None
    scheduled_at: str | None = None
    finished_at: str | None = None
    state: str | None = None
    error: dict[str, Any] | None = None
    run_details: dict[str, Any] | None = None
    recurring_run_id: str | None = None
    state_history: list[dict[str, Any]] | None = None


# --- KFP master's artifact service (artifact.proto): what its driver and launcher send -----------------------
Enum = str | int  # a proto enum as grpc-gateway takes it: its name or its number


class ArtifactBody(_Body):
    artifact_id: str | None = None
    name: str | None = None
    description: str | None = None
    type: Enum | None = None
    uri: str | None = None
    metadata: dict[str, Any] | None = None
    number_value: float | None = None
    created_at: str | None = None
    namespace: BodyNamespace = None


class CreateArtifactBody(_Body):
    artifact: ArtifactBody | None = None
    run_id: str | None = None
    task_id: str | None = None
    producer_key: str | None = None
    iteration_index: int | str | None = None  # an int64: JSON text, as grpc-gateway writes it, or a number
    type: Enum | None = None  # in the proto's first version; ignored, as KFP's server ignores it


class CreateArtifactsBulkBody(_Body):
    artifacts: list[CreateArtifactBody] | None = None


class IOProducerBody(_Body):
    task_name: str | None = None
    iteration: int | str | None = None


class ArtifactTaskBody(_Body):
    id: str | None = None
    artifact_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    type: Enum | None = None
    producer: IOProducerBody | None = None
    key: str | None = None


class CreateArtifactTaskBody(_Body):
    artifact_task: ArtifactTaskBody | None = None


class CreateArtifactTasksBulkBody(_Body):
    artifact_tasks: list[ArtifactTaskBody] | None = None
