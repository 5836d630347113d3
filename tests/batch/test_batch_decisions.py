"""The Job controller's rules as pure functions (``training.batch.decisions``): no process, no store."""

from __future__ import annotations

import pytest

from millpond.training.batch.decisions import backoff_s, end_due, failures, pods_wanted
from millpond.training.batch.manifest import JobSettings
from millpond.training.batch.pods import JobPod, Phase


def pod(name: str, phase: str, index: int | None = None, restarts: int = 0) -> JobPod:
    return JobPod(name, index, phase, restarts=restarts)


def test_nonindexed_pods_are_created_up_to_parallelism_and_the_completions_left() -> None:
    settings = JobSettings(parallelism=2, completions=3)
    assert pods_wanted(settings, [], 2, held_back=False).create == (None, None)
    running = [pod("a", Phase.RUNNING), pod("b", Phase.SUCCEEDED), pod("c", Phase.SUCCEEDED)]
    assert pods_wanted(settings, running, 2, held_back=False).create == ()  # 1 left, 1 running
    assert pods_wanted(settings, running[1:], 2, held_back=False).create == (None,)
    assert pods_wanted(settings, [], 2, held_back=True).create == ()


def test_indexed_pods_take_the_lowest_indexes_neither_succeeded_nor_running() -> None:
    settings = JobSettings(parallelism=2, completions=5, indexed=True)
    pods = [pod("a", Phase.SUCCEEDED, 0), pod("b", Phase.RUNNING, 1), pod("c", Phase.FAILED, 2)]
    assert pods_wanted(settings, pods, 2, held_back=False).create == (2,)  # a failed index runs again
    assert pods_wanted(settings, [], 3, held_back=False).create == (0, 1, 2)


def test_a_work_queue_stops_creating_pods_once_one_succeeded() -> None:
    settings = JobSettings(parallelism=3, completions=None)
    assert pods_wanted(settings, [], 3, held_back=False).create == (None, None, None)
    pods = [pod("a", Phase.SUCCEEDED), pod("b", Phase.RUNNING)]
    assert pods_wanted(settings, pods, 3, held_back=False).create == ()
    assert end_due(settings, pods, 1.0) is None
    assert end_due(settings, pods[:1], 1.0) is not None


def test_a_lowered_parallelism_deletes_the_newest_active_pods() -> None:
    pods = [pod("a", Phase.RUNNING), pod("b", Phase.RUNNING), pod("c", Phase.PENDING)]
    changes = pods_wanted(JobSettings(parallelism=1, completions=5), pods, 1, held_back=False)
    assert (changes.create, changes.delete) == ((), ("b", "c"))


def test_the_end_backoff_limit_then_deadline_then_completions() -> None:
    settings = JobSettings(parallelism=1, completions=2, backoff_limit=1, active_deadline_s=10)
    failed = [pod("a", Phase.FAILED), pod("b", Phase.PENDING, restarts=1)]
    assert failures(failed) == 2
    ending = end_due(settings, failed, 1.0)
    assert ending is not None and (ending.outcome, ending.reason) == ("Failed", "BackoffLimitExceeded")
    ending = end_due(settings, [pod("a", Phase.RUNNING)], 10.0)
    assert ending is not None and (ending.outcome, ending.reason) == ("Failed", "DeadlineExceeded")
    assert end_due(settings, [pod("a", Phase.RUNNING)], None) is None  # suspended: no deadline runs
    done = end_due(settings, [pod("a", Phase.SUCCEEDED), pod("b", Phase.SUCCEEDED)], 3.0)
    assert done is not None and (done.outcome, done.reason) == ("Complete", "CompletionsReached")


def test_an_indexed_job_completes_when_every_index_succeeded() -> None:
    settings = JobSettings(parallelism=2, completions=2, indexed=True)
    assert end_due(settings, [pod("a", Phase.SUCCEEDED, 0), pod("b", Phase.SUCCEEDED, 0)], 1.0) is None
    assert end_due(settings, [pod("a", Phase.SUCCEEDED, 0), pod("b", Phase.SUCCEEDED, 1)], 1.0) is not None


@pytest.mark.parametrize(("failures_seen", "seconds"), [(0, 0.0), (1, 10.0), (2, 20.0), (3, 40.0), (10, 360.0)])
def test_the_backoff_doubles_from_ten_seconds_to_six_minutes(monkeypatch, failures_seen, seconds) -> None:
    monkeypatch.delenv("MILLPOND_JOB_BACKOFF_S", raising=False)
    assert backoff_s(failures_seen) == seconds
