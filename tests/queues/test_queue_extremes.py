"""Kueue objects driven to extremes (issue 28): every number a user writes is bounded before anything runs.

Quotas (``nominalQuota``, ``borrowingLimit``, ``lendingLimit``: Kubernetes quantities, which stop at
2^63-1), priorities (int32), ``maxPriorityThreshold`` (int32), how many resource groups (16 at most,
as Kueue's CRD says), and cohort hierarchies of any depth or shape: ``millpond apply`` takes an
object or refuses it with one ``error:`` line (exit 2), never a traceback, and whatever it took,
``get clusterqueues`` and ``queue list`` read back. An admission cycle over a chain of thousands
of cohorts, or a cycle among them, is decided at once (it once compared whole subtrees at each step
up a chain: 37 s for 500 cohorts, and a recursion past 1000 levels).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from millpond.scheduling.queues.admission import decide
from millpond.scheduling.queues.model import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    Workload,
    WorkloadKind,
)

PROPERTY = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

big_ints = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**63 - 1, 2**63]))
quantities = st.one_of(
    big_ints, st.floats(allow_nan=True, allow_infinity=True),
    st.builds(lambda mantissa, exponent, suffix: f"{mantissa}{exponent}{suffix}",
              st.sampled_from(["1", "9.5", "-3", "0.0000001", "999999999999999999999"]),
              st.sampled_from(["", "e18", "e400", "e-400", "E9"]),
              st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi", "Ei", "P"])),
)


def _one_line_or_ok(result: Any) -> None:
    assert "Traceback" not in result.err, result.err
    if result.code != 0:
        lines = result.err.strip().splitlines()
        assert result.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (result.code, result.err)


@PROPERTY
@example(nominal="2", borrowing="1", lending="1", groups=0, priority=100, threshold=10)  # taken: then read back
@given(nominal=quantities, borrowing=st.one_of(st.none(), quantities), lending=st.one_of(st.none(), quantities),
       groups=st.integers(0, 20), priority=big_ints, threshold=st.one_of(st.none(), big_ints))
def test_extreme_queue_numbers_are_taken_or_refused_in_one_line(cli, home: Path, tmp_path: Path, nominal, borrowing,
                                                                 lending, groups, priority, threshold) -> None:
    resource: dict[str, Any] = {"name": "cpu", "nominalQuota": nominal}
    if borrowing is not None:
        resource["borrowingLimit"] = borrowing
    if lending is not None:
        resource["lendingLimit"] = lending
    resource_groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [resource]}]}]
    resource_groups += [{"coveredResources": [f"r{i}"], "flavors": [{"name": f"f{i}", "resources": [
        {"name": f"r{i}", "nominalQuota": 1}]}]} for i in range(groups)]
    preemption: dict[str, Any] = {"reclaimWithinCohort": "Any"}
    if threshold is not None:
        preemption["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": threshold}
    documents = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"},
         "value": priority},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
         "spec": {"namespaceSelector": {}, "cohortName": "c", "preemption": preemption,
                  "resourceGroups": resource_groups}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q"},
         "spec": {"clusterQueue": "q"}},
    ]
    path = tmp_path / "queue.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    applied = cli("apply", "-f", path)
    _one_line_or_ok(applied)
    if groups > 15:  # 1 + groups resource groups: Kueue's CRD allows 16
        assert applied.code == 2, "17 resource groups were taken"
    for read in (("get", "clusterqueues", "-o", "json"), ("queue", "list", "-o", "json")):
        shown = cli(*read)
        assert shown.code == 0 and "Traceback" not in shown.err, shown.err
        json.loads(shown.out)


_QUOTA = (ResourceGroup(("cpu",), (FlavorQuotas("f", (ResourceQuota("cpu", 1000),)),)),)


def _snapshot(depth: int, cycle_at: int | None) -> Snapshot:
    """ClusterQueue q (1 CPU) under a chain of ``depth`` cohorts of 1 CPU each; the top one's parent is
    cohort ``cycle_at`` when given (a cycle), else none."""
    cohorts = {}
    for i in range(depth):
        parent = f"c{i + 1}" if i + 1 < depth else (f"c{cycle_at}" if cycle_at is not None else None)
        cohorts[f"c{i}"] = Cohort(f"c{i}", parent, _QUOTA)
    return Snapshot(cluster_queues={"q": ClusterQueue("q", _QUOTA, cohort="c0", namespace_selector=LabelSelector())},
                    local_queues={("default", "q"): LocalQueue("q", "default", "q")}, cohorts=cohorts,
                    flavors={"f": ResourceFlavor("f")},
                    workloads=(Workload("w", WorkloadKind.JOB, "j", "default", "u", "q", {"cpu": 2000}),))


@PROPERTY
@given(depth=st.integers(1, 3000), cycle=st.one_of(st.none(), st.floats(0, 1)))
def test_a_cohort_chain_of_any_depth_is_decided(depth: int, cycle: float | None) -> None:
    cycle_at = None if cycle is None else min(depth - 1, int(cycle * depth))
    decision = decide(_snapshot(depth, cycle_at), 0.0)
    if cycle_at is None:  # 2 CPUs: its own 1 and 1 borrowed from the cohorts above
        assert [a.workload_id for a in decision.admitted] == ["w"] and decision.admitted[0].borrowing
    else:  # a cycle above the queue leaves it inactive, as in Kueue
        assert decision.admitted == () and decision.pending[0].workload_id == "w"


def test_a_chain_of_three_thousand_cohorts_does_not_hang_admission() -> None:
    """In a process of its own, so a hang (the old cycle check) ends the test instead of the suite."""
    script = ("import sys; sys.path[:0] = sys.argv[1:]; "
              "from tests.queues.test_queue_extremes import _snapshot, decide; "
              "print(len(decide(_snapshot(3000, None), 0.0).admitted))")
    done = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parents[2])], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr[-2000:]
