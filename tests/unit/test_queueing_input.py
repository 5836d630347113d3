"""Hostile input where jobs and runs name their queue: any queue name, any ``kubeflow-userid`` header and any
mix of a run's and its tasks' own Kueue labels is either taken as Kueue would or refused in one line."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request

from millpond.errors import UserError
from millpond.pipelines.queueing import USER_ANNOTATION, queued, task_queueing, with_queue
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL
from millpond.scheduling.queues.submission import ANONYMOUS, check_queue_name
from millpond.server.callers import USERID_PREFIX, caller
from tests.fuzz_support import fuzz_settings

NAMES = st.one_of(st.text(max_size=300), st.from_regex(r"\A[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?\Z"))


@fuzz_settings(300)
@given(NAMES)
def test_a_queue_name_is_a_dns_subdomain_or_one_error_line(name: str) -> None:
    try:
        assert check_queue_name(name) == name
    except UserError as exc:
        assert "\n" not in str(exc).replace(repr(name), "") and str(exc).startswith("--queue ")
        return
    assert name == "" or (len(name) <= 253 and name == name.lower() and name[0].isalnum() and name[-1].isalnum())


@fuzz_settings(300)
@given(st.binary(max_size=400))
def test_the_callers_identity_is_one_printable_line_or_anonymous(raw: bytes) -> None:
    request = Request({"type": "http", "headers": [(b"kubeflow-userid", raw)]})
    who = caller(request)
    assert who == ANONYMOUS or (who.isprintable() and 0 < len(who) <= 253 and not who.startswith(USERID_PREFIX)
                                and who == who.strip())


LABELS = st.dictionaries(st.sampled_from([QUEUE_LABEL, PRIORITY_LABEL, "team"]),
                         st.sampled_from(["", "own-q", "own-p", "x"]), max_size=3)


@fuzz_settings(200)
@given(st.dictionaries(st.sampled_from(["exec-a", "exec-b", "exec-c"]), st.none() | LABELS, max_size=3),
       st.sampled_from(["", "run-q"]), st.sampled_from(["", "run-p"]))
def test_a_runs_queue_goes_where_a_task_names_none_and_the_user_where_a_task_is_queued(
        own: dict[str, Any], queue: str, priority: str) -> None:
    spec = {"deploymentSpec": {"executors": {"exec-a": {"container": {}}, "exec-b": {"container": {}},
                                             "exec-c": {"importer": {}}}}}
    executors = {label: {"podMetadata": {"labels": dict(labels)}}
                 for label, labels in own.items() if labels is not None}
    platform = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}} if executors else None
    stamped = with_queue(spec, platform, queue, priority, "alice")
    if not (queue or priority) and not queued(spec, platform):
        assert stamped is platform
        return
    configs = (stamped or {}).get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    for label in ("exec-a", "exec-b"):
        mine = (own.get(label) or {})
        metadata = (configs.get(label) or {}).get("podMetadata") or {}
        labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
        assert labels.get(QUEUE_LABEL, "") == (mine.get(QUEUE_LABEL) or queue)
        assert labels.get(PRIORITY_LABEL, "") == (mine.get(PRIORITY_LABEL) or priority)
        found = task_queueing(labels, annotations)
        assert (found is not None) == bool(labels.get(QUEUE_LABEL))
        assert (annotations.get(USER_ANNOTATION) == "alice") == bool(labels.get(QUEUE_LABEL))
    assert configs.get("exec-c") == executors.get("exec-c")  # an importer takes no queue
