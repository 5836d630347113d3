"""Admission throughput and latency: 1,000 pending workloads across 10 ClusterQueues.

    .venv/bin/python benchmarks/admission.py              # SQLite in a temporary home
    .venv/bin/python benchmarks/admission.py --rounds 3   # a quick trial

Kueue publishes no scheduler throughput figure to set beside ours (its performance test,
``test/performance/scheduler``, checks wall time and time-to-admission of a generated mix against
ranges), so each number is printed beside a baseline measured here, as a ratio:

1. ``decide()`` alone over 1,000 pending workloads (10 ClusterQueues in one cohort, 100 each,
   three priorities, room for a tenth of them): workload decisions per second (each cycle gives
   every pending workload an admission or a reason and a position), beside a naive first-fit
   (FIFO per queue, nominal quota only, no cohort, no reasons);
2. ``run_cycle()`` on SQLite over the same rows: the same decisions with the lock, the reads and
   the writes (the first cycle writes every reason; later ones only what changed);
3. draining: the same 1,000 with room for all, admitted in one cycle (admissions per second);
4. time from a resource freeing to the next admission, as a waiting process observes it: with
   ``release()`` (it runs a cycle at once) beside a release that only finishes the workload and
   leaves the admission to the waiter's own next cycle (every 0.5 s).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from millpond.scheduling.queues.admission import decide  # noqa: E402
from millpond.scheduling.queues.cycle import release, run_cycle, workload_of  # noqa: E402
from millpond.scheduling.queues.model import GPU, Snapshot, WorkloadState  # noqa: E402
from millpond.scheduling.queues.specs import objects_from_specs  # noqa: E402
from millpond.settings import load_settings  # noqa: E402
from millpond.store.resources import ResourceStore  # noqa: E402
from millpond.store.workloads import ADMITTED, WorkloadStore  # noqa: E402

QUEUES, PER_QUEUE = 10, 100


def manifests(gpus_per_queue: int) -> list[dict]:
    found: list[dict] = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                          "metadata": {"name": "default"}, "spec": {}}]
    for index in range(QUEUES):
        found.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                      "metadata": {"name": f"cq{index}"},
                      "spec": {"cohortName": "lab", "namespaceSelector": {},
                               "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                               "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "default",
                                                   "resources": [{"name": GPU, "nominalQuota": gpus_per_queue}]}]}]}})
        found.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                      "metadata": {"name": f"lq{index}", "namespace": "research"},
                      "spec": {"clusterQueue": f"cq{index}"}})
    found.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "solo"},
                  "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                      {"name": "default", "resources": [{"name": GPU, "nominalQuota": 1}]}]}]}})
    found.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                  "metadata": {"name": "solo", "namespace": "research"}, "spec": {"clusterQueue": "solo"}})
    return found


def fill(store: WorkloadStore, seed: int = 7) -> None:
    generator = random.Random(seed)
    for number in range(QUEUES * PER_QUEUE):
        store.submit(kind="job", name=f"w{number}", namespace="research", user="bench",
                     queue=f"lq{number % QUEUES}", requests={GPU: 1000}, priority=generator.choice((0, 0, 10)),
                     created=1000.0 + number)


def snapshot_of(store: WorkloadStore, gpus_per_queue: int) -> Snapshot:
    objects = objects_from_specs(manifests(gpus_per_queue))
    with store.locked() as locked:
        workloads = tuple(workload_of(record) for record in locked.active())
    return Snapshot(objects.cluster_queues, objects.local_queues, objects.cohorts, objects.flavors, workloads)


def naive(snapshot: Snapshot) -> int:
    """The baseline: per queue, FIFO first-fit against nominal quota; no cohort, no reasons."""
    used: dict[str, int] = {}
    admitted = 0
    for workload in sorted(snapshot.workloads, key=lambda w: w.created):
        if workload.state is not WorkloadState.PENDING:
            continue
        target = snapshot.local_queues[(workload.namespace, workload.queue)].cluster_queue
        nominal = snapshot.cluster_queues[target].resource_groups[0].flavors[0].resources[0].nominal
        if used.get(target, 0) + workload.requests[GPU] <= nominal:
            used[target] = used.get(target, 0) + workload.requests[GPU]
            admitted += 1
    return admitted


def timed(action, rounds: int) -> float:  # noqa: ANN001
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


WAITER = textwrap.dedent("""
    import sys, time
    from millpond.scheduling.queues.cycle import submit, wait_for_admission
    from millpond.settings import load_settings
    from millpond.store.workloads import WorkloadStore

    settings = load_settings()
    record = submit(settings, kind="job", name="waiter", namespace="research", user="bench", queue="solo",
                    requests={"nvidia.com/gpu": 1000}, priority_class=None)
    print("pending", record.id, flush=True)
    wait_for_admission(WorkloadStore(settings), record.id)
    print("admitted", time.time(), flush=True)
