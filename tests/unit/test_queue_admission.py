"""decide(): Kueue's admission rules on records (quota, cohorts, FIFO strategies, priorities, preemption, stops)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millpond.documents import load_yaml_documents
from millpond.errors import UserError
from millpond.scheduling.queues.admission import decide
from millpond.scheduling.queues.model import (
    CPU,
    GPU,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    StopPolicy,
    Workload,
    WorkloadKind,
    WorkloadState,
)
from millpond.scheduling.queues.preemption import may_preempt
from millpond.scheduling.queues.quota import QuotaTree
from millpond.scheduling.queues.specs import objects_from_specs

ALL = LabelSelector()  # namespaceSelector: {} admits every namespace
NOW = 1000.0


def cq(name: str, gpus: float, *, cohort: str | None = None, borrowing: float | None = None,
       lending: float | None = None, flavors: tuple[str, ...] = ("default",), **options: object) -> ClusterQueue:
    def quota(flavor: str) -> FlavorQuotas:
        milli = lambda value: None if value is None else int(value * 1000)  # noqa: E731
        return FlavorQuotas(flavor, (ResourceQuota(GPU, int(gpus * 1000), milli(borrowing), milli(lending)),))
    groups = (ResourceGroup((GPU,), tuple(quota(flavor) for flavor in flavors)),)
    return ClusterQueue(name, groups, cohort=cohort, namespace_selector=options.pop("selector", ALL),
                        **options)  # type: ignore[arg-type]


def wl(id: str, gpus: float, *, queue: str = "lq", namespace: str = "team", priority: int = 0,
       created: float | None = None, state: WorkloadState = WorkloadState.PENDING, cluster_queue: str | None = None,
       flavor: str = "default", admitted_at: float = 0.0) -> Workload:
    held = state is not WorkloadState.PENDING
    return Workload(id=id, kind=WorkloadKind.JOB, name=id, namespace=namespace, user="alice", queue=queue,
                    requests={GPU: int(gpus * 1000)}, priority=priority,
                    created=created if created is not None else float(int("".join(filter(str.isdigit, id)) or 0)),
                    state=state, cluster_queue=cluster_queue if held else None,
                    flavors={GPU: flavor} if held else {}, admitted_at=admitted_at)


def snap(queues: list[ClusterQueue], workloads: list[Workload], *, locals_: dict[str, str] | None = None,
         cohorts: list[Cohort] = (), flavors: tuple[str, ...] = ("default", "spot"),
         namespace: str = "team") -> Snapshot:
    locals_ = locals_ if locals_ is not None else {"lq": queues[0].name}
    return Snapshot(
        cluster_queues={q.name: q for q in queues},
        local_queues={(namespace, name): LocalQueue(name, namespace, target) for name, target in locals_.items()},
        cohorts={c.name: c for c in cohorts}, flavors={f: ResourceFlavor(f) for f in flavors},
        workloads=tuple(workloads))


def admitted(decision) -> list[str]:
    return [a.workload_id for a in decision.admitted]


def pending(decision) -> dict[str, tuple[int, str]]:
    return {p.workload_id: (p.position, p.reason) for p in decision.pending}


# --- nominal quota and FIFO ------------------------------------------------------------------
def test_nominal_quota_is_respected_in_fifo_order_and_the_rest_wait_with_position_and_reason():
    decision = decide(snap([cq("cq", 4)], [wl("w1", 2), wl("w2", 2), wl("w3", 1), wl("w4", 3)]), NOW)
    assert admitted(decision) == ["w1", "w2"]
    waits = pending(decision)
    assert [waits["w3"][0], waits["w4"][0]] == [0, 1]
    assert "insufficient unused quota for nvidia.com/gpu in flavor default: asks 1, 0 free" in waits["w3"][1]
    assert "held by job team/w1 (alice) in cq (2)" in waits["w3"][1]


def test_strict_fifo_head_blocks_the_queue_best_effort_lets_smaller_ones_pass():
    workloads = [wl("w0", 3, state=WorkloadState.ADMITTED, cluster_queue="cq"), wl("w1", 2), wl("w2", 1)]
    strict = decide(snap([cq("cq", 4, queueing_strategy=QueueingStrategy.STRICT_FIFO)], workloads), NOW)
    assert admitted(strict) == []
    assert "waits behind job team/w1 (alice) at the head of StrictFIFO ClusterQueue cq" in pending(strict)["w2"][1]
    assert pending(strict)["w2"][0] == 1
    best = decide(snap([cq("cq", 4, queueing_strategy=QueueingStrategy.BEST_EFFORT_FIFO)], workloads), NOW)
    assert admitted(best) == ["w2"]
    assert pending(best)["w1"][0] == 0


def test_priority_orders_the_queue_before_age():
    decision = decide(snap([cq("cq", 2)], [wl("w1", 2), wl("w2", 2, priority=10)]), NOW)
    assert admitted(decision) == ["w2"]
    assert pending(decision)["w1"][0] == 0


def test_a_request_no_quota_could_ever_give_says_so_and_does_not_block_strict_fifo():
    queue = cq("cq", 4, queueing_strategy=QueueingStrategy.STRICT_FIFO)
    decision = decide(snap([queue], [wl("w1", 8), wl("w2", 1)]), NOW)
    assert admitted(decision) == ["w2"]
    reason = pending(decision)["w1"][1]
    assert "asks 8, more than ClusterQueue cq could ever get (4): it can never be admitted" in reason


def test_pods_count_only_where_a_queue_covers_them():
    groups = (ResourceGroup((GPU, "pods"), (FlavorQuotas("default", (ResourceQuota(GPU, 8000),
                                                                     ResourceQuota("pods", 2000))),)),)
    counting = ClusterQueue("cq", groups, namespace_selector=ALL)
    workloads = [dataclasses.replace(wl(f"w{n}", 1), requests={GPU: 1000, "pods": 1000}) for n in range(1, 4)]
    decision = decide(snap([counting], workloads), NOW)
    assert admitted(decision) == ["w1", "w2"]
    assert "insufficient unused quota for pods in flavor default: asks 1, 0 free" in pending(decision)["w3"][1]
    assert admitted(decide(snap([cq("cq", 8)], workloads), NOW)) == ["w1", "w2", "w3"]  # not covered: not counted


def test_an_uncovered_resource_is_inadmissible():
    workload = dataclasses.replace(wl("w1", 1), requests={GPU: 1000, "example.com/fpga": 1000})
    reason = pending(decide(snap([cq("cq", 4)], [workload]), NOW))["w1"][1]
    assert "resource example.com/fpga unavailable in ClusterQueue cq" in reason


# --- queues that are missing, stopped, or not for this namespace ------------------------------
def test_missing_local_queue_and_missing_cluster_queue_are_named():
    decision = decide(snap([cq("cq", 4)], [wl("w1", 1, queue="nope"), wl("w2", 1, queue="lq2")],
                           locals_={"lq": "cq", "lq2": "gone"}), NOW)
    waits = pending(decision)
    assert waits["w1"] == (0, "LocalQueue nope doesn't exist in namespace team")
    assert waits["w2"][1].startswith("ClusterQueue gone doesn't exist")


def test_namespace_selector_none_admits_no_namespace_and_labels_select():
    decision = decide(snap([cq("cq", 4, selector=None)], [wl("w1", 1)]), NOW)
    assert "namespaceSelector null: it admits no namespace" in pending(decision)["w1"][1]
    by_name = LabelSelector({"kubernetes.io/metadata.name": "team"})
    assert admitted(decide(snap([cq("cq", 4, selector=by_name)], [wl("w1", 1)]), NOW)) == ["w1"]
    other = LabelSelector(match_expressions=(("tier", "In", ("gold",)),))
    assert admitted(decide(snap([cq("cq", 4, selector=other)], [wl("w1", 1)]), NOW)) == []


def test_missing_flavor_makes_the_queue_inactive():
    decision = decide(snap([cq("cq", 4, flavors=("a100",))], [wl("w1", 1)]), NOW)
    assert "ClusterQueue cq is inactive: ResourceFlavor a100 doesn't exist" in pending(decision)["w1"][1]


def test_hold_admits_nothing_new_and_hold_and_drain_evicts_the_admitted():
    running = wl("w0", 1, state=WorkloadState.ADMITTED, cluster_queue="cq")
    hold = decide(snap([cq("cq", 4, stop_policy=StopPolicy.HOLD)], [running, wl("w1", 1)]), NOW)
    assert admitted(hold) == [] and hold.evicted == ()
    assert "ClusterQueue cq is stopped (Hold)" in pending(hold)["w1"][1]
    drain = decide(snap([cq("cq", 4, stop_policy=StopPolicy.HOLD_AND_DRAIN)], [running, wl("w1", 1)]), NOW)
    assert [e.workload_id for e in drain.evicted] == ["w0"]
    assert "HoldAndDrain" in drain.evicted[0].reason
    local = snap([cq("cq", 4)], [running, wl("w1", 1)])
    local = dataclasses.replace(local, local_queues={("team", "lq"): LocalQueue("lq", "team", "cq",
                                                                                StopPolicy.HOLD_AND_DRAIN)})
    drained = decide(local, NOW)
    assert [e.reason for e in drained.evicted] == ["LocalQueue team/lq is stopped (HoldAndDrain)"]
    assert admitted(drained) == [] and "LocalQueue team/lq is stopped" in pending(drained)["w1"][1]


# --- cohorts: borrowing, limits, reclaiming ------------------------------------------------------
def test_borrowing_from_the_cohort_and_the_borrowing_limit():
    queues = [cq("a", 2, cohort="c"), cq("b", 4, cohort="c")]
    decision = decide(snap(queues, [wl("w1", 5)]), NOW)
    assert admitted(decision) == ["w1"] and decision.admitted[0].borrowing
    limited = [cq("a", 2, cohort="c", borrowing=2), cq("b", 4, cohort="c")]
    decision = decide(snap(limited, [wl("w1", 5)]), NOW)
    assert "more than ClusterQueue a could ever get with its cohort c (4)" in pending(decision)["w1"][1]


def test_lending_limit_keeps_part_of_a_lenders_quota():
    queues = [cq("a", 0, cohort="c"), cq("b", 4, cohort="c", lending=1)]
    assert admitted(decide(snap(queues, [wl("w1", 1)]), NOW)) == ["w1"]
    assert "could ever get with its cohort c (1)" in pending(decide(snap(queues, [wl("w1", 2)]), NOW))["w1"][1]


def test_cohort_object_quota_caps_and_adds_to_its_queues():
    queues = [cq("alice", 1, cohort="project"), cq("bob", 1, cohort="project")]
    lab = Cohort("project", resource_groups=(ResourceGroup((GPU,), (FlavorQuotas(
        "default", (ResourceQuota(GPU, 2000),)),)),))
    decision = decide(snap(queues, [wl("w1", 3), wl("w2", 2)], cohorts=[lab]), NOW)
    assert admitted(decision) == ["w1"]  # 1 own + 1 of bob's + 2 of the project's own quota: 4 in all
    assert pending(decision)["w2"][0] == 0


def gpu_group(nominal: float, borrowing: float | None = None, lending: float | None = None) -> tuple:
    milli = lambda value: None if value is None else int(value * 1000)  # noqa: E731
    return (ResourceGroup((GPU,), (FlavorQuotas("default", (ResourceQuota(GPU, milli(nominal), milli(borrowing),
                                                                           milli(lending)),)),)),)


def test_a_cohort_tree_lends_its_own_quota_down_within_each_levels_borrowing_limit():
    # org holds 4 GPUs of its own; lab (a child of org) may borrow at most 1 of them; its queue has 1
    cohorts = [Cohort("org", resource_groups=gpu_group(4)), Cohort("lab", parent="org",
                                                               resource_groups=gpu_group(0, borrowing=1))]
    queues = [cq("alice", 1, cohort="lab"), cq("ops", 0, cohort="org")]
    decision = decide(snap(queues, [wl("w1", 2), wl("w2", 1)], cohorts=cohorts), NOW)
    assert admitted(decision) == ["w1"]  # 1 own + 1 borrowed through lab
    assert "more than ClusterQueue alice could ever get with its cohort lab (2)" in pending(
        decide(snap(queues, [wl("w1", 3)], cohorts=cohorts), NOW))["w1"][1]
    # ops, right under org, may take org's 4 and the 1 alice lends up through lab: 5 in all
    both = {"lq": "alice", "lo": "ops"}
    assert admitted(decide(snap(queues, [wl("w1", 5, queue="lo")], cohorts=cohorts, locals_=both), NOW)) == ["w1"]
    too_big = decide(snap(queues, [wl("w1", 6, queue="lo")], cohorts=cohorts, locals_=both), NOW)
    assert "more than ClusterQueue ops could ever get with its cohort org (5)" in pending(too_big)["w1"][1]


def test_a_cycle_of_cohort_parents_makes_its_queues_inactive():
    cohorts = [Cohort("a", parent="b"), Cohort("b", parent="a")]
    reason = pending(decide(snap([cq("cq", 4, cohort="a")], [wl("w1", 1)], cohorts=cohorts), NOW))["w1"][1]
    assert reason == "ClusterQueue cq is inactive: its Cohort a is part of a cycle of parents"


def test_reclaim_within_cohort_evicts_the_borrower_most_recently_admitted_first():
    reclaim = Preemption(reclaim_within_cohort=PreemptionPolicy.ANY)
    queues = [cq("a", 2, cohort="c", preemption=reclaim), cq("b", 2, cohort="c")]
    workloads = [wl("b1", 2, queue="lb", state=WorkloadState.ADMITTED, cluster_queue="b", admitted_at=1),
                 wl("b2", 1, queue="lb", state=WorkloadState.ADMITTED, cluster_queue="b", admitted_at=3),
                 wl("b3", 1, queue="lb", state=WorkloadState.ADMITTED, cluster_queue="b", admitted_at=2),
                 wl("a1", 1, priority=-5)]
    decision = decide(snap(queues, workloads, locals_={"lq": "a", "lb": "b"}), NOW)
    assert [e.workload_id for e in decision.evicted] == ["b2"]
    assert "due to reclamation within the cohort" in decision.evicted[0].reason
    assert "preempting to make room: waits for job team/b2" in pending(decision)["a1"][1]
    # next cycle, b2 still stopping: nobody else is evicted, a1 keeps waiting for it
    workloads[1] = dataclasses.replace(workloads[1], state=WorkloadState.EVICTED)
    again = decide(snap(queues, workloads, locals_={"lq": "a", "lb": "b"}), NOW)
    assert again.evicted == () and admitted(again) == []
    # once b2 is stopped (back to pending), a1 gets in before it (b2 would borrow)
    workloads[1] = dataclasses.replace(workloads[1], state=WorkloadState.PENDING, cluster_queue=None, flavors={})
    later = decide(snap(queues, workloads, locals_={"lq": "a", "lb": "b"}), NOW)
    assert admitted(later) == ["a1"]


def test_no_reclaim_when_the_policy_is_never():
    queues = [cq("a", 2, cohort="c"), cq("b", 2, cohort="c")]
    workloads = [wl("b1", 4, queue="lb", state=WorkloadState.ADMITTED, cluster_queue="b"), wl("a1", 1)]
    decision = decide(snap(queues, workloads, locals_={"lq": "a", "lb": "b"}), NOW)
    assert decision.evicted == ()
    assert "preempting would not free enough" in pending(decision)["a1"][1]


# --- priority preemption within a ClusterQueue -------------------------------------------------
def test_lower_priority_preemption_picks_lowest_priority_then_newest_minimal_set():
    policy = Preemption(within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)
    held = [wl("w1", 1, priority=1, state=WorkloadState.ADMITTED, cluster_queue="cq", admitted_at=1),
            wl("w2", 1, priority=0, state=WorkloadState.ADMITTED, cluster_queue="cq", admitted_at=2),
            wl("w3", 1, priority=0, state=WorkloadState.ADMITTED, cluster_queue="cq", admitted_at=3),
            wl("w4", 1, priority=5, state=WorkloadState.ADMITTED, cluster_queue="cq", admitted_at=4)]
    decision = decide(snap([cq("cq", 4, preemption=policy)], [*held, wl("w9", 2, priority=3)]), NOW)
    assert sorted(e.workload_id for e in decision.evicted) == ["w2", "w3"]
    assert "due to prioritization in the ClusterQueue" in decision.evicted[0].reason
    equal = decide(snap([cq("cq", 4, preemption=policy)], [*held, wl("w9", 4, priority=1)]), NOW)
    assert equal.evicted == ()  # w1 (equal) and w4 (higher) may not be preempted: nothing fits


def test_lower_or_newer_equal_priority_preempts_newer_equals_only():
    policy = Preemption(within_cluster_queue=PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY)
    held = [wl("w5", 2, state=WorkloadState.ADMITTED, cluster_queue="cq", created=5),
            wl("w1", 2, state=WorkloadState.ADMITTED, cluster_queue="cq", created=1)]
    decision = decide(snap([cq("cq", 4, preemption=policy)], [*held, wl("w3", 2, created=3)]), NOW)
    assert [e.workload_id for e in decision.evicted] == ["w5"]


def test_borrow_within_cohort_lets_a_borrower_preempt_lower_priority_workloads():
    policy = Preemption(reclaim_within_cohort=PreemptionPolicy.ANY,
                        borrow_within_cohort=PreemptionPolicy.LOWER_PRIORITY)
    queues = [cq("a", 2, cohort="c", preemption=policy), cq("b", 2, cohort="c")]
    workloads = [wl("b1", 3, queue="lb", state=WorkloadState.ADMITTED, cluster_queue="b", priority=0),
                 wl("a1", 3, priority=10)]
    locals_ = {"lq": "a", "lb": "b"}
    assert [e.workload_id for e in decide(snap(queues, workloads, locals_=locals_), NOW).evicted] == ["b1"]
    without = [cq("a", 2, cohort="c", preemption=Preemption(reclaim_within_cohort=PreemptionPolicy.ANY)),
               cq("b", 2, cohort="c")]
    assert decide(snap(without, workloads, locals_=locals_), NOW).evicted == ()  # a1 would borrow: not allowed


# --- flavors ------------------------------------------------------------------------------------
def test_flavors_are_tried_in_order_and_fungibility_can_avoid_borrowing():
    queues = [cq("a", 1, cohort="c", flavors=("default", "spot")), cq("b", 4, cohort="c", flavors=("default",))]
    decision = decide(snap(queues, [wl("w1", 2)]), NOW)
    assert decision.admitted[0].flavors == {GPU: "default"} and decision.admitted[0].borrowing
    avoid = FlavorFungibility(when_can_borrow="TryNextFlavor")
    queues[0] = cq("a", 1, cohort="c", flavors=("default", "spot"), flavor_fungibility=avoid)
    decision = decide(snap(queues, [wl("w1", 1, state=WorkloadState.ADMITTED, cluster_queue="a"), wl("w2", 1)]), NOW)
    assert decision.admitted[0].flavors == {GPU: "spot"} and not decision.admitted[0].borrowing


def test_a_second_resource_group_gets_its_own_flavor():
    groups = (ResourceGroup((CPU,), (FlavorQuotas("default", (ResourceQuota(CPU, 4000),)),)),
              ResourceGroup((GPU,), (FlavorQuotas("default", (ResourceQuota(GPU, 0),)),
                                     FlavorQuotas("spot", (ResourceQuota(GPU, 2000),)))))
    queue = ClusterQueue("cq", groups, namespace_selector=ALL)
    workload = dataclasses.replace(wl("w1", 1), requests={CPU: 2000, GPU: 1000})
    assert decide(snap([queue], [workload]), NOW).admitted[0].flavors == {CPU: "default", GPU: "spot"}


# --- properties ---------------------------------------------------------------------------------
NEVER, LOWER, LOWER_OR_NEWER, ANY = (PreemptionPolicy.NEVER, PreemptionPolicy.LOWER_PRIORITY,
                                     PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, PreemptionPolicy.ANY)


@st.composite
def scenarios(draw):
    """Up to 4 queues (alone or in one of two cohorts, with limits), up to 14 workloads in any state."""
    queues = []
    for index in range(draw(st.integers(1, 4))):
        cohort = draw(st.sampled_from([None, "c", "c", "d"]))
        limits = {} if cohort is None else {"borrowing": draw(st.sampled_from([None, None, 0, 1, 3])),
                                            "lending": draw(st.sampled_from([None, None, 0, 2]))}
        queues.append(cq(
            f"q{index}", draw(st.integers(0, 6)), cohort=cohort, **limits,
            queueing_strategy=draw(st.sampled_from(list(QueueingStrategy))),
            preemption=Preemption(within_cluster_queue=draw(st.sampled_from([NEVER, LOWER, LOWER_OR_NEWER])),
                                  reclaim_within_cohort=draw(st.sampled_from([NEVER, LOWER, LOWER_OR_NEWER, ANY])),
                                  borrow_within_cohort=draw(st.sampled_from([NEVER, LOWER])))))
    workloads = []
    for index in range(draw(st.integers(0, 14))):
        state = draw(st.sampled_from([WorkloadState.PENDING] * 3 + [WorkloadState.ADMITTED, WorkloadState.EVICTED]))
        target = draw(st.integers(0, len(queues) - 1))
        workloads.append(wl(f"w{index}", draw(st.integers(0, 4)), queue=f"l{target}", state=state,
                            cluster_queue=queues[target].name, priority=draw(st.integers(0, 2)),
                            created=float(draw(st.integers(0, 5))), admitted_at=float(index)))
    return snap(queues, workloads, locals_={f"l{index}": queue.name for index, queue in enumerate(queues)})


def usage_after(snapshot: Snapshot, decision) -> tuple[dict[str, int], dict[str, int]]:
    """Each ClusterQueue's GPUs held before the decision and after it (evicted ones still hold)."""
    before: dict[str, int] = {name: 0 for name in snapshot.cluster_queues}
    for workload in snapshot.workloads:
        if workload.state is not WorkloadState.PENDING:
            before[workload.cluster_queue] += workload.requests[GPU]
    after = dict(before)
    by_id = {w.id: w for w in snapshot.workloads}
    for admission in decision.admitted:
        after[admission.cluster_queue] += by_id[admission.workload_id].requests[GPU]
    return before, after


