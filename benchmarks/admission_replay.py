"""Kueue's scheduler-performance baseline, replayed through millpond's admission and store.

    .venv/bin/python benchmarks/admission_replay.py                 # 15,000 workloads, SQLite in a temporary home
    .venv/bin/python benchmarks/admission_replay.py --scale 0.02    # 2% of them: a quick check (~10 s)
    .venv/bin/python benchmarks/admission_replay.py --database postgresql://...   # an empty PostgreSQL database

Kueue's ``test/performance/scheduler`` (``configs/baseline/generator.yaml``) makes 5 cohorts of 6
ClusterQueues (``cpu`` nominal quota 20, borrowingLimit 100, preemption ``withinClusterQueue:
LowerPriority``, ``reclaimWithinCohort: Any``), each with its own namespace and LocalQueue, and
creates in every queue, three streams at once: 350 *small* workloads (1 cpu, priority 50, one every
100 ms), 100 *medium* (5 cpu, priority 100, one every 500 ms) and 50 *large* (20 cpu, priority 200,
one every 1.2 s): 15,000 in all. Its runner "runs" each admitted workload for the time on its label
(200 ms, 500 ms, 1 s) and then marks it finished; an evicted one is put back pending at once. Its
``rangespec.yaml`` records minimalkueue on envtest (five runs): 351 s wall, ClusterQueue usage
58.7%, mean time to admission small 215 s, medium 77 s, large 6.7 s (with Kueue's newer
SchedulingEquivalenceHashing: usage 55.9%, large 16.5 s).

Here the same objects are applied to the resource store (as ``millpond apply -f`` stores them: a
ResourceFlavor, the ClusterQueues, their LocalQueues, and a WorkloadPriorityClass per class; like
Kueue's generator, no Cohort objects: ``cohortName`` alone makes the cohort), and each workload is
submitted at its generator time as the batch Job controller submits a ``kueue.x-k8s.io/queue-name``
Job's workload (``training.batch.queueing.JobWorkload``: one pod, ``pods`` and ``cpu`` requested,
the priority read from its class, this process its holder, its creation time its place in FIFO
order). Admission is millpond's own: ``cycle.run_cycle`` (the lock, the reads, ``admission.decide``,
the writes), run when workloads arrive or finish as the real holders trigger it (a Job controller
runs a cycle when it submits, ``release`` runs one when a workload ends), and every
``cycle.CYCLE_INTERVAL`` while some wait, as waiting holders poll. Arrivals and finishes that fall
due while a cycle runs are taken together by the next one, as the cycles of many holders would queue
on the admission lock and the later ones find nothing new. An admitted workload "runs" for its
runtime on a timer, then ends through the release path (``WorkloadStore.finish``); an evicted one is
stopped at once (``WorkloadStore.mark_stopped``, what ``release(stopped=True)`` does).

Measured as Kueue's recorder measures: time to admission is from a workload's creation to its (last)
admission; usage is the quota in use in all the ClusterQueues (borrowed quota counts where it is
used), integrated over time, divided by their total nominal quota times the time from the objects'
creation to the last workload's end; wall is that same span.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from millpond.scheduling.queues import cycle  # noqa: E402
from millpond.scheduling.queues.admission import PODS  # noqa: E402
from millpond.scheduling.queues.model import CPU  # noqa: E402
from millpond.settings import Settings, load_settings  # noqa: E402
from millpond.store.resources import ResourceStore  # noqa: E402
from millpond.store.workloads import FINISHED, WorkloadStore  # noqa: E402

API = "kueue.x-k8s.io/v1beta2"
FLAVOR = "rf"  # Kueue's generator's default ResourceFlavor
# Kueue's rangespec.yaml, the runs without SchedulingEquivalenceHashing (the figures issue 36 quotes)
KUEUE_WALL_S = 351.1
KUEUE_USAGE = 0.587
KUEUE_ADMISSION_S = {"small": 215.5, "medium": 76.8, "large": 6.7}


@dataclass(frozen=True)
class WorkloadClass:
    """One ``workloadsSets`` entry of Kueue's generator.yaml: per ClusterQueue, ``count`` workloads, one every
    ``interval_s``."""

    name: str
    count: int
    interval_s: float
    runtime_s: float
    priority: int
    cpus: int


BASELINE = (WorkloadClass("small", 350, 0.1, 0.2, 50, 1),
            WorkloadClass("medium", 100, 0.5, 0.5, 100, 5),
            WorkloadClass("large", 50, 1.2, 1.0, 200, 20))


@dataclass(frozen=True)
class Plan:
    """Kueue's ``configs/baseline/generator.yaml``; :meth:`scaled` keeps the queues and takes a fraction of each
    stream (at least one)."""

    cohorts: int = 5
    queues: int = 6  # ClusterQueues per cohort
    nominal: int = 20  # cpus
    borrowing_limit: int = 100
    classes: tuple[WorkloadClass, ...] = BASELINE

    def scaled(self, scale: float) -> Plan:
        return dataclasses.replace(self, classes=tuple(
            dataclasses.replace(c, count=max(1, round(c.count * scale))) for c in self.classes))

    def cluster_queues(self) -> list[tuple[str, str]]:
        """(ClusterQueue, cohort) as Kueue's generator names them: ``cq-0-3-cohort-2``."""
        return [(f"cq-0-{q}-cohort-{c}", f"cohort-{c}") for c in range(self.cohorts) for q in range(self.queues)]

    @property
    def floor_s(self) -> float:
        """No scheduler finishes sooner: a cohort's work over its quota, or the last creation plus its runtime."""
        work = self.queues * sum(c.count * c.cpus * c.runtime_s for c in self.classes)
        return max(work / (self.queues * self.nominal), max(c.count * c.interval_s + c.runtime_s for c in self.classes))

    @property
    def total(self) -> int:
        return self.cohorts * self.queues * sum(c.count for c in self.classes)


