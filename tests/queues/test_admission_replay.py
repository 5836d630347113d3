"""``benchmarks/admission_replay.py`` at a tiny scale: its accounting holds, on SQLite and PostgreSQL.

Kueue's baseline mix in one cohort of two ClusterQueues, 30 workloads, through the real store and
``run_cycle``: every workload is admitted and finished exactly once more than it was evicted, no
ClusterQueue or cohort ever holds more than its quota allows, and the usage is a fraction.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from millpond.settings import load_settings
from millpond.store.workloads import FINISHED, WorkloadStore

pytestmark = pytest.mark.usefixtures("database")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "admission_replay.py"


def _benchmark():  # noqa: ANN202 - the module, loaded from its file (benchmarks/ is no package)
    spec = importlib.util.spec_from_file_location("admission_replay", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_tiny_replay_accounts_for_every_workload() -> None:
    bench = _benchmark()
    counts = {"small": 10, "medium": 3, "large": 2}
    plan = bench.Plan(cohorts=1, queues=2, classes=tuple(
        dataclasses.replace(c, count=counts[c.name]) for c in bench.BASELINE))
    assert plan.total == 30
    settings = load_settings()
    outcome = bench.replay(settings, plan)

    records = [r for r in WorkloadStore(settings).list() if r.user == "bench"]
    assert len(records) == 30
    assert all(r.state == FINISHED and r.reason == "finished" for r in records), {r.state for r in records}
    assert outcome.finished == outcome.admitted_once == 30
    assert outcome.admissions == 30 + outcome.evictions  # each eviction costs one admission more
    assert sum(r.requeues for r in records) == outcome.evictions
    assert all(r.admitted_at >= r.created for r in records)
    assert set(outcome.admission_s) == set(counts) and all(v >= 0 for v in outcome.admission_s.values())
    assert 0 < outcome.usage <= 1
    assert outcome.peak_queue <= (plan.nominal + plan.borrowing_limit) * 1000
    assert outcome.peak_cohort <= plan.queues * plan.nominal * 1000
    assert outcome.peak_queue >= 20 * 1000  # a large one ran
    # the classes arrive in Kueue's order: each stream's workloads one interval apart
    names = [a.name for a in bench.arrivals(plan)]
    assert names[0] == "small-0-0-0" and len(set(names)) == 15