def legal(snapshot: Snapshot, usage: dict[str, int]) -> bool:
    """Kueue's limits written out for flat cohorts, apart from the tree arithmetic ``decide`` uses."""
    pools: dict[str, list[int]] = {}
    for name, queue in snapshot.cluster_queues.items():
        quota = queue.resource_groups[0].flavors[0].resources[0]
        if queue.cohort is None:
            if usage[name] > quota.nominal:
                return False
            continue
        if quota.borrowing_limit is not None and usage[name] > quota.nominal + quota.borrowing_limit:
            return False
        kept = 0 if quota.lending_limit is None else max(0, quota.nominal - quota.lending_limit)
        pool = pools.setdefault(queue.cohort, [0, 0])
        pool[0] += max(0, usage[name] - kept)  # what it takes from the shared pool
        pool[1] += quota.nominal - kept  # what it puts in
    return all(taken <= lent for taken, lent in pools.values())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_property_quota_never_exceeded_preemptors_outrank_victims_positions_are_a_permutation(snapshot):
    decision = decide(snapshot, NOW)
    before, after = usage_after(snapshot, decision)
    # a legal state (each queue within nominal + borrowingLimit, each cohort's borrowed within what its
    # queues lend) stays legal; a random state already beyond that may only not grow where it is beyond
    if legal(snapshot, before):
        assert legal(snapshot, after)
    for name, queue in snapshot.cluster_queues.items():
        if queue.cohort is None:
            assert after[name] <= max(queue.resource_groups[0].flavors[0].resources[0].nominal, before[name])
    # preemption follows the policy of the preemptor's ClusterQueue
    by_id = {w.id: w for w in snapshot.workloads}
    for eviction in decision.evicted:
        victim, preemptor = by_id[eviction.workload_id], by_id[eviction.by]
        assert victim.state is WorkloadState.ADMITTED
        home = snapshot.local_queues[("team", preemptor.queue)].cluster_queue
        policy = snapshot.cluster_queues[home].preemption
        if victim.cluster_queue == home:
            assert may_preempt(policy.within_cluster_queue, preemptor, victim)
        else:
            assert snapshot.cluster_queues[victim.cluster_queue].cohort == snapshot.cluster_queues[home].cohort
            assert may_preempt(policy.reclaim_within_cohort, preemptor, victim)
    # every pending workload is decided once; positions in each queue are 0..n-1
    pending_ids = {w.id for w in snapshot.workloads if w.state is WorkloadState.PENDING}
    decided = [a.workload_id for a in decision.admitted] + [p.workload_id for p in decision.pending]
    assert sorted(decided) == sorted(pending_ids)
    groups: dict[str, list[int]] = {}
    for entry in decision.pending:
        groups.setdefault(by_id[entry.workload_id].queue, []).append(entry.position)
        assert entry.reason
    for positions in groups.values():
        assert sorted(positions) == list(range(len(positions)))