def manifests(plan: Plan) -> list[dict]:
    """The objects Kueue's generator creates, as ``millpond apply -f`` takes them (namespace = LocalQueue =
    ClusterQueue name, as there), and a WorkloadPriorityClass per workload class."""
    found: list[dict] = [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}, "spec": {}}]
    found += [{"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": c.name}, "value": c.priority}
              for c in plan.classes]
    quota = {"name": CPU, "nominalQuota": plan.nominal, "borrowingLimit": plan.borrowing_limit}
    for name, cohort in plan.cluster_queues():
        found.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name},
                      "spec": {"cohortName": cohort, "namespaceSelector": {},
                               "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                               "resourceGroups": [{"coveredResources": [CPU],
                                                   "flavors": [{"name": FLAVOR, "resources": [quota]}]}]}})
        found.append({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": name},
                      "spec": {"clusterQueue": name}})
    return found


@dataclass(frozen=True)
class Arrival:
    at: float  # seconds after the start, when Kueue's generator creates it
    name: str  # Kueue's: class-set-index-0
    queue: str  # its LocalQueue (and namespace, and ClusterQueue)
    cls: WorkloadClass


def arrivals(plan: Plan) -> list[Arrival]:
    """Every workload, in creation order: each stream waits its interval, then creates (``generateWlSet``)."""
    found = [Arrival((index + 1) * c.interval_s, f"{c.name}-{set_index}-{index}-0", queue, c)
             for queue, _ in plan.cluster_queues() for set_index, c in enumerate(plan.classes)
             for index in range(c.count)]
    return sorted(found, key=lambda a: a.at)


@dataclass
class Usage:
    """Quota in use per ClusterQueue and cohort (milli-cpus), its integral over time, and its peaks."""

    cohort_of: Mapping[str, str]
    used: dict[str, int] = field(default_factory=dict)
    integral: float = 0.0  # milli-cpu seconds over all ClusterQueues
    since: float = 0.0
    peak_queue: int = 0
    peak_cohort: int = 0

    def advance(self, at: float) -> None:
        self.integral += sum(self.used.values()) * max(0.0, at - self.since)
        self.since = max(self.since, at)

    def change(self, cluster_queue: str, amount: int, at: float) -> None:
        self.advance(at)
        self.used[cluster_queue] = self.used.get(cluster_queue, 0) + amount
        cohort = self.cohort_of[cluster_queue]
        self.peak_queue = max(self.peak_queue, self.used[cluster_queue])
        self.peak_cohort = max(self.peak_cohort, sum(v for k, v in self.used.items() if self.cohort_of[k] == cohort))


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    wall_s: float
    usage: float  # 0..1
    admission_s: dict[str, float]  # class -> mean seconds from creation to admission
    admissions: int
    evictions: int
    finished: int  # rows FINISHED in the store at the end
    admitted_once: int  # workloads admitted at least once
    cycles: int
    cycle_s: list[float]  # each run_cycle's duration
    peak_queue: int  # milli-cpus, the most one ClusterQueue used at once
    peak_cohort: int  # the most one cohort used at once


