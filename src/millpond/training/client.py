"""``millpond.training.TrainingClient``: training jobs from Python, shaped like Arena's Python SDK.

Arena's SDK builds a job (``PytorchJobBuilder().with_name(..).with_workers(..).with_command(..)
.build()``; ``MPIJobBuilder`` and ``TFJobBuilder`` likewise) and hands it to
``client.training().submit(job)``; ``get``, ``list``, ``logs`` and
``delete`` follow. Here the builder makes a ``JobSpec`` through the same flag parser as ``arena
submit``, and the client answers ``TrainingJobInfo`` records whose ``as_dict()`` is ``arena get
-o json``. ``wait`` polls until the job ends, as a pipeline step that trains needs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Self

from millpond.errors import UserError
from millpond.store.training import JobStore
from millpond.training import jobs, logs, views
from millpond.training.builder import CommonArgs, TfArgs, mpi_spec, pytorch_spec, tf_spec
from millpond.training.paths import instance_log
from millpond.training.spec import JobSpec


@dataclass(frozen=True)
class InstanceInfo:
    name: str
    status: str
    age: str
    node: str
    ip: str
    chief: bool
    request_gpus: int


@dataclass(frozen=True)
class TrainingJobInfo:
    """Arena's ``TrainingJobInfo``; ``as_dict()`` is exactly what ``arena get -o json`` prints."""

    name: str
    namespace: str
    uuid: str
    status: str
    trainer: str
    duration: str
    priority: str
    request_gpus: int
    allocated_gpus: int
    creation_timestamp: int
    instances: tuple[InstanceInfo, ...]
    raw: dict[str, Any]

    @property
    def finished(self) -> bool:
        return self.status in ("SUCCEEDED", "FAILED")

    def as_dict(self) -> dict[str, Any]:
        return dict(self.raw)


def _info(raw: dict[str, Any]) -> TrainingJobInfo:
    return TrainingJobInfo(
        name=raw["name"], namespace=raw["namespace"], uuid=raw["uuid"], status=raw["status"], trainer=raw["trainer"],
        duration=raw["duration"], priority=raw["priority"], request_gpus=raw["requestGPUs"],
        allocated_gpus=raw["allocatedGPUs"], creation_timestamp=raw["creationTimestamp"],
        instances=tuple(InstanceInfo(i["name"], i["status"], i["age"], i["node"], i["ip"], i["chief"],
                                     i["requestGPUs"]) for i in raw["instances"]),
        raw=raw,
    )


class PytorchJobBuilder:
    """Arena SDK's builder for a PyTorchJob: ``with_*`` per ``arena submit pytorch`` flag, then ``build()``."""

    def __init__(self) -> None:
        self._args: dict[str, Any] = {}

    def _set(self, key: str, value: Any) -> Self:
        self._args[key] = value
        return self

    def with_name(self, name: str) -> Self:
        return self._set("name", name)

    def with_namespace(self, namespace: str) -> Self:
        return self._set("namespace", namespace)

    def with_image(self, image: str) -> Self:
        return self._set("image", image)

    def with_workers(self, workers: int) -> Self:
        return self._set("workers", workers)

    def with_gpus(self, gpus: int) -> Self:
        return self._set("gpus", gpus)

    def with_cpu(self, cpu: str) -> Self:
        return self._set("cpu", cpu)

    def with_memory(self, memory: str) -> Self:
        return self._set("memory", memory)

    def with_retry(self, retry: int) -> Self:
        return self._set("retry", retry)

    def with_working_dir(self, folder: str) -> Self:
        return self._set("working_dir", folder)

    def with_envs(self, envs: dict[str, str]) -> Self:
        return self._set("env", tuple(f"{k}={v}" for k, v in envs.items()))

    def with_datas(self, datas: dict[str, str]) -> Self:
        """Datasets by name → the path each is seen at (Arena: PVC name → path)."""
        return self._set("data", tuple(f"{k}:{v}" for k, v in datas.items()))

    def with_data_dirs(self, dirs: dict[str, str]) -> Self:
        return self._set("data_dirs", tuple(f"{k}:{v}" for k, v in dirs.items()))

    def with_running_timeout(self, duration: str) -> Self:
        return self._set("running_timeout", duration)

    def with_clean_task_policy(self, policy: str) -> Self:
        return self._set("clean_task_policy", policy)

    def with_nproc_per_node(self, count: int) -> Self:
        return self._set("nproc_per_node", count)

    def with_command(self, command: str) -> Self:
        return self._set("command", (command,))

    def build(self) -> JobSpec:
        if "name" not in self._args:
            raise UserError("the job needs a name (with_name)")
        return pytorch_spec(CommonArgs(**{"command": (), **self._args}))


