"""A training job's end and the event that explains it are one write (``JobStore.set_status(event=...)``).

``arena wait`` returns at the first read that shows the end, and ``arena get -e`` right after must show
why: written apart, a reader between the two writes saw FAILED with no JobFailed event (CI, stop 44).
"""

from __future__ import annotations

import pytest

from millpond.store.training import JobStore

pytestmark = pytest.mark.usefixtures("database")


def test_the_end_and_its_event_are_written_together_and_only_once() -> None:
    store = JobStore()
    job = store.create("onhost", "default", "pytorchjob", {}, "RUNNING")
    assert store.set_status(job.uid, "FAILED", "JobFailed", "master-0 exited with code 2",
                            event=("master-0 exited with code 2 (the runtime policy is host)", "Warning"))
    assert [(e.type, e.reason, e.message) for e in store.events(job.uid)] == [
        ("Warning", "JobFailed", "master-0 exited with code 2 (the runtime policy is host)")]
    ended = store.by_uid(job.uid)
    assert ended is not None and (ended.status, ended.reason) == ("FAILED", "JobFailed")
    # a second end (a stop that raced the failure) changes nothing and says nothing
    assert not store.set_status(job.uid, "FAILED", "JobStopped", "stopped", event=("stopped", "Warning"))
    assert len(store.events(job.uid)) == 1
    assert store.by_uid(job.uid).reason == "JobFailed"  # type: ignore[union-attr]


def test_a_supervisor_that_is_no_longer_the_jobs_writes_neither() -> None:
    store = JobStore()
    job = store.create("taken", "default", "pytorchjob", {}, "RUNNING")
    store.set_supervisor(job.uid, 4242, "100")
    assert not store.set_status(job.uid, "SUCCEEDED", "JobSucceeded", "done", supervisor=(4343, "200"),
                                event=("all 2 instances exited 0", "Normal"))
    assert store.events(job.uid) == []
    assert store.by_uid(job.uid).status == "RUNNING"  # type: ignore[union-attr]
