"""Workloads in the metadata database and admission cycles over it, on SQLite and PostgreSQL.

The concurrency test is real: several processes submit, wait, check the admitted total under the
admission lock, and release, against one queue; a holder killed with SIGKILL frees its quota.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from millpond.errors import UserError
from millpond.scheduling.queues.cycle import release, run_cycle, submit, wait_for_admission
from millpond.scheduling.queues.model import GPU
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from millpond.store.workloads import ADMITTED, EVICTED, FINISHED, PENDING, WorkloadStore

pytestmark = pytest.mark.usefixtures("database")

QUOTA = 3  # GPUs in the shared ClusterQueue


def apply_queues(gpus: int = QUOTA, strategy: str = "BestEffortFIFO", preemption: str = "Never") -> None:
    """Kueue's own v1beta2 manifests, as ``millpond apply -f`` stores them."""
    ResourceStore(load_settings()).apply([
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"},
         "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team"},
         "spec": {"namespaceSelector": {}, "queueingStrategy": strategy,
                  "preemption": {"withinClusterQueue": preemption},
                  "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                      {"name": "default", "resources": [{"name": GPU, "nominalQuota": gpus}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "lq", "namespace": "research"}, "spec": {"clusterQueue": "team"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
         "value": 1000, "description": "urgent"},
    ])


def new(name: str, gpus: int = 1, queue: str = "lq", holder: str = "", **options: object):
    return submit(load_settings(), kind="job", name=name, namespace="research", user="alice", queue=queue,
                  requests={GPU: gpus * 1000}, holder=holder, **options)


def test_submit_get_list_finish_and_requeue_keeps_the_place() -> None:
    store = WorkloadStore(load_settings())
    first = store.submit(kind="job", name="a", namespace="research", user="alice", queue="lq",
                         requests={GPU: 1000}, created=10.0)
    store.submit(kind="task", name="run-1/train", namespace="exp", user="bob", queue="other", requests={}, created=5.0)
    assert store.get(first.id).state == PENDING and store.get("nope") is None
    assert [w.name for w in store.list()] == ["run-1/train", "a"]
    assert [w.name for w in store.list(namespace="research", queue="lq", states=[PENDING])] == ["a"]
    with store.locked() as locked:
        assert {w.id for w in locked.active()} == {w.id for w in store.list()}
        assert locked.admit(first.id, "team", {GPU: "default"}, 20.0)
        assert not locked.admit(first.id, "team", {GPU: "default"}, 21.0)  # no longer PENDING: nothing written
        assert locked.evict(first.id, "Preempted")
    assert not store.finish("nope")
    assert store.mark_stopped(first.id) and not store.mark_stopped(first.id)
    again = store.get(first.id)
    assert (again.state, again.requeues, again.created, again.cluster_queue) == (PENDING, 1, 10.0, None)
    assert store.finish(first.id, "deleted") and not store.finish(first.id)
    assert store.get(first.id).state == FINISHED
    assert [w.name for w in store.list(states=[FINISHED])] == ["a"]


def test_bad_workloads_are_refused_and_nothing_is_stored() -> None:
    apply_queues()
    store = WorkloadStore(load_settings())
    with pytest.raises(UserError, match="requests are whole non-negative"):
        store.submit(kind="job", name="a", namespace="n", user="u", queue="q", requests={GPU: -1})
    with pytest.raises(UserError, match="kind is one of"):
        store.submit(kind="pod", name="a", namespace="n", user="u", queue="q", requests={})
    with pytest.raises(UserError, match="WorkloadPriorityClass nope doesn't exist"):
        new("a", priority_class="nope")
    assert store.list() == []


def test_cycle_admits_by_priority_records_reasons_positions_and_preempts() -> None:
    apply_queues(gpus=2, preemption="LowerPriority")
    low = [new(f"low-{index}") for index in range(3)]
    missing = new("lost", queue="nope")
    run_cycle(load_settings())
    store = WorkloadStore(load_settings())
    states = {w.name: (w.state, w.position) for w in store.list()}
    assert states == {"low-0": (ADMITTED, None), "low-1": (ADMITTED, None), "low-2": (PENDING, 0),
                      "lost": (PENDING, 0)}
    assert "held by job research/low-0 (alice) in team (1)" in store.get(low[2].id).reason
    assert store.get(missing.id).reason == "LocalQueue nope doesn't exist in namespace research"
    urgent = new("urgent", gpus=2, priority_class="high")
    assert urgent.priority == 1000
    decision = run_cycle(load_settings())
    assert sorted(e.workload_id for e in decision.evicted) == sorted([low[0].id, low[1].id])
    assert store.get(low[0].id).state == EVICTED and store.get(urgent.id).state == PENDING
    assert store.get(low[2].id).position == 1  # behind the preemptor now
    for victim in low[:2]:  # their holders stop them: back in the queue, their place kept
        release(load_settings(), victim.id, stopped=True)
    assert store.get(urgent.id).state == ADMITTED
    assert [w.requeues for w in (store.get(low[0].id), store.get(low[1].id))] == [1, 1]
    assert [store.get(w.id).position for w in low] == [0, 1, 2]


