"""Pipeline tasks as Kueue workloads, from the user's side: ``millpond run --queue Q --priority NAME`` and
``POST /runs`` with ``queue_name``/``priority_class_name`` put Kueue's labels on every container task
(a task's own ``kueue.x-k8s.io/queue-name`` pod label wins), with the submitter beside them (the OS
user, or the API caller's ``kubeflow-userid``); the run's experiment is the project; an unknown
priority class is refused at once, in one line, with nothing stored."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import getpass
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from millpond.pipelines.loader import load_pipeline
from millpond.pipelines.platform import PodInfo, prepare_platform
from millpond.pipelines.queueing import USER_ANNOTATION, task_queueing, task_workload
from millpond.pipelines.resources import task_request
from millpond.pipelines.submit import RunRequest, prepare_run
from millpond.scheduling.queues.model import CPU, PRIORITY_LABEL, QUEUE_LABEL, WorkloadKind
from millpond.settings import load_settings
from millpond.store.journal import open_journal
from millpond.store.resources import ResourceStore
from millpond.store.runs import RunStore
from millpond.store.secrets import ConfigStore
from tests.server_support import serving

PIPELINES = Path(__file__).parent / "pipelines" / "queued.py"

pytestmark = pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value}


def executor_metadata(platform: dict[str, Any] | None) -> dict[str, Any]:
    executors = (platform or {})["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    return {label: config.get("podMetadata", {}) for label, config in executors.items()}


def queueing_of(run: Any, label: str) -> Any:
    """What the engine reads for a task: its pod metadata, built as for its launch."""
    from millpond.pipelines import ir

    built = prepare_platform(ir.kubernetes_config(run.platform_spec, label), resolve=lambda _b: None,
                             configs=ConfigStore(load_settings().home), volumes_dir=Path("/nonexistent"),
                             scratch_dir=Path("/nonexistent"), pod=PodInfo(name="pod"))
    return task_queueing(built.labels, built.annotations)


def test_run_queue_and_priority_go_on_every_task_a_tasks_own_queue_wins(home: Path) -> None:
    ResourceStore().apply([priority_class("high", 1000)])
    settings = load_settings()
    store = open_journal(settings.database_url)
    request = RunRequest(pipeline=load_pipeline(PIPELINES, "own-queue"), texts={"folder": "/tmp/x"}, values={},
                         experiment="Team-A", queue="team-q", priority="high")
    run = prepare_run(store, settings, request)
    metadata = executor_metadata(store.get_run(run.id).platform_spec)
    queues = sorted(m["labels"][QUEUE_LABEL] for m in metadata.values())
    assert queues == ["its-own", "team-q"]  # the task that names its queue keeps it
    assert {m["labels"][PRIORITY_LABEL] for m in metadata.values()} == {"high"}
    assert {m["annotations"][USER_ANNOTATION] for m in metadata.values()} == {getpass.getuser()}
    label = next(label for label, m in metadata.items() if m["labels"][QUEUE_LABEL] == "team-q")
    queueing = queueing_of(store.get_run(run.id), label)
    assert (queueing.queue, queueing.priority_class, queueing.user) == ("team-q", "high", getpass.getuser())
    container = run.pipeline_spec["deploymentSpec"]["executors"][label]["container"]
    workload = task_workload("task-1", "own-queue/held", "team-a", task_request(container), queueing, 0.0)
    assert workload.kind is WorkloadKind.TASK and workload.priority == 1000 and workload.namespace == "team-a"
    assert dict(workload.requests) == {CPU: 500}


def test_a_run_without_a_queue_keeps_its_platform_spec(home: Path) -> None:
    settings = load_settings()
    store = open_journal(settings.database_url)
    loaded = load_pipeline(PIPELINES, "queued-pair")
    run = prepare_run(store, settings, RunRequest(pipeline=loaded, texts={"folder": "/tmp/x"}, values={}))
    assert store.get_run(run.id).platform_spec == loaded.platform_spec


@pytest.mark.parametrize(("args", "message"), [
    (("--priority", "nosuch"), "error: --priority nosuch: no WorkloadPriorityClass nosuch "
                               "(millpond get workloadpriorityclasses; apply one with millpond apply -f)"),
    (("--queue", "q", "--experiment", "my experiment"),
     "error: the experiment 'my experiment' names a queued run's project, a Kueue namespace: use an experiment "
     "named with letters, digits and '-' (--experiment)"),
])
def test_bad_queueing_options_refuse_the_run_in_one_line(cli, args, message) -> None:
    result = cli("run", PIPELINES, "--pipeline", "queued-pair", "-p", "folder=/tmp/x", *args)
    assert result.code == 2 and result.err.strip() == message
    assert RunStore(load_settings().database_url).list_runs() == []


def _post(url: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_the_api_takes_queue_and_priority_class_and_records_the_caller(home: Path) -> None:
    ResourceStore().apply([priority_class("low", 1)])
    loaded = load_pipeline(PIPELINES, "queued-pair")
    body = {"display_name": "queued", "pipeline_spec": loaded.spec,
            "runtime_config": {"parameters": {"folder": str(home / "gates")}}}
    for server in serving():
        bad = _post(f"{server.url}/apis/v2beta1/runs", {**body, "priority_class_name": "nosuch"}, {})
        assert bad[0] == 400 and "no WorkloadPriorityClass nosuch" in bad[1]["message"]
        status, view = _post(f"{server.url}/apis/v2beta1/runs",
                             {**body, "queue_name": "team-q", "priority_class_name": "low"},
                             {"kubeflow-userid": "accounts.google.com:alice@example.com"})
        assert status == 200, view
        (home / "gates").mkdir(exist_ok=True)
        (home / "gates" / "gate").touch()  # let its tasks end
        metadata = executor_metadata(view["platform_spec"])
        assert {m["labels"][QUEUE_LABEL] for m in metadata.values()} == {"team-q"}
        assert {m["annotations"][USER_ANNOTATION] for m in metadata.values()} == {"alice@example.com"}
        anonymous = _post(f"{server.url}/apis/v2beta1/runs", {**body, "queue_name": "team-q"}, {})[1]
        assert {m["annotations"][USER_ANNOTATION] for m in executor_metadata(anonymous["platform_spec"]).values()
                } == {"anonymous"}