class MPIJobBuilder(PytorchJobBuilder):
    """Arena SDK's builder for an MPIJob: ``with_workers`` counts the workers (a launcher is added)."""

    def build(self) -> JobSpec:
        if "name" not in self._args:
            raise UserError("the job needs a name (with_name)")
        return mpi_spec(CommonArgs(**{"command": (), **self._args}))


class TFJobBuilder(PytorchJobBuilder):
    """Arena SDK's builder for a TFJob: workers, and ``with_ps_count``, ``enable_chief``, ``enable_evaluator``."""

    def __init__(self) -> None:
        super().__init__()
        self._tf: dict[str, Any] = {}

    def with_ps_count(self, count: int) -> Self:
        self._tf["ps"] = count
        return self

    def enable_chief(self) -> Self:
        self._tf["chief"] = True
        return self

    def enable_evaluator(self) -> Self:
        self._tf["evaluator"] = True
        return self

    def build(self) -> JobSpec:
        if "name" not in self._args:
            raise UserError("the job needs a name (with_name)")
        return tf_spec(CommonArgs(**{"command": (), **self._args}), TfArgs(**self._tf))


class TrainingClient:
    """Training jobs of this millpond home (``MILLPOND_HOME``), in one namespace."""

    def __init__(self, namespace: str = "default") -> None:
        self.namespace = namespace
        self._store = JobStore()

    def submit(self, job: JobSpec) -> TrainingJobInfo:
        """Record the job and start it in the background; returns at once (QUEUING)."""
        if job.namespace != self.namespace and job.namespace == "default":
            job = replace(job, namespace=self.namespace)
        record = jobs.submit(job, self._store)
        return self.get(record.name, record.namespace)

    def get(self, name: str, namespace: str | None = None) -> TrainingJobInfo:
        job = jobs.get(name, namespace or self.namespace, self._store)
        return _info(views.job_info(job, self._store.instances(job.uid)))

    def list(self, all_namespaces: bool = False) -> list[TrainingJobInfo]:
        found = jobs.list_jobs(None if all_namespaces else self.namespace, self._store)
        return [_info(views.job_info(job, self._store.instances(job.uid))) for job in found]

    def logs(self, name: str, instance: str = "", tail: int | None = None) -> str:
        """The instance's log (the chief's by default), ``tail`` lines at most."""
        info = self.get(name)
        names = [i.name for i in info.instances]
        chosen = instance or next((i.name for i in info.instances if i.chief), names[0] if names else "")
        if instance and instance not in names:
            raise UserError(f"the job {name} has no instance {instance}")
        if not chosen:
            return ""
        return "".join(line + "\n" for line in logs.read(instance_log(info.uuid, chosen), tail))

    def delete(self, name: str) -> None:
        jobs.delete(name, self.namespace, self._store)

    def wait(self, name: str, timeout: float | None = None, poll_s: float = 1.0) -> TrainingJobInfo:
        """Poll until the job SUCCEEDED or FAILED; a TimeoutError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            info = self.get(name)
            if info.finished:
                return info
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"the job {name} is still {info.status} after {timeout}s")
            time.sleep(poll_s)
