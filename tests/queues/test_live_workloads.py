"""The live workloads a process keeps between admission cycles (``queues.live``), on SQLite and PostgreSQL.

Another real process writes the same store between this process's cycles (submits, a cycle that admits
and preempts, a finish without a cycle); after each of this process's cycles its copy must equal a
full read of the store, row for row, and it must never give quota twice.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap

import pytest

from millpond.scheduling.queues.cycle import run_cycle
from millpond.scheduling.queues.live import kept, workload_of
from millpond.settings import load_settings
from millpond.store.workloads import ADMITTED, EVICTED, PENDING, WorkloadStore
from tests.queues.test_workloads_store import apply_queues, new

pytestmark = pytest.mark.usefixtures("database")

OTHER = textwrap.dedent("""
    import json, sys
    from millpond.scheduling.queues.cycle import run_cycle, submit
    from millpond.settings import load_settings
    from millpond.store.workloads import WorkloadStore

    settings = load_settings()
    ids = {}
    for step in json.loads(sys.argv[1]):
        if step[0] == "submit":  # name, gpus, priority class
            ids[step[1]] = submit(settings, kind="job", name=step[1], namespace="research", user="bob", queue="lq",
                                  requests={"nvidia.com/gpu": step[2] * 1000}, priority_class=step[3],
                                  holder="").id  # no holder: it outlives this process
        elif step[0] == "cycle":
            run_cycle(settings)
        elif step[0] == "finish":
            WorkloadStore(settings).finish(step[1])
    print(json.dumps(ids))
""")


def other_process(*steps: list[object]) -> dict[str, str]:
    """Run ``steps`` in another process (its own copy of the live workloads); the ids it submitted."""
    done = subprocess.run([sys.executable, "-c", OTHER, json.dumps(steps)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def cycle_and_compare() -> tuple[str, ...]:
    """This process's cycle; its copy checked against a full read; the ids it admitted."""
    settings = load_settings()
    decision = run_cycle(settings)
    stored = {r.id: r for r in WorkloadStore(settings).list(states=[PENDING, ADMITTED, EVICTED])}
    copy = kept(settings.database_url)
    assert copy.shown == {key: (r.reason, r.position) for key, r in stored.items()}
    assert {key: dataclasses.replace(w, reason="", position=None) for key, w in copy.models.items()} == \
        {key: dataclasses.replace(workload_of(r), reason="", position=None) for key, r in stored.items()}
    return tuple(a.workload_id for a in decision.admitted)


def test_a_cycle_sees_what_another_process_wrote_and_its_copy_matches_the_store() -> None:
    apply_queues(gpus=2, preemption="LowerPriority")
    store = WorkloadStore(load_settings())
    first = new("first")
    assert cycle_and_compare() == (first.id,)
    ids = other_process(["submit", "second", 1, None], ["submit", "third", 1, None], ["cycle"])
    assert store.require(ids["second"]).state == ADMITTED  # the other process's cycle admitted it
    assert cycle_and_compare() == ()  # the quota is full: a stale copy would admit "third" too
    third = store.require(ids["third"])
    assert third.state == PENDING and third.position == 0 and "held by" in third.reason
    other_process(["finish", ids["second"]])  # no cycle there: this process's finds the quota free
    assert cycle_and_compare() == (ids["third"],)
    urgent = other_process(["submit", "urgent", 2, "high"], ["cycle"])["urgent"]
    assert {store.require(key).state for key in (first.id, ids["third"])} == {EVICTED}
    assert cycle_and_compare() == ()  # the victims hold their quota until they have stopped
    for key in (first.id, ids["third"]):
        store.mark_stopped(key)
    assert cycle_and_compare() == (urgent,)
    assert [store.require(key).position for key in (first.id, ids["third"])] == [0, 1]


def test_each_writing_transaction_takes_one_generation_and_an_idle_cycle_none() -> None:
    apply_queues(gpus=2)
    settings = load_settings()
    store = WorkloadStore(settings)
    one, two = new("one"), new("two")
    assert two.version == one.version + 1
    cycle_and_compare()
    admitted = [store.require(key) for key in (one.id, two.id)]
    assert {r.state for r in admitted} == {ADMITTED} and admitted[0].version == admitted[1].version > two.version
    with store.locked() as locked:
        before = locked.generation().value
    cycle_and_compare()  # nothing changed: nothing written, no generation taken
    with store.locked() as locked:
        assert locked.generation().value == before
        assert [r.id for r in locked.changed_since(two.version)] in ([one.id, two.id], [two.id, one.id])
    assert store.finish(one.id)
    with store.locked() as locked:
        assert locked.generation().value == before + 1
        assert [(r.id, r.state) for r in locked.changed_since(before)] == [(one.id, "Finished")]
    cycle_and_compare()  # the finished row leaves the copy
    assert one.id not in kept(settings.database_url).models
