"""The two records every task policy reads: the task being launched, and the run it belongs to."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Protocol

from millpond.pipelines.cluster import ClusterBudget
from millpond.pipelines.graph import Node
from millpond.pipelines.launcher import TaskRequest
from millpond.pipelines.platform import TaskPlatform
from millpond.pipelines.resources import Budget, ResourceRequest
from millpond.pipelines.retries import RetryPolicy
from millpond.pipelines.run_deadline import RunDeadline
from millpond.pipelines.task_queues import EngineQueues
from millpond.pipelines.views import ComponentSpec, ContainerSpec, ExecutorSpec, TaskInputs, TaskSpec
from millpond.pipelines.workflow_limits import WorkflowLimits
from millpond.settings import Settings
from millpond.store.journal import RunJournal, RunRecord, TaskRecord
from millpond.store.secrets import ConfigStore


class TaskRows(Protocol):
    """What a policy may ask of the engine's records: the task's row, and its start's marker."""

    def record_task(self, launch: TaskLaunch, kind: str, image: str | None, log_path: Path | None) -> None:
        """Record the task's row PENDING (it waits for resources and a process slot); ``launch.recorded`` then."""

    def starter(self, node: Node) -> Callable[..., None]:
        """What the worker calls when the task's work begins: records it RUNNING, with its start time."""


@dataclass(frozen=True)
class RunContext:
    """The run around every task, built once by the engine when the walk starts."""

    run: RunRecord
    job: Mapping[str, str]  # the run's placeholders: pipeline_job_name, …_resource_name, …_uuid, pipeline_root
    settings: Settings
    store: RunJournal
    configs: ConfigStore
    budget: Budget | ClusterBudget
    queues: EngineQueues
    rows: TaskRows
    limits: WorkflowLimits
    deadline: RunDeadline
    previous: Mapping[str, TaskRecord] = field(default_factory=dict)  # a resumed run's tasks that succeeded
    use_cache: bool = True
    ignore_resources: bool = False  # kfp.local's way: requests are not scheduled
    remote_datasets: bool = False  # the runner mounts datasets where the task runs (a Ray node)
    # its pods' namespace: the run's in multi-user mode, else ``default``; where the Secrets, ConfigMaps, PVCs
    # and datasets its tasks name are looked up
    pod_namespace: str = "default"

    @property
    def resource_name(self) -> str:
        """The run's name as an Argo workflow's: a task's pod name starts with it."""
        return self.job["pipeline_job_resource_name"]


@dataclass
class TaskLaunch:
    """One container or importer task on its way to a worker: what the policies have decided so far."""

    node: Node
    component: ComponentSpec
    executor: ExecutorSpec
    inputs: TaskInputs
    recorded: bool = False  # its row exists (PENDING)
    log_path: Path | None = None
    resources: ResourceRequest = field(default_factory=ResourceRequest)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    request: TaskRequest | None = None
    platform: TaskPlatform | None = None

    @property
    def task(self) -> TaskSpec:
        return TaskSpec(self.node.spec)

    @property
    def container(self) -> ContainerSpec:
        """The executor's container (the policies after ``executor_kind`` see only container tasks)."""
        container = self.executor.container
        if container is None:
            raise TypeError(f"task {self.node.display_name!r}: executor {self.executor.label!r} has no container")
        return container

    def the_log_path(self) -> Path:
        """The task's log file (the policies after ``task_row`` may rely on it)."""
        if self.log_path is None:
            raise TypeError(f"task {self.node.display_name!r}: no log file yet")
        return self.log_path

    def the_request(self) -> TaskRequest:
        """The launcher's request (the policies after ``request`` may rely on it)."""
        if self.request is None:
            raise TypeError(f"task {self.node.display_name!r}: no launch request yet")
        return self.request

    def release(self) -> None:
        """A launch that fails before its work starts gives back what its platform made (secret files, mounts)."""
        if self.platform is not None:
            self.platform.cleanup()
