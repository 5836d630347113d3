"""Pipeline tasks as Kueue workloads, from the user's side: ``millpond run --queue Q --priority NAME`` and
``POST /runs`` with ``queue_name``/``priority_class_name`` put Kueue's labels on every container task
(a task's own ``kueue.x-k8s.io/queue-name`` pod label wins), with the submitter beside them (the OS
user, or the API caller's ``kubeflow-userid``); the run's experiment is the project; an unknown
priority class is refused at once, in one line, with nothing stored."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import getpass
import json
import subprocess
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
from millpond.store.runs import RunStore
from millpond.store.secrets import ConfigStore
from tests.conftest import MILLPOND_BIN
from tests.queues_support import apply_objects, priority_class, queues, until
from tests.server_support import serving
from tests.training_support import arena, wait_status

PIPELINES = Path(__file__).parents[1] / "pipelines" / "queued.py"

pytestmark = pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL


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
    apply_objects(priority_class("high", 1000))
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
    apply_objects(priority_class("low", 1))
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


# --- admission ----------------------------------------------------------------------------------------
def run_in_background(home: Path, *args: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([str(MILLPOND_BIN), "run", PIPELINES, *map(str, args), "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def runs_get(cli: Any) -> dict[str, Any]:
    (run, _experiment), = RunStore(load_settings().database_url).list_runs()
    result = cli("runs", "get", run.id, "-o", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_a_runs_tasks_wait_for_their_queues_quota_saying_why(cli, home: Path, tmp_path: Path) -> None:
    apply_objects(*queues(("one-cpu", 0, {}), cpu="1"))
    engine = run_in_background(home, "--pipeline", "queued-pair", "-p", f"folder={tmp_path}", "--queue", "one-cpu")
    until(lambda: list(tmp_path.glob("*.started")), 60, "a task to start")
    pending = until(lambda: [t for t in runs_get(cli)["tasks"]
                             if t["state"] == "PENDING" and "cpu" in (t.get("error") or "")], 30, "the reason")
    (task,) = pending
    assert task["error"].startswith("Pending: ") and "cpu" in task["error"], task
    assert "waiting for its queue: Pending: " in Path(task["log"]).read_text()
    assert len(list(tmp_path.glob("*.started"))) == 1  # the quota holds one task back (the machine has room)
    (tmp_path / "gate").touch()
    assert engine.wait(60) == 0, engine.stderr.read() if engine.stderr else ""
    assert sorted(p.name for p in tmp_path.glob("*.started")) == ["a.started", "b.started"]
    assert {t["state"] for t in runs_get(cli)["tasks"]} == {"SUCCEEDED"}


def test_an_evicted_task_is_stopped_and_runs_again_when_readmitted_uncounted_by_its_retries(
        cli, capsys, home: Path, tmp_path: Path) -> None:
    """A higher-priority training job in the same queue preempts a run's task: the task's process stops, it waits
    PENDING, and runs again once the job is done; its retry policy (none) is not spent on the eviction."""
    apply_objects(priority_class("low", 1), priority_class("high", 100),
                  *queues(("shared", 0, {"preemption": {"withinClusterQueue": "LowerPriority"}}), cpu="1"))
    engine = run_in_background(home, "--pipeline", "one-held", "-p", f"folder={tmp_path}", "--queue", "shared",
                               "--priority", "low")
    until(lambda: (tmp_path / "a.started").exists(), 60, "the task to start")
    assert arena(capsys, "submit", "pytorch", "--name", "urgent", "--queue", "shared", "-p", "high", "--cpu", "1",
                 "sleep 1").code == 0
    evicted = until(lambda: [t for t in runs_get(cli)["tasks"] if "Evicted" in (t.get("error") or "")], 60)
    assert evicted[0]["state"] == "PENDING" and "Evicted (Preempted): Preempted to accommodate" in evicted[0]["error"]
    assert wait_status(capsys, "urgent")["status"] == "SUCCEEDED"
    until(lambda: (tmp_path / "a.starts").read_text().count("start") == 2, 60, "the task's second start")
    (tmp_path / "gate").touch()
    assert engine.wait(60) == 0, engine.stderr.read() if engine.stderr else ""
    (task,) = runs_get(cli)["tasks"]
    (record,) = open_journal(load_settings().database_url).list_tasks(runs_get(cli)["run_id"])
    assert task["state"] == "SUCCEEDED" and record.attempts == 1
    assert "[millpond] Evicted (Preempted)" in Path(task["log"]).read_text()