""")


def latency(store: WorkloadStore, with_cycle: bool) -> float:
    """Seconds from freeing the one GPU of ClusterQueue solo to a waiting process seeing its workload admitted
    (the 1,000 others stay pending in their queues: every cycle decides over them too)."""
    settings = store.settings
    holder = store.submit(kind="job", name="holder", namespace="research", user="bench", queue="solo",
                          requests={GPU: 1000})
    run_cycle(settings)
    assert store.require(holder.id).state == ADMITTED
    waiter = subprocess.Popen([sys.executable, "-c", WAITER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    assert waiter.stdout is not None
    waiter_id = waiter.stdout.readline().split()[1]
    while store.require(waiter_id).position is None:  # its first cycle has run: it waits in the queue
        time.sleep(0.05)
    freed = time.time()
    if with_cycle:
        release(settings, holder.id)
    else:
        store.finish(holder.id)
    seen = float(waiter.stdout.readline().split()[1])
    waiter.wait()
    store.finish(waiter_id)
    return seen - freed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="millpond-admission-") as home:
        os.environ["MILLPOND_HOME"] = home
        os.environ.pop("MILLPOND_DATABASE_URL", None)
        settings = load_settings()
        store = WorkloadStore(settings)
        ResourceStore(settings).apply(manifests(PER_QUEUE // 10))
        fill(store)
        pending = QUEUES * PER_QUEUE
        snapshot = snapshot_of(store, PER_QUEUE // 10)
        ours = timed(lambda: decide(snapshot, time.time()), args.rounds)
        baseline = timed(lambda: naive(snapshot), args.rounds)
        print(f"decide(), {pending} pending in {QUEUES} queues: {ours * 1000:.1f} ms a cycle, "
              f"{pending / ours:,.0f} decisions/s; naive first-fit {pending / baseline:,.0f}/s "
              f"(ratio {baseline / ours:.2f})")
        first = timed(lambda: run_cycle(settings), 1)
        steady = timed(lambda: run_cycle(settings), args.rounds)
        print(f"run_cycle() on SQLite: first cycle {first * 1000:.0f} ms (writes every reason), then "
              f"{steady * 1000:.0f} ms: {pending / steady:,.0f} decisions/s; decide() alone is "
              f"{steady / ours:.1f}x faster")
        with tempfile.TemporaryDirectory(prefix="millpond-admission-drain-") as drain_home:
            os.environ["MILLPOND_HOME"] = drain_home
            drain_settings = load_settings()
            ResourceStore(drain_settings).apply(manifests(PER_QUEUE))
            fill(WorkloadStore(drain_settings))
            started = time.perf_counter()
            decision = run_cycle(drain_settings)
            spent = time.perf_counter() - started
            print(f"draining: {len(decision.admitted)} admitted in one run_cycle() of {spent * 1000:.0f} ms: "
                  f"{len(decision.admitted) / spent:,.0f} admissions/s")
            os.environ["MILLPOND_HOME"] = home
        for mode, label in ((True, "release() runs a cycle"), (False, "finish only, waiter's own cycle")):
            runs = [latency(store, mode) for _ in range(max(2, args.rounds // 2))]
            print(f"free -> admitted, seen by the waiting process ({label}): median "
                  f"{statistics.median(runs) * 1000:.0f} ms over {len(runs)} (min {min(runs) * 1000:.0f}, "
                  f"max {max(runs) * 1000:.0f})")
            if mode:
                fast = statistics.median(runs)
            else:
                print(f"  ratio: releasing with a cycle is {statistics.median(runs) / fast:.1f}x faster")


if __name__ == "__main__":
    main()
