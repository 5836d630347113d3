"""``GET /metrics``: Prometheus' text format, read fresh from the database, the ledger and the machine.

One collector reads everything at scrape time (``store.metrics`` explains why the database's
aggregates and not counters kept by the server): runs and tasks by state, task durations as a
histogram, training jobs by status, the ledger's CPU/memory/GPUs capacity and allocation, the
machine's use (psutil), each GPU's utilisation and memory and each running job's CPU, memory
and GPU memory (its instances' sessions; NVML per process), and each dataset's cache bytes and
hits. Nothing is sampled over time during a scrape: CPU is exported as cumulative seconds
(``*_cpu_seconds_total``), for Prometheus' ``rate()``.

``/metrics`` passes the same request guard as every route (``security``): its Host must be one
the server answers to (DNS rebinding), and with a token it needs ``Authorization: Bearer TOKEN``
— Prometheus sends it from ``authorization: {credentials_file: ...}`` in the scrape config.
It is not public like the UI's static files because it names jobs, datasets and namespaces.
In multi-user mode it is Kubernetes' non-resource path ``get /metrics`` (the ``system:monitoring`` role's):
cluster administrators, or whoever a ClusterRole with ``nonResourceURLs: ["/metrics"]`` is bound to
(a Prometheus' own user); the figures are the whole machine's, never cut per namespace.

Queue metrics carry Kueue's own names and labels (``kueue_pending_workloads``,
``kueue_admitted_active_workloads``, ``kueue_cluster_queue_nominal_quota``,
``kueue_cluster_queue_resource_usage``), so a Kueue dashboard or alert reads them unchanged;
amounts are in Kubernetes' base units (cores, bytes, GPUs), as Kueue exports them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import psutil
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from millpond.access.attributes import Attributes
from millpond.datasets.status import cache_counters
from millpond.errors import MillpondError
from millpond.scheduling import gpu_metrics
from millpond.scheduling.ledger import Ledger
from millpond.scheduling.queues import views
from millpond.scheduling.usage import SessionTable, busy_cpu_seconds
from millpond.server.callers import require
from millpond.store.journal import FINAL_STATES
from millpond.store.metrics import MetricsQueries
from millpond.store.resources import ResourceStore

if TYPE_CHECKING:
    from millpond.scheduling.gpu_metrics import GpuMetric
    from millpond.scheduling.ledger import GrantRecord
    from millpond.settings import Settings

router = APIRouter()
log = logging.getLogger(__name__)
RUN_STATES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELED", "CANCELING", "PAUSED", "SKIPPED")
JOB_STATUSES = ("QUEUING", "PENDING", "RUNNING", "SUCCEEDED", "FAILED")


class MillpondCollector(Collector):
    """Every millpond metric, computed on each ``collect`` (one per scrape)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.queries = MetricsQueries(settings.database_url)

    def collect(self) -> Iterator[Metric]:
        yield from self._store()
        yield from self._resources()
        yield from self._datasets()
        yield from self._queues()

    # --- the metadata database ---------------------------------------------------------------------
    def _store(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily("millpond_runs", "Pipeline runs stored, by state.", labels=["state"])
        for state, count in _with_zeros(self.queries.run_states(), RUN_STATES).items():
            runs.add_metric([state], count)
        yield runs
        tasks = GaugeMetricFamily("millpond_tasks", "Pipeline tasks stored, by state.", labels=["state"])
        for state, count in _with_zeros(self.queries.task_states(), ()).items():
            tasks.add_metric([state], count)
        yield tasks
        durations = HistogramMetricFamily(
            "millpond_task_duration_seconds", "Duration of the tasks that started and finished (finished_at - "
            "started_at), by final state.", labels=["state"])
        for histogram in self.queries.task_durations():
            if histogram.state not in FINAL_STATES:
                continue  # finished_at set on a task that runs again (a retry): counted once it ends
            buckets = [(_le(bound), count) for bound, count in histogram.buckets] + [("+Inf", histogram.count)]
            durations.add_metric([histogram.state], buckets, histogram.total_seconds)
        yield durations
        jobs = GaugeMetricFamily("millpond_training_jobs", "Training jobs stored, by status.", labels=["status"])
        for status, count in _with_zeros(self.queries.job_statuses(), JOB_STATUSES).items():
            jobs.add_metric([status], count)
        yield jobs

    # --- the ledger, the machine, the GPUs, the jobs' processes ----------------------------------------
    def _resources(self) -> Iterator[Metric]:
        ledger = Ledger(self.settings)
        grants = ledger.grants()
        cap = ledger.capacity
        node = GaugeMetricFamily("millpond_node_capacity", "What the ledger may hand out on this machine "
                                 "(cpu in cores, memory in bytes, gpu in devices).", labels=["resource"])
        allocated = GaugeMetricFamily("millpond_node_allocated", "What the ledger has handed out now, "
                                      "to jobs and tasks (cpu in cores, memory in bytes, gpu in devices).",
                                      labels=["resource"])
        node.add_metric(["cpu"], cap.cpu_millis / 1000)
        node.add_metric(["memory"], cap.memory_bytes)
        node.add_metric(["gpu"], len(cap.gpus))
        allocated.add_metric(["cpu"], sum(g.request.cpu_millis for g in grants) / 1000)
        allocated.add_metric(["memory"], sum(g.request.memory_bytes for g in grants))
        allocated.add_metric(["gpu"], sum(len(g.gpus) for g in grants))
        yield node
        yield allocated
        memory = psutil.virtual_memory()
        yield GaugeMetricFamily("millpond_node_memory_used_bytes", "Memory in use on this machine, by any "
                                "process (total - available).", value=memory.total - memory.available)
        yield CounterMetricFamily("millpond_node_cpu_busy_seconds", "CPU time this machine spent busy "
                                  "(all CPUs, not idle or iowait).", value=busy_cpu_seconds())

        metrics = gpu_metrics.read()
        holder_of = {index: f"{g.holder.kind}/{g.holder.name}" for g in grants for index in g.gpus}
        util = GaugeMetricFamily("millpond_gpu_utilization_percent", "Each GPU's duty cycle (NVML).",
                                 labels=["gpu", "holder"])
        used = GaugeMetricFamily("millpond_gpu_memory_used_bytes", "Each GPU's memory in use.",
                                 labels=["gpu", "holder"])
        total = GaugeMetricFamily("millpond_gpu_memory_total_bytes", "Each GPU's memory.", labels=["gpu"])
        for index, metric in sorted(metrics.items()):
            labels = [str(index), holder_of.get(index, "")]
            util.add_metric(labels, metric.duty_cycle)
            used.add_metric(labels, metric.memory_used)
            total.add_metric([str(index)], metric.memory_total)
        yield util
        yield used
        yield total

        yield from self._jobs(grants, metrics, SessionTable())

    def _jobs(self, grants: list[GrantRecord], metrics: dict[int, GpuMetric], table: SessionTable) -> Iterator[Metric]:
        """Per job holding resources: allocated (its grant), used (its instances' sessions)."""
        labels = ["namespace", "job"]
        alloc_cpu = GaugeMetricFamily("millpond_job_cpu_allocated_cores", "CPU the job's grant holds.", labels=labels)
        alloc_mem = GaugeMetricFamily("millpond_job_memory_allocated_bytes", "Memory the job's grant holds.",
                                      labels=labels)
        alloc_gpu = GaugeMetricFamily("millpond_job_gpus_allocated", "GPUs the job's grant holds.", labels=labels)
        cpu = CounterMetricFamily("millpond_job_cpu_seconds", "CPU time of the job's live instance processes "
                                  "(and their reaped children).", labels=labels)
        memory = GaugeMetricFamily("millpond_job_memory_used_bytes", "Resident memory of the job's instance "
                                   "processes.", labels=labels)
        gpu_memory = GaugeMetricFamily("millpond_job_gpu_memory_used_bytes", "GPU memory the job's processes "
                                       "hold (NVML; absent without it).", labels=labels)
        for grant in grants:
            if grant.holder.kind != "job":
                continue
            namespace, _, name = grant.holder.name.partition("/")
            alloc_cpu.add_metric([namespace, name], grant.request.cpu_millis / 1000)
            alloc_mem.add_metric([namespace, name], grant.request.memory_bytes)
            alloc_gpu.add_metric([namespace, name], len(grant.gpus))
        leaders: dict[tuple[str, str], list[tuple[int | None, str | None]]] = {}
        for instance in self.queries.running_instances():
            leaders.setdefault((instance.namespace, instance.job), []).append((instance.pid, instance.pid_start))
        for (namespace, name), members in sorted(leaders.items()):
            usage = table.of(members)
            cpu.add_metric([namespace, name], usage.cpu_seconds)
            memory.add_metric([namespace, name], usage.memory_bytes)
            held = gpu_metrics.process_memory(metrics, usage.pids)
            if held is not None:  # per-process figures exist (NVML): absent otherwise, not 0
                gpu_memory.add_metric([namespace, name], held)
        yield from (alloc_cpu, alloc_mem, alloc_gpu, cpu, memory, gpu_memory)

    # --- datasets --------------------------------------------------------------------------------------
    def _datasets(self) -> Iterator[Metric]:
        labels = ["namespace", "dataset"]
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "hit_bytes": CounterMetricFamily("millpond_dataset_cache_hit_bytes", "Bytes read from the dataset's "
                                             "cache.", labels=labels),
            "miss_bytes": CounterMetricFamily("millpond_dataset_cache_miss_bytes", "Bytes read from the UFS "
                                              "because the cache did not hold them.", labels=labels),
            "hit_reads": CounterMetricFamily("millpond_dataset_cache_hits", "Reads served from the cache "
                                             "(this machine's caches).", labels=labels),
            "miss_reads": CounterMetricFamily("millpond_dataset_cache_misses", "Reads that went to the UFS "
                                              "(this machine's caches).", labels=labels),
            "cached": GaugeMetricFamily("millpond_dataset_cached_bytes", "Bytes the dataset's caches hold.",
                                        labels=labels),
            "capacity": GaugeMetricFamily("millpond_dataset_cache_capacity_bytes", "The caches' capacity "
                                          "(the runtime's tiered store).", labels=labels),
        }
        store = ResourceStore(self.settings)
        for dataset in store.list("Dataset"):
            try:
                found = cache_counters(dataset, store)
            except (MillpondError, OSError) as exc:  # one dataset's damaged index does not fail the scrape
                log.warning("metrics: dataset %s/%s: %s", dataset.namespace, dataset.name, exc)
                continue
            if found is None:
                continue
            report, hits, misses = found
            names = [dataset.namespace, dataset.name]
            for key, value in (("hit_bytes", report.hit_bytes), ("miss_bytes", report.miss_bytes),
                               ("hit_reads", hits), ("miss_reads", misses), ("cached", report.cached),
                               ("capacity", report.capacity)):
                families[key].add_metric(names, value)
        yield from families.values()


    # --- Kueue's queues ---------------------------------------------------------------------------------
    def _queues(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily("kueue_pending_workloads", "Workloads waiting in the ClusterQueue "
                                    "(status: active = not tried by a cycle yet, inadmissible = tried and "
                                    "did not fit: its reason says why).", labels=["cluster_queue", "status"])
        admitted = GaugeMetricFamily("kueue_admitted_active_workloads", "Workloads holding quota in the "
                                     "ClusterQueue (evicted ones until they have stopped).", labels=["cluster_queue"])
        labels = ["cohort", "cluster_queue", "flavor", "resource"]
        nominal = GaugeMetricFamily("kueue_cluster_queue_nominal_quota", "The ClusterQueue's nominal quota "
                                    "(cores, bytes, GPUs: Kubernetes' base units).", labels=labels)
        usage = GaugeMetricFamily("kueue_cluster_queue_resource_usage", "What the ClusterQueue's admitted "
                                  "workloads hold (borrowed quota included).", labels=labels)
        try:
            objects, workloads = views.current(self.settings)
        except (MillpondError, OSError) as exc:  # a stored object that no longer converts: the rest still scrapes
            log.warning("metrics: queues: %s", exc)
            objects, workloads = None, []
        for name, queue in sorted(objects.cluster_queues.items()) if objects is not None else []:
            assert objects is not None  # the loop runs over its queues only when there are objects
            holding, waiting = views.members(queue, objects, workloads)
            tried = sum(1 for w in waiting if w.reason)  # a cycle wrote why it waits
            pending.add_metric([name, "active"], len(waiting) - tried)
            pending.add_metric([name, "inadmissible"], tried)
            admitted.add_metric([name], len(holding))
            used = views.usage_of(holding)
            for group in queue.resource_groups:
                for flavor in group.flavors:
                    for quota in flavor.resources:
                        names = [queue.cohort or "", name, flavor.flavor, quota.name]
                        nominal.add_metric(names, quota.nominal / 1000)
                        usage.add_metric(names, used.get((flavor.flavor, quota.name), 0) / 1000)
        yield from (pending, admitted, nominal, usage)


def _with_zeros(counts: dict[str, int], known: tuple[str, ...]) -> dict[str, int]:
    """Every known state (0 when none), then whatever else is stored: a series that appears and
    vanishes breaks ``rate()`` and alerts on absence."""
    return {**dict.fromkeys(known, 0), **counts}


def _le(bound: float) -> str:
    return floatToGoString(bound)  # how prometheus_client's own histograms write ``le``


def registry_for(settings: Settings) -> CollectorRegistry:
    """A registry of millpond's collector only (not the default one: no process metrics of the server)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MillpondCollector(settings))
    return registry


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    require(request, Attributes("get", path="/metrics"))
    registry = request.app.state.metrics_registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})