WORKER = textwrap.dedent("""
    import json, sys, time
    from millpond.scheduling.queues.cycle import release, submit, wait_for_admission
    from millpond.settings import load_settings
    from millpond.store.workloads import ADMITTED, EVICTED, WorkloadStore

    settings = load_settings()
    store = WorkloadStore(settings)
    seen = []
    records = [submit(settings, kind="job", name=f"{sys.argv[1]}-{index}", namespace="research", user=sys.argv[1],
                      queue="lq", requests={"nvidia.com/gpu": 1000}) for index in range(int(sys.argv[2]))]
    for record in records:
        wait_for_admission(store, record.id, interval=0.2, poll=0.05)
        with store.locked() as locked:  # nobody admits while this looks
            held = sum(w.requests.get("nvidia.com/gpu", 0) for w in locked.active() if w.state in (ADMITTED, EVICTED))
        seen.append(held)
        time.sleep(0.3)
        release(settings, record.id)
    print(json.dumps(seen))
""")


def test_processes_submitting_concurrently_never_exceed_the_quota(tmp_path: Path) -> None:
    apply_queues()
    processes = [subprocess.Popen([sys.executable, "-c", WORKER, f"user{index}", "3"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for index in range(4)]
    seen = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-2000:]
        seen.extend(json.loads(out))
    assert len(seen) == 12 and max(seen) <= QUOTA * 1000
    assert max(seen) == QUOTA * 1000  # the quota was used, not merely respected
    store = WorkloadStore(load_settings())
    assert {w.state for w in store.list()} == {FINISHED} and len(store.list()) == 12


HOLDER = textwrap.dedent("""
    import sys, time
    from millpond.scheduling.queues.cycle import submit, wait_for_admission
    from millpond.settings import load_settings
    from millpond.store.workloads import WorkloadStore

    settings = load_settings()
    record = submit(settings, kind="job", name="holder", namespace="research", user="bob", queue="lq",
                    requests={"nvidia.com/gpu": 3000})
    wait_for_admission(WorkloadStore(settings), record.id)
    print(record.id, flush=True)
    time.sleep(600)
""")


def test_a_holder_killed_with_sigkill_frees_its_quota_at_the_next_cycle() -> None:
    apply_queues()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        held_id = holder.stdout.readline().strip()
        store = WorkloadStore(load_settings())
        assert store.get(held_id).state == ADMITTED
        waiter = new("waiter", gpus=2, holder="")
        run_cycle(load_settings())
        assert "held by job research/holder (bob)" in store.get(waiter.id).reason
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    started = time.monotonic()
    admission = wait_for_admission(store, waiter.id, interval=0.2)
    assert admission is not None and admission.cluster_queue == "team"
    assert time.monotonic() - started < 5
    gone = store.get(held_id)
    assert gone.state == FINISHED and f"its holder process {holder.pid} is gone" == gone.reason


def test_waiter_sees_reason_and_position_changes_and_can_be_cancelled() -> None:
    apply_queues(gpus=1, strategy="StrictFIFO")
    first = new("first")
    run_cycle(load_settings())
    second, third = new("second"), new("third")
    cancel = threading.Event()
    changes: list[tuple[str, int | None]] = []

    def show(reason: str, position: int | None) -> None:
        changes.append((reason, position))
        if position == 1:
            cancel.set()

    assert wait_for_admission(WorkloadStore(load_settings()), third.id, on_pending=show, cancel=cancel) is None
    assert changes[-1][1] == 1 and "waits behind job research/second (alice)" in changes[-1][0]
    release(load_settings(), first.id)
    store = WorkloadStore(load_settings())
    assert store.get(second.id).state == ADMITTED and store.get(third.id).position == 0


def test_queue_members_and_kueue_metrics_show_quota_usage_and_the_waiting_in_order() -> None:
    """One read (queues.views) for `millpond queue`, the UI and /metrics: usage against quota, who waits."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from millpond.scheduling.queues import views
    from millpond.server.metrics import registry_for

    def team() -> tuple[list, list, dict]:
        objects, workloads = views.current(load_settings())
        holding, waiting = views.members(objects.cluster_queues["team"], objects, workloads)
        return holding, waiting, views.usage_of(holding)

    apply_queues(gpus=3)
    held = [new(f"held-{i}", holder="") for i in range(2)]  # 2 of 3 GPUs
    big = new("big", gpus=2, holder="")  # does not fit beside them
    small = new("small", gpus=1, holder="")  # fits (BestEffortFIFO lets it past big)
    late = new("late", gpus=1, holder="")  # waits behind big
    run_cycle(load_settings())
    holding, waiting, used = team()
    assert used == {("default", GPU): 3000}
    assert sorted(w.name for w in holding) == ["held-0", "held-1", "small"]
    assert [w.name for w in waiting] == ["big", "late"]
    assert [w.position for w in waiting] == [0, 1] and all(w.reason for w in waiting)
    assert {w.id for w in waiting} == {big.id, late.id} and small.id not in {w.id for w in waiting}

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry_for(load_settings())).decode())
        for s in family.samples
    }
    labels = (("cluster_queue", "team"), ("cohort", ""), ("flavor", "default"), ("resource", GPU))
    assert samples[("kueue_cluster_queue_nominal_quota", labels)] == 3
    assert samples[("kueue_cluster_queue_resource_usage", labels)] == 3
    assert samples[("kueue_admitted_active_workloads", (("cluster_queue", "team"),))] == 3
    assert samples[("kueue_pending_workloads", (("cluster_queue", "team"), ("status", "inadmissible")))] == 2
    assert samples[("kueue_pending_workloads", (("cluster_queue", "team"), ("status", "active")))] == 0
    for record in held:
        release(load_settings(), record.id)
    holding, waiting, used = team()
    # BestEffortFIFO: the first freed GPU goes to late (big still does not fit), as in Kueue
    assert sorted(w.name for w in holding) == ["late", "small"] and [w.name for w in waiting] == ["big"]
    assert used == {("default", GPU): 2000}
