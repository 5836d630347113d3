"""A Notebook's row on the Notebooks page: the JWA's ``process_status`` order (stopped, running, waiting with the
reason, error) over the statuses the supervisor writes, and GPUs whole or shared."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from millpond.notebooks.views import gpus_of, notebook_row, status_of

NOW = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
OLD = "2026-05-01T11:00:00Z"


def notebook(status: dict[str, Any], annotations: dict[str, str] | None = None, created: str = OLD) -> dict[str, Any]:
    return {"metadata": {"name": "lab", "namespace": "team-a", "creationTimestamp": created,
                         "annotations": annotations or {}},
            "spec": {"template": {"spec": {"containers": [{"name": "lab", "image": "ghcr.io/x/jupyter:v1",
                                                           "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                                                           "volumeMounts": [{"name": "w", "mountPath": "/home"}]}]}}},
            "status": status}


PENDING = {"waiting": {"reason": "Pending", "message": "needs 1 GPU, 0 free (held by notebook team-a/first)"}}


@pytest.mark.parametrize("shown,phase,words", [
    (notebook({}, created="2026-05-01T11:59:55Z"), "waiting", "Waiting for the notebook's server"),
    (notebook({"readyReplicas": 0, "containerState": {}}, {"kubeflow-resource-stopped": OLD}), "stopped", "No Pods"),
    (notebook({"readyReplicas": 1, "containerState": {"running": {}}}, {"kubeflow-resource-stopped": OLD}),
     "waiting", "stopping"),
    (notebook({"readyReplicas": 1, "containerState": {"running": {"startedAt": OLD}}}), "running", "Running"),
    (notebook({"readyReplicas": 0, "containerState": {"running": {"startedAt": OLD}}}), "waiting", "Starting"),
    (notebook({"readyReplicas": 0, "containerState": PENDING}), "waiting", "Pending: needs 1 GPU, 0 free"),
    (notebook({"readyReplicas": 0, "containerState": {"waiting": {"reason": "CrashLoopBackOff",
                                                                  "message": "back-off 8s"}}}),
     "error", "CrashLoopBackOff: back-off 8s"),
    (notebook({"readyReplicas": 0, "containerState": {"waiting": {"reason": "SupervisorGone"}}}), "error",
     "SupervisorGone"),
    (notebook({"readyReplicas": 0, "containerState": {"terminated": {"exitCode": 1, "reason": "Error"}}}), "error",
     "Error"),
])
def test_status_follows_the_jwas_order(shown: dict[str, Any], phase: str, words: str) -> None:
    status = status_of(shown, NOW)
    assert status["phase"] == phase and words in status["message"], status


def test_gpus_whole_or_shared() -> None:
    assert gpus_of({}) == {"count": 0, "message": "", "shared": False}
    assert gpus_of({"nvidia.com/gpu": "2"}) == {"count": 2, "message": "2 NVIDIA", "shared": False}
    assert gpus_of({"aliyun.com/gpu-mem": "4", "aliyun.com/gpu-core.percentage": "30"}) == {
        "count": 0, "message": "4 GiB of one GPU, 30% of its compute", "shared": True}


def test_a_row_falls_back_to_the_limits_and_names_connects_address() -> None:
    row = notebook_row(notebook({"readyReplicas": 1, "containerState": {"running": {}}},
                                {"notebooks.kubeflow.org/last-activity": OLD}))
    assert (row["cpu"], row["memory"], row["shortImage"]) == ("1", "2Gi", "jupyter:v1")
    assert row["last_activity"] == OLD and row["volumes"] == ["w"]
    assert row["url"] == "/notebook/team-a/lab/lab" and not row["stopped"]