def replay(settings: Settings, plan: Plan) -> Outcome:
    """Apply the objects, submit every workload at its time, run cycles, run and finish what is admitted."""
    workloads = WorkloadStore(settings)
    started = time.time()
    ResourceStore(settings).apply(manifests(plan))
    objects = cycle.load_objects(settings)
    priorities = {c.name: cycle.priority_of(objects, c.name) for c in plan.classes}
    holder = cycle.own_holder()
    usage = Usage({name: cohort for name, cohort in plan.cluster_queues()}, since=started)
    pending = arrivals(plan)
    runtime: dict[str, WorkloadClass] = {}  # workload id -> its class
    running: list[tuple[float, str]] = []  # (ends at, id): a heap
    holding: dict[str, tuple[str, int]] = {}  # id -> (ClusterQueue, milli-cpus): admitted or evicted, not stopped
    ends: dict[str, float] = {}  # id -> when its current run ends (an evicted one's entry goes)
    admitted: set[str] = set()  # admitted and not evicted since (finished ones stay)
    ever: set[str] = set()  # admitted at least once
    admissions = evictions = 0
    cycle_s: list[float] = []
    next_arrival = 0
    dirty = False
    last_cycle = 0.0
    while next_arrival < len(pending) or holding or len(runtime) > len(admitted) or dirty:
        now = time.time()
        while next_arrival < len(pending) and started + pending[next_arrival].at <= now:
            one = pending[next_arrival]
            record = workloads.submit(kind="job", name=one.name, namespace=one.queue, user="bench", queue=one.queue,
                                      requests={PODS: 1000, CPU: one.cls.cpus * 1000},
                                      priority=priorities[one.cls.name], priority_class=one.cls.name, pod_count=1,
                                      holder=holder, created=started + one.at)
            runtime[record.id] = one.cls
            next_arrival += 1
            dirty = True
        while running and running[0][0] <= now:
            _, key = heapq.heappop(running)
            if ends.pop(key, None) is None:
                continue  # evicted meanwhile
            workloads.finish(key, "finished")
            queue, amount = holding.pop(key)
            usage.change(queue, -amount, time.time())
            dirty = True
        waiting = len(runtime) > len(admitted)
        if dirty or (waiting and now >= last_cycle + cycle.CYCLE_INTERVAL):
            dirty = False
            began = time.perf_counter()
            decision = cycle.run_cycle(settings)
            cycle_s.append(time.perf_counter() - began)
            seen = last_cycle = time.time()
            for admission in decision.admitted:
                amount = runtime[admission.workload_id].cpus * 1000
                holding[admission.workload_id] = (admission.cluster_queue, amount)
                usage.change(admission.cluster_queue, amount, seen)
                ends[admission.workload_id] = seen + runtime[admission.workload_id].runtime_s
                heapq.heappush(running, (ends[admission.workload_id], admission.workload_id))
                admitted.add(admission.workload_id)
                ever.add(admission.workload_id)
                admissions += 1
            for eviction in decision.evicted:  # the runner stops it at once: its quota goes back
                ends.pop(eviction.workload_id, None)
                workloads.mark_stopped(eviction.workload_id)
                queue, amount = holding.pop(eviction.workload_id)
                usage.change(queue, -amount, time.time())
                admitted.discard(eviction.workload_id)
                evictions += 1
                dirty = True
            continue
        wake = [started + pending[next_arrival].at] if next_arrival < len(pending) else []
        wake += [running[0][0]] if running else []
        wake += [last_cycle + cycle.CYCLE_INTERVAL] if waiting else []
        time.sleep(max(0.0, min(wake, default=now + 0.01) - time.time()))
    finished_at = time.time()
    usage.advance(finished_at)
    records = {record.id: record for record in workloads.list() if record.id in runtime}
    times: dict[str, list[float]] = {c.name: [] for c in plan.classes}
    for key, record in records.items():
        times[runtime[key].name].append(record.admitted_at - record.created)
    wall = finished_at - started
    return Outcome(
        plan=plan, wall_s=wall, usage=usage.integral / (len(usage.cohort_of) * plan.nominal * 1000 * wall),
        admission_s={name: statistics.fmean(values) for name, values in times.items() if values},
        admissions=admissions, evictions=evictions,
        finished=sum(1 for record in records.values() if record.state == FINISHED),
        admitted_once=len(ever), cycles=len(cycle_s), cycle_s=cycle_s,
        peak_queue=usage.peak_queue, peak_cohort=usage.peak_cohort)