# --- manifests to records (queues.specs) --------------------------------------------------------
def test_specs_read_v1beta1_and_v1beta2_spellings_alike():
    group = [{"coveredResources": ["cpu", GPU], "flavors": [{"name": "a100", "resources": [
        {"name": "cpu", "nominalQuota": "500m"}, {"name": GPU, "nominalQuota": 4, "borrowingLimit": 2,
                                                   "lendingLimit": "1"}]}]}]
    found = objects_from_specs([
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "old"},
         "spec": {"cohort": "lab", "resourceGroups": group, "namespaceSelector": {},
                  "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
                  "preemption": {"borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "new"},
         "spec": {"cohortName": "lab", "resourceGroups": group, "queueingStrategy": "StrictFIFO",
                  "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
                  "preemption": {"borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "lab"},
         "spec": {"parentName": "org"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "ml"},
         "spec": {"clusterQueue": "new", "stopPolicy": "Hold"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "hi"},
         "value": 10},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ignored"}},
    ])
    old, new = found.cluster_queues["old"], found.cluster_queues["new"]
    assert (old.cohort, new.cohort) == ("lab", "lab")
    assert old.flavor_fungibility == new.flavor_fungibility == FlavorFungibility("MayStopSearch", "MayStopSearch")
    assert old.preemption == new.preemption
    assert old.preemption.borrow_max_priority_threshold == 100
    assert old.resource_groups[0].flavors[0].resources == (ResourceQuota("cpu", 500),
                                                          ResourceQuota(GPU, 4000, 2000, 1000))
    assert old.namespace_selector == LabelSelector() and new.namespace_selector is None
    assert new.queueing_strategy is QueueingStrategy.STRICT_FIFO
    assert found.cohorts["lab"].parent == "org"
    assert found.local_queues[("ml", "q")].stop_policy is StopPolicy.HOLD
    assert found.priority_classes["hi"].value == 10


CORPUS = (Path(__file__).parents[2] / "../shared/conformance/k8s-manifests").resolve()
# Kueue's own queue setups in the corpus: (ClusterQueues, LocalQueues, Cohorts, ResourceFlavors, priority classes)
SAMPLES = {
    "kueue__cmd_kueueviz_examples_01-cluster-queues.yaml": (4, 0, 0, 0, 0),
    "kueue__cmd_kueueviz_examples_01.5-cohorts.yaml": (0, 0, 5, 0, 0),
    "kueue__cmd_kueueviz_examples_07-workload-priority-classes.yaml": (0, 0, 0, 0, 3),
    "kueue__config_samples_single-clusterqueue-setup.yaml": (1, 1, 0, 1, 0),
    "kueue__site_static_examples_admin_single-clusterqueue-setup.yaml": (1, 1, 0, 1, 0),
    "kueue__site_static_examples_admission-fs_admission-fair-sharing-setup.yaml": (1, 2, 0, 1, 0),
}


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared manifest corpus is not beside the repository")
def test_kueue_samples_of_the_corpus_convert_and_admit():
    for name, counts in SAMPLES.items():
        found = objects_from_specs(load_yaml_documents((CORPUS / name).read_text(), str(CORPUS / name)))
        assert (len(found.cluster_queues), len(found.local_queues), len(found.cohorts), len(found.flavors),
                len(found.priority_classes)) == counts, name
    found = objects_from_specs(load_yaml_documents(
        (CORPUS / "kueue__config_samples_single-clusterqueue-setup.yaml").read_text(), "sample"))
    (namespace, local), = found.local_queues
    workload = dataclasses.replace(wl("w1", 0, queue=local, namespace=namespace), requests={CPU: 1000})
    decision = decide(Snapshot(found.cluster_queues, found.local_queues, found.cohorts, found.flavors, (workload,)),
                      NOW)
    assert admitted(decision) == ["w1"]


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                           st.sampled_from(["resourceGroups", "coveredResources", "flavors", "name", "resources",
                                            "nominalQuota", "borrowingLimit", "namespaceSelector", "matchLabels",
                                            "matchExpressions", "operator", "values", "preemption", "cohort",
                                            "queueingStrategy", "clusterQueue", "parentName", "stopPolicy"]),
                           inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["ClusterQueue", "LocalQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass"]),
       JSONISH, JSONISH)
def test_fuzzed_specs_convert_or_raise_one_user_error(kind, spec, value):
    try:
        objects_from_specs([{"kind": kind, "metadata": {"name": "x"}, "spec": spec, "value": value}])
    except UserError as exc:
        assert str(exc) and "\n" not in str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_property_the_caches_decide_exactly_as_no_caches_do(snapshot):
    """Assignments, "held by" texts and failed preemptions are kept per cohort tree while its usage is unchanged
    (Kueue's equivalence hashing): a cycle whose every version check misses decides the same, reasons included."""
    cached = decide(snapshot, NOW)
    fresh = itertools.count(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(QuotaTree, "version_of", lambda self, queue: -next(fresh))  # never what was stored
        uncached = decide(snapshot, NOW)
    assert cached == uncached
