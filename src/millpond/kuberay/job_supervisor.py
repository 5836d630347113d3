"""A RayJob's supervisor: its cluster, its entrypoint submitted through Ray's job API, and its end.

``python -m millpond.kuberay.supervisor RayJob NAMESPACE NAME UID`` (``objects.start``). As KubeRay's
RayJob controller (``jobDeploymentStatus``: Initializing → Running → Complete | Failed; Suspended):

1. labelled for a Kueue queue: one workload (its own cluster's requests) admitted before anything
   runs; ``spec.suspend`` (what Kueue sets): nothing runs, a cluster it made is deleted;
2. Initializing: its own RayCluster ``<job>-raycluster-<5 chars>`` is stored (KubeRay's origin
   labels) and its supervisor started, or the clusterSelector's cluster is waited for, until its
   state is ready (a failed cluster fails the job);
3. the runtime env's remote packages are probed (``runtime_env.unreachable``: one that cannot be
   fetched fails the job, with the reason); the entrypoint is submitted to the cluster's dashboard
   with ``ray.job_submission.JobSubmissionClient`` (the submission id: ``spec.jobId``, else
   ``<job>-<5 chars>``); Running;
4. each tick: the job's status and message (``jobStatus``: PENDING, RUNNING, SUCCEEDED, FAILED,
   STOPPED), its driver log copied to ``driver.log``; past ``activeDeadlineSeconds`` (or
   ``preRunningDeadlineSeconds`` while it has not run) the job is stopped and Failed
   (``DeadlineExceeded``); its cluster failing fails it;
5. the end: Complete (SUCCEEDED) or Failed, ``endTime``; with ``shutdownAfterJobFinishes`` its own
   cluster is deleted ``ttlSecondsAfterFinished`` later; then the supervisor ends.

Ray is imported here only, when the job is submitted: the token of the home's clusters is named in
the environment first (Ray reads it once per process).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import threading
import time
from typing import Any

from millpond.errors import MillpondError, UserError
from millpond.kuberay import objects, paths
from millpond.kuberay.cluster_status import FAILED, READY
from millpond.kuberay.cluster_supervisor import TICK_S, now_iso
from millpond.kuberay.job_specs import JobSpec, job_spec
from millpond.kuberay.kinds import API_VERSION, CLUSTER_LABEL, PRIORITY_LABEL, QUEUE_LABEL, RAY_CLUSTER, RAY_JOB
from millpond.kuberay.nodes import pod_suffix
from millpond.kuberay.runtime_env import unreachable, with_setup_timeout
from millpond.scheduling.queues import cycle
from millpond.scheduling.queues.model import WorkloadKind, WorkloadState
from millpond.scheduling.queues.submission import ANONYMOUS, requests
from millpond.settings import Settings
from millpond.store.resources import Resource, ResourceStore
from millpond.store.workloads import WorkloadStore

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
CONNECT_TIMEOUT_S = 60.0  # the dashboard's job API answers a few seconds after the head is ready


class JobSupervisor:
    """The reconciler of one RayJob (see the module's docstring for its steps)."""

    def __init__(self, settings: Settings, namespace: str, name: str, uid: str, user: str = "") -> None:
        self.settings = settings
        self.user = user or ANONYMOUS  # who applied it: its Kueue workload's user
        self.home = paths.HomeWatch(settings.home)
        self.namespace, self.name, self.uid = namespace, name, uid
        self.store = ResourceStore(settings)
        self.stopping = threading.Event()
        self.status: dict[str, Any] = {}
        self.client: Any = None
        self.workload_id = ""
        self.submitted_at = 0.0
        self.created_at = time.time()
        self.done_at = 0.0
        self.log_size = -1

    def run(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stopping.set())
        try:
            while not self.stopping.is_set() and not self.home.gone():
                resource = self.store.get(RAY_JOB.kind, self.name, self.namespace)
                if resource is None or resource.uid != self.uid:
                    return
                self.status = dict(resource.status) if not self.status else self.status
                try:
                    spec = job_spec(resource.spec)
                except UserError as exc:
                    self._end("ValidationFailed", "ValidationFailed", str(exc), {})
                    return
                if self.step(spec, resource):
                    return
                self.stopping.wait(TICK_S)
        finally:
            if not self.home.gone():
                self._release()

    def step(self, spec: JobSpec, resource: Resource) -> bool:
        """One reconcile; True once the supervisor's work is done."""
        state = self.status.get("jobDeploymentStatus", "")
        if state in objects.FINAL_JOB:
            return self._after_end(spec)
        if spec.suspend:
            self._suspend(spec)
            return False
        labels = resource.manifest.get("metadata", {}).get("labels") or {}
        queue = labels.get(QUEUE_LABEL, "")
        if queue and spec.cluster is not None and not self._admitted(spec, queue, labels.get(PRIORITY_LABEL)):
            return False
        cluster = self._cluster(spec)
        if cluster is None:
            return False
        cluster_state = cluster.status.get("state")
        if not self.client:
            if self._deadline(spec, running=False):
                return False
            if cluster_state == FAILED:
                self._end("Failed", "RayClusterFailed", f"its RayCluster {cluster.name} failed: "
                          f"{cluster.status.get('reason', '')}", cluster.status)
                return False
            if cluster_state != READY:
                self._set(jobDeploymentStatus="Initializing", rayClusterName=cluster.name,
                          rayClusterStatus=dict(cluster.status),
                          message=f"waiting for RayCluster {cluster.name} to be ready"
                          + (f": {cluster.status['reason']}" if cluster.status.get("reason") else ""))
                return False
            self._submit(spec, cluster)
            return False
        if cluster_state == FAILED or objects.observed(cluster).get("state") == FAILED:
            self._end("Failed", "RayClusterFailed", f"its RayCluster {cluster.name} failed while the job ran: "
                      f"{cluster.status.get('reason', '')}", cluster.status)
            return False
        self._follow(spec, cluster)
        return False

    # ------------------------------------------------------------------ the cluster
    def _cluster(self, spec: JobSpec) -> Resource | None:
        """The job's cluster: its own (stored and started once), or the selected one; None while it waits."""
        if spec.cluster is None:
            found = self.store.get(RAY_CLUSTER.kind, spec.selector, self.namespace)
            if found is None and self.client is not None:
                self._end("Failed", "RayClusterNotFound", f"its RayCluster {spec.selector} was deleted while the "
                          "job ran", {})
            elif found is None:
                self._set(jobDeploymentStatus="Initializing", rayClusterName=spec.selector,
                          message=f"waiting for RayCluster {spec.selector} (clusterSelector {CLUSTER_LABEL})")
            return found
        name = self.status.get("rayClusterName")
        owned = objects.owned_clusters(self.store, self.namespace, self.name)
        found = next((cluster for cluster in owned if cluster.name == name), None)
        if found is not None:
            objects.start(self.settings, found)  # none running for it (the machine restarted): start one
            return found
        if name and self.status.get("jobDeploymentStatus") == "Running":
            self._end("Failed", "RayClusterNotFound", f"its RayCluster {name} was deleted while the job ran", {})
            return None
        resource = self.store.get(RAY_JOB.kind, self.name, self.namespace)
        raw = (resource.spec if resource else {}).get("rayClusterSpec") or {}
        name = f"{self.name}-raycluster-{pod_suffix()}"[:63]
        manifest = {"apiVersion": API_VERSION, "kind": RAY_CLUSTER.kind,
                    "metadata": {"name": name, "namespace": self.namespace,
                                 "labels": {objects.ORIGIN_KIND_LABEL: RAY_JOB.kind,
                                            objects.ORIGIN_NAME_LABEL: self.name}},
                    "spec": raw}
        created = self.store.create(manifest)
        if created is None:
            return None  # the name is taken: another next tick
        self._set(jobDeploymentStatus="Initializing", rayClusterName=name, message=f"RayCluster {name} created",
                  startTime=self.status.get("startTime") or now_iso())
        objects.start(self.settings, created, self.user if self.user != ANONYMOUS else "")
        return created

    def _suspend(self, spec: JobSpec) -> None:
        for cluster in objects.owned_clusters(self.store, self.namespace, self.name):
            objects.delete_cluster(self.settings, cluster)
        self._release()
        self.client = None
        self._set(jobDeploymentStatus="Suspended", jobStatus="", message="spec.suspend is true")

    # ------------------------------------------------------------------ admission
    def _admitted(self, spec: JobSpec, queue: str, priority: str | None) -> bool:
        assert spec.cluster is not None
        if not self.workload_id:
            cpu, memory, gpus, _ = spec.cluster.desired()
            try:
                self.workload_id = cycle.submit(
                    self.settings, kind=WorkloadKind.JOB.value, name=self.name, namespace=self.namespace,
                    user=self.user, queue=queue, requests=requests(int(cpu * 1000), memory, gpus),
                    priority_class=priority, pod_count=1 + spec.cluster.desired_workers()).id
            except UserError as exc:
                self._set(jobDeploymentStatus="Suspended", message=f"Kueue: {exc}")
                return False
        cycle.run_cycle(self.settings)
        record = WorkloadStore(self.settings).get(self.workload_id)
        if record is None or record.state == WorkloadState.FINISHED.value:
            self.workload_id = ""
            return False
        if record.state == WorkloadState.EVICTED.value:
            self._suspend(spec)
            cycle.release(self.settings, self.workload_id, stopped=True)
            self._set(message=f"Kueue evicted it: {record.reason}")
            return False
        if record.state != WorkloadState.ADMITTED.value:
            self._set(jobDeploymentStatus="Suspended", message=f"waiting for Kueue (queue {queue}): {record.reason}")
            return False
        return True

    def _release(self) -> None:
        if self.workload_id:
            try:
                cycle.release(self.settings, self.workload_id)
            except MillpondError:
                pass
            self.workload_id = ""

    # ------------------------------------------------------------------ the job
    def _submit(self, spec: JobSpec, cluster: Resource) -> None:
        port = (cluster.status.get("endpoints") or {}).get("dashboard")
        address = f"127.0.0.1:{port}"
        why = unreachable(spec.runtime_env)
        if why:
            self._end("Failed", "SubmissionFailed", why, cluster.status)
            return
        os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(paths.token_file(self.settings))})
        from ray.job_submission import JobSubmissionClient  # noqa: PLC0415 - Ray: this process, when it submits

        submission_id = spec.submission_id or f"{self.name}-{pod_suffix()}"
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                client = JobSubmissionClient(f"http://{address}")
                options: dict[str, Any] = {}
                if spec.entrypoint_cpus is not None:
                    options["entrypoint_num_cpus"] = spec.entrypoint_cpus
                if spec.entrypoint_gpus is not None:
                    options["entrypoint_num_gpus"] = spec.entrypoint_gpus
                if spec.entrypoint_resources:
                    options["entrypoint_resources"] = spec.entrypoint_resources
                client.submit_job(entrypoint=spec.entrypoint, submission_id=submission_id,
                                  runtime_env=with_setup_timeout(spec.runtime_env) if spec.runtime_env else None,
                                  **options)
                break
            except (ConnectionError, RuntimeError, ValueError, OSError) as exc:
                if "already exists" in str(exc):
                    client = JobSubmissionClient(f"http://{address}")  # submitted before this supervisor restarted
                    break
                if time.monotonic() >= deadline or self.stopping.is_set():
                    self._end("Failed", "SubmissionFailed", f"Ray's job API at {address} refused the job: "
                              f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__}",
                              cluster.status)
                    return
                self.stopping.wait(1.0)
        self.client = client
        self.submitted_at = time.time()
        self._set(jobId=submission_id, jobDeploymentStatus="Running", jobStatus="PENDING",
                  dashboardURL=address, rayClusterName=cluster.name, rayClusterStatus=dict(cluster.status),
                  startTime=self.status.get("startTime") or now_iso(), message="the job was submitted")

    def _follow(self, spec: JobSpec, cluster: Resource) -> None:
        job_id = str(self.status.get("jobId"))
        try:
            info = self.client.get_job_info(job_id)
            self._copy_logs(job_id)
        except Exception as exc:  # noqa: BLE001 - the dashboard did not answer this time: ask again
            self._set(message=f"cannot read the job's status from Ray: {exc}")
            return
        job_status = str(getattr(info.status, "value", info.status))
        fields: dict[str, Any] = {"jobStatus": job_status, "message": info.message or "",
                                  "rayClusterStatus": dict(cluster.status)}
        if info.start_time:
            fields["rayJobInfo"] = {"startTime": _iso_ms(info.start_time)}
        if job_status in TERMINAL:
            if info.end_time:
                fields["rayJobInfo"] = {**fields.get("rayJobInfo", {}), "endTime": _iso_ms(info.end_time)}
            self._set(**fields)
            if job_status == "SUCCEEDED":
                self._end("Complete", "", info.message or "", cluster.status)
            else:
                self._end("Failed", "AppFailed", info.message or f"the job ended {job_status}", cluster.status)
            return
        self._set(**fields)
        self._deadline(spec, running=job_status == "RUNNING")

    def _deadline(self, spec: JobSpec, *, running: bool) -> bool:
        """Stop and fail the job past its deadline (activeDeadlineSeconds; preRunningDeadlineSeconds before it
        runs); True when it did."""
        elapsed = time.time() - self.created_at
        if spec.active_deadline_s is not None and elapsed > spec.active_deadline_s:
            why = f"the job ran past its activeDeadlineSeconds ({spec.active_deadline_s} s)"
        elif spec.pre_running_deadline_s is not None and not running and elapsed > spec.pre_running_deadline_s:
            why = f"the job did not run within its preRunningDeadlineSeconds ({spec.pre_running_deadline_s} s)"
        else:
            return False
        if self.client is not None:
            try:
                self.client.stop_job(str(self.status.get("jobId")))
            except Exception:  # noqa: BLE001, S110 - its cluster may be gone: the job ends either way
                pass
        self._end("Failed", "DeadlineExceeded", why, {})
        return True

    def _copy_logs(self, job_id: str) -> None:
        text = self.client.get_job_logs(job_id)
        if len(text) != self.log_size:
            path = paths.driver_log(self.settings, self.uid)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".tmp")
            partial.write_text(text)
            os.replace(partial, path)
            self.log_size = len(text)

    def _end(self, deployment: str, reason: str, message: str, cluster_status: dict[str, Any]) -> None:
        if self.client is not None:
            try:
                self._copy_logs(str(self.status.get("jobId")))
            except Exception:  # noqa: BLE001, S110 - the cluster is gone: the log copied last stays
                pass
        fields: dict[str, Any] = {"jobDeploymentStatus": deployment, "message": message, "endTime": now_iso()}
        if reason:
            fields["reason"] = reason
        if deployment == "Complete":
            fields.update(succeeded=1, failed=0)
        else:
            fields.update(succeeded=0, failed=1)
            if self.status.get("jobStatus") not in TERMINAL and self.client is not None:
                fields["jobStatus"] = "STOPPED" if reason == "DeadlineExceeded" else "FAILED"
        if cluster_status:
            fields["rayClusterStatus"] = dict(cluster_status)
        self._set(**fields)
        self.done_at = time.time()
        self._release()

    def _after_end(self, spec: JobSpec) -> bool:
        """After the job's end: its own cluster deleted ``ttlSecondsAfterFinished`` later when it shuts down; True
        once nothing is left to do."""
        if not spec.shutdown_after_finish or spec.cluster is None:
            return True
        if not self.done_at:  # ended before this supervisor started: count from its recorded end
            self.done_at = time.time()
        if time.time() - self.done_at < spec.ttl_s:
            return False
        for cluster in objects.owned_clusters(self.store, self.namespace, self.name):
            objects.delete_cluster(self.settings, cluster)
        said = self.status.get("message") or ""
        self._set(message=f"{said}{'; ' if said else ''}its RayCluster was deleted (shutdownAfterJobFinishes)")
        return True

    def _set(self, **fields: Any) -> None:
        changed = {**self.status, **fields, "observedGeneration": 1}
        if changed != self.status:
            self.status = changed
            self.store.set_status(RAY_JOB.kind, self.name, {**changed, "lastUpdateTime": now_iso()}, self.namespace)


def _iso_ms(millis: int) -> str:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