def report(outcome: Outcome, scale: float) -> None:
    plan = outcome.plan
    if scale != 1.0:
        print(f"SCALED RUN (--scale {scale}): {plan.total:,} of Kueue's 15,000 workloads "
              f"({', '.join(f'{c.count} {c.name}' for c in plan.classes)} per ClusterQueue); Kueue's figures are "
              "for all 15,000, so the ratios below do not compare like with like")
    rows = [("wall time (s)", KUEUE_WALL_S, outcome.wall_s, KUEUE_WALL_S / outcome.wall_s),
            ("ClusterQueue usage (%)", KUEUE_USAGE * 100, outcome.usage * 100, outcome.usage / KUEUE_USAGE)]
    rows += [(f"mean time to admission, {name} (s)", KUEUE_ADMISSION_S[name], outcome.admission_s[name],
              KUEUE_ADMISSION_S[name] / max(outcome.admission_s[name], 1e-3))
             for name in KUEUE_ADMISSION_S if name in outcome.admission_s]
    print(f"{'metric':<38} {'Kueue':>10} {'millpond':>10} {'millpond better by':>19}")
    for label, kueue, ours, ratio in rows:
        print(f"{label:<38} {kueue:>10.1f} {ours:>10.2f} {ratio:>18.2f}x")
    cycles = sorted(outcome.cycle_s)
    limit, cohort_nominal = plan.nominal + plan.borrowing_limit, plan.queues * plan.nominal
    print(f"{plan.total:,} workloads, {outcome.finished:,} finished; {outcome.admissions:,} admissions, "
          f"{outcome.evictions:,} evictions; {outcome.cycles:,} cycles: median "
          f"{statistics.median(cycles) * 1000:.0f} ms, max {cycles[-1] * 1000:.0f} ms, {sum(cycles):.1f} s in all; "
          f"peak use {outcome.peak_queue / 1000:g} cpus in a ClusterQueue (limit {limit}), "
          f"{outcome.peak_cohort / 1000:g} in a cohort (its nominal {cohort_nominal})")
    print(f"floor: no scheduler could finish in under {plan.floor_s:.1f} s (a cohort's work over its quota, or the "
          "last creation plus its runtime)")
    print("Kueue: minimalkueue on envtest, its rangespec.yaml (5 runs; with SchedulingEquivalenceHashing "
          "usage 55.9%, large 16.5 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="the fraction of each workload stream to run")
    parser.add_argument("--database", help="an empty database (postgresql://...) instead of SQLite in a temporary home")
    args = parser.parse_args()
    if not 0 < args.scale <= 1:
        parser.error("--scale: a fraction in (0, 1]")
    with tempfile.TemporaryDirectory(prefix="millpond-replay-") as home:
        os.environ["MILLPOND_HOME"] = home
        if args.database:
            os.environ["MILLPOND_DATABASE_URL"] = args.database
        else:
            os.environ.pop("MILLPOND_DATABASE_URL", None)
        settings = load_settings()
        print(f"database: {settings.database_url.split('@')[-1]}")
        report(replay(settings, Plan().scaled(args.scale)), args.scale)


if __name__ == "__main__":
    main()
