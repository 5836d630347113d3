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
