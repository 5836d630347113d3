"""The task policies (``pipelines.policies``): their order, and each one's narrow call on real IR.

Each test compiles a pipeline with kfp (as ``tests/ir_support`` does), builds the task as the
engine's walk does (a scope of the root DAG, the task's node, its component and executor views),
and calls one policy's ``prepare`` with a real journal, settings and ledger under the test's home.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import ast
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest
from kfp import dsl

from millpond.pipelines.graph import Node, Outputs, Scope
from millpond.pipelines.platform import CREATE_PVC_IMAGE
from millpond.pipelines.policies import (
    builtins,
    cache,
    capacity,
    deadline,
    executor_kind,
    importing,
    order,
    placement,
    platform,
    pod_metadata,
    queueing,
    request,
    resources,
    retry,
    reuse,
    task_row,
)
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Done, Fail, Proceed, Submit
from millpond.pipelines.resources import Budget, ResourceRequest
from millpond.pipelines.run_deadline import RunDeadline
from millpond.pipelines.task_queues import EngineQueues
from millpond.pipelines.task_records import Silent, TaskRecords
from millpond.pipelines.views import PipelineSpec, TaskInputs
from millpond.pipelines.workflow_limits import WorkflowLimits
from millpond.scheduling import Grant
from millpond.scheduling.queues.model import QUEUE_LABEL
from millpond.settings import load_settings
from millpond.store.journal import RunJournal, open_journal
from millpond.store.keys import new_id
from millpond.store.secrets import ConfigStore
from tests.ir_support import compiled

_WRITE = 'mkdir -p "$(dirname "$1")" && printf "%s" "$0" > "$1"'


@dsl.container_component
def echo(text: str, out: dsl.OutputPath(str)):
    return dsl.ContainerSpec(image="alpine:3", command=["sh", "-c", _WRITE], args=[text, out])


@dsl.pipeline(name="policies")
def one_task(text: str = "x"):
    echo(text=text).set_caching_options(True)


@dsl.pipeline(name="imports")
def one_import():
    dsl.importer(artifact_uri="file:///tmp/some-file", artifact_class=dsl.Artifact)


@dataclass
class Task:
    """A task of a compiled pipeline, ready for the policies, and the run around it."""

    launch: TaskLaunch
    run: RunContext
    journal: RunJournal


def _task(
    home: Path, tmp_path: Path, spec: dict[str, Any], platform_spec: dict[str, Any] | None = None,
    experiment: str = "Default", **context: Any,
) -> Task:
    settings = load_settings()
    journal = open_journal(settings.database_url)
    run = journal.create_run(
        name="policies-run", experiment=experiment, pipeline_name=spec["pipelineInfo"]["name"], pipeline_spec=spec,
        platform_spec=platform_spec, parameters={}, pipeline_root=str(tmp_path / "root"),
    )
    scope = Scope("", spec["root"], {"text": "hello"}, {}, None)
    scope.add_tasks(spec["root"]["dag"]["tasks"])
    node: Node = next(iter(scope.nodes.values()))
    node.record_id = new_id()
    component = PipelineSpec(spec).component(node.component_name)
    executor = PipelineSpec(spec).executor(component.executor_label)
    records = TaskRecords(journal, Silent(), run.id, advance=lambda scope: None)
    cancel = threading.Event()
    defaults: dict[str, Any] = {
        "run": run, "settings": settings, "store": journal, "configs": ConfigStore(settings.home),
        "budget": Budget(settings), "queues": EngineQueues(settings, cancel, lambda *shown: None),
        "rows": records, "limits": WorkflowLimits(), "deadline": RunDeadline(),
        "job": {"pipeline_job_name": run.name, "pipeline_job_resource_name": f"policies-{run.id[:8]}",
                "pipeline_job_uuid": run.id, "pipeline_root": run.pipeline_root},
    }
    launch = TaskLaunch(node, component, executor, TaskInputs({"text": "hello"}, {}))
    return Task(launch, RunContext(**{**defaults, **context}), journal)


@pytest.fixture
def spec(tmp_path: Path) -> dict[str, Any]:
    return compiled(one_task, tmp_path)


def _executor_config(spec: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """A platform spec giving the task's executor ``config`` (kfp-kubernetes' KubernetesExecutorConfig)."""
    label = next(iter(spec["deploymentSpec"]["executors"]))
    return {"platforms": {"kubernetes": {"deploymentSpec": {"executors": {label: config}}}}}


def _through(task: Task, last: object) -> None:
    """Apply the policies in their order up to and including ``last``, each of them proceeding."""
    for policy in order.TASK_POLICIES:
        assert policy.prepare(task.launch, task.run) == PROCEED, policy
        if policy is last:
            return
    raise AssertionError(f"{last} is not in the order")


# --- the order --------------------------------------------------------------------------------------------


def test_the_order_is_written_once_and_its_docstring_says_why_for_each_policy() -> None:
    modules = [cast(ModuleType, policy) for policy in order.TASK_POLICIES]  # each policy is a module
    names = [module.__name__.rsplit(".", 1)[-1] for module in modules]
    assert names == [
        "reuse", "importing", "executor_kind", "task_row", "builtins", "resources", "retry", "capacity", "cache",
        "request", "platform", "image", "deadline", "pod_metadata", "queueing", "placement",
    ]
    assert order.__doc__ is not None
    for name in names:
        assert f"``{name}``" in order.__doc__, name


def test_every_policy_module_has_one_public_call_prepare() -> None:
    for policy in order.TASK_POLICIES:
        source = Path(cast(ModuleType, policy).__file__ or "").read_text()
        public = [node.name for node in ast.parse(source).body
                  if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]
        assert public[0] == "prepare", policy
        assert policy.__doc__, policy


def test_the_first_verdict_that_is_not_proceed_ends_the_list(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    task = _task(home, tmp_path, spec)
    called: list[str] = []

    @dataclass
    class Policy:
        name: str
        verdict: Any

        def prepare(self, launch: TaskLaunch, run: RunContext) -> Any:
            called.append(self.name)
            return self.verdict

    policies = (Policy("a", PROCEED), Policy("b", Fail("no")), Policy("c", PROCEED))
    assert order.prepare(task.launch, task.run, policies) == Fail("no")
    assert called == ["a", "b"]
    assert isinstance(order.prepare(task.launch, task.run, (Policy("a", PROCEED),)), Proceed)


def test_a_plain_task_goes_through_every_policy_to_a_request(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    task = _task(home, tmp_path, spec)
    assert order.prepare(task.launch, task.run) == PROCEED
    built = task.launch.the_request()
    assert built.parameters == {"text": "hello"} and built.container["image"] == "alpine:3"
    assert built.log_path == task.launch.log_path and built.log_path.parent.is_dir()
    row = task.journal.list_tasks(task.run.run.id)[0]
    assert (row.state, row.kind, row.image) == ("PENDING", "container", "alpine:3")


# --- each policy's narrow call ----------------------------------------------------------------------------


def test_reuse_ends_a_resumed_task_that_succeeded_with_its_outputs(
    home: Path, tmp_path: Path, spec: dict[str, Any]
) -> None:
    task = _task(home, tmp_path, spec)
    assert reuse.prepare(task.launch, task.run) == PROCEED

    @dataclass
    class Previous:
        id: str
        outputs: dict[str, Any]

    previous = {task.launch.node.path: Previous("earlier", {"parameters": {"out": "made"}, "artifacts": {}})}
    resumed = _task(home, tmp_path, spec, previous=previous)
    assert reuse.prepare(resumed.launch, resumed.run) == Done(
        Outputs(parameters={"out": "made"}), how="reused", reused_id="earlier"
    )


def test_importing_records_an_importer_pending_and_submits_its_copy(home: Path, tmp_path: Path) -> None:
    task = _task(home, tmp_path, compiled(one_import, tmp_path))
    verdict = importing.prepare(task.launch, task.run)
    assert isinstance(verdict, Submit)
    assert task.launch.recorded
    row = task.journal.list_tasks(task.run.run.id)[0]
    assert (row.state, row.kind) == ("PENDING", "importer")
    outcome = verdict.work(Grant(id="", gpus=()))  # an importer's work holds no resources
    assert outcome.succeeded, outcome.error
    assert outcome.artifacts["artifact"][0]["uri"] == "file:///tmp/some-file"


def test_importing_lets_a_container_task_through(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    task = _task(home, tmp_path, spec)
    assert importing.prepare(task.launch, task.run) == PROCEED
    assert not task.launch.recorded


def test_executor_kind_refuses_what_is_not_a_container(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    label = next(iter(spec["deploymentSpec"]["executors"]))
    assert executor_kind.prepare(_task(home, tmp_path, spec).launch, _task(home, tmp_path, spec).run) == PROCEED
    spec["deploymentSpec"]["executors"][label] = {"resolver": {}}
    task = _task(home, tmp_path, spec)
    assert executor_kind.prepare(task.launch, task.run) == Fail("executor kind 'resolver' is not supported")


def test_task_row_makes_the_log_and_records_the_row_pending(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    task = _task(home, tmp_path, spec)
    assert task_row.prepare(task.launch, task.run) == PROCEED
    log_path = task.launch.the_log_path()
    assert log_path.parent.is_dir() and task.launch.recorded
    row = task.journal.list_tasks(task.run.run.id)[0]
    assert row.state == "PENDING" and row.log_path == str(log_path)


def test_builtins_run_create_pvc_here(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    task = _task(home, tmp_path, spec)
    assert builtins.prepare(task.launch, task.run) == PROCEED
    label = next(iter(spec["deploymentSpec"]["executors"]))
    spec["deploymentSpec"]["executors"][label]["container"]["image"] = CREATE_PVC_IMAGE
    task = _task(home, tmp_path, spec)
    task.launch.inputs.parameters["pvc_name"] = "scratch"
    assert builtins.prepare(task.launch, task.run) == Done(Outputs(parameters={"name": "scratch"}), how="ran")
    assert (task.run.settings.volumes_dir / "default" / "scratch").is_dir()


def test_resources_read_the_request_and_fail_an_invalid_one(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    container = next(iter(spec["deploymentSpec"]["executors"].values()))["container"]
    container["resources"] = {"resourceCpuLimit": "500m", "resourceMemoryLimit": "1G"}
    task = _task(home, tmp_path, spec)
    assert resources.prepare(task.launch, task.run) == PROCEED
    assert task.launch.resources.cpu == 0.5 and task.launch.resources.memory == 10**9
    ignored = _task(home, tmp_path, spec, ignore_resources=True)
    assert resources.prepare(ignored.launch, ignored.run) == PROCEED
    assert ignored.launch.resources == ResourceRequest()
    container["resources"] = {"resourceCpuLimit": "lots"}
    task = _task(home, tmp_path, spec)
    verdict = resources.prepare(task.launch, task.run)
    assert isinstance(verdict, Fail) and verdict.error.startswith("invalid resources: ")


def test_retry_reads_the_policy_and_fails_a_bad_duration(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    task = _task(home, tmp_path, spec)
    task.launch.node.spec["retryPolicy"] = {"maxRetryCount": 2, "backoffDuration": "3s"}
    assert retry.prepare(task.launch, task.run) == PROCEED
    assert (task.launch.retry.max_retries, task.launch.retry.backoff_s) == (2, 3.0)
    task.launch.node.spec["retryPolicy"] = {"maxRetryCount": 2, "backoffDuration": "1m30s"}
    verdict = retry.prepare(task.launch, task.run)
    assert isinstance(verdict, Fail) and "backoffDuration" in verdict.error


def test_capacity_fails_a_request_no_machine_grants(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    task = _task(home, tmp_path, spec)
    assert capacity.prepare(task.launch, task.run) == PROCEED
    task.launch.resources = ResourceRequest(cpu=10_000.0)
    verdict = capacity.prepare(task.launch, task.run)
    assert isinstance(verdict, Fail) and "CPU" in verdict.error


def test_cache_keys_the_task_and_answers_a_hit_from_the_journal(
    home: Path, tmp_path: Path, spec: dict[str, Any]
) -> None:
    task = _task(home, tmp_path, spec)
    _through(task, capacity)
    assert cache.prepare(task.launch, task.run) == PROCEED
    key = task.launch.node.cache_key
    assert key
    made = Outputs(parameters={"out": "made"})
    task.journal.finish_task(task.launch.node.record_id or "", state="SUCCEEDED", outputs=made.to_json(),
                             run_id=task.run.run.id, cache_entry=(key, made.to_json()))
    again = _task(home, tmp_path, spec)
    _through(again, capacity)
    assert cache.prepare(again.launch, again.run) == Done(made, how="cached")
    assert "cache hit" in again.launch.the_log_path().read_text()
    off = _task(home, tmp_path, spec, use_cache=False)
    _through(off, capacity)
    assert cache.prepare(off.launch, off.run) == PROCEED and off.launch.node.cache_key == key


def test_request_builds_the_launchers_request(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    task = _task(home, tmp_path, spec)
    _through(task, cache)
    assert request.prepare(task.launch, task.run) == PROCEED
    built = task.launch.the_request()
    assert (built.run_id, built.task_path, built.task_id) == (
        task.run.run.id, task.launch.node.path, task.launch.node.record_id
    )
    assert built.component_spec is task.launch.component.raw and built.extra_binds == []


def test_platform_adds_its_environment_and_time_limit(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    config = {"fieldPathAsEnv": [{"name": "POD", "fieldPath": "metadata.name"}], "activeDeadlineSeconds": "30"}
    task = _task(home, tmp_path, spec, platform_spec=_executor_config(spec, config))
    _through(task, request)
    assert platform.prepare(task.launch, task.run) == PROCEED
    built = task.launch.the_request()
    assert built.extra_env["POD"].startswith(f"policies-{task.run.run.id[:8]}-")
    assert built.timeout_s == 30
    task.launch.release()


def test_platform_fails_a_task_whose_secret_is_missing(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    config = {"secretAsEnv": [{"secretName": "absent", "keyToEnv": [{"secretKey": "k", "envVar": "K"}]}]}
    task = _task(home, tmp_path, spec, platform_spec=_executor_config(spec, config))
    _through(task, request)
    verdict = platform.prepare(task.launch, task.run)
    assert isinstance(verdict, Fail) and "absent" in verdict.error


def test_deadline_cuts_the_time_limit_and_fails_a_task_after_it(
    home: Path, tmp_path: Path, spec: dict[str, Any]
) -> None:
    task = _task(home, tmp_path, spec, deadline=RunDeadline(100))
    _through(task, platform)
    assert deadline.prepare(task.launch, task.run) == PROCEED
    assert 0 < (task.launch.the_request().timeout_s or 0) <= 100
    assert task.launch.node.path in task.run.deadline.cut
    passed = RunDeadline(1)
    passed.ends = time.monotonic() - 1
    late = _task(home, tmp_path, spec, deadline=passed)
    _through(late, platform)
    assert deadline.prepare(late.launch, late.run) == Fail(
        "the workflow's activeDeadlineSeconds (1s) passed before it started"
    )
    late.launch.node.spec["triggerPolicy"] = {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}  # an exit task
    assert deadline.prepare(late.launch, late.run) == PROCEED


def test_pod_metadata_goes_on_the_row(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    config = {"podMetadata": {"labels": {"team": "a"}, "annotations": {"note": "b"}}}
    task = _task(home, tmp_path, spec, platform_spec=_executor_config(spec, config))
    _through(task, deadline)
    assert pod_metadata.prepare(task.launch, task.run) == PROCEED
    row = task.journal.list_tasks(task.run.run.id)[0]
    assert row.pod_metadata == {"labels": {"team": "a"}, "annotations": {"note": "b"}}


def test_queueing_fails_a_queued_task_whose_experiment_is_no_namespace(
    home: Path, tmp_path: Path, spec: dict[str, Any]
) -> None:
    plain = _task(home, tmp_path, spec)
    _through(plain, pod_metadata)
    assert queueing.prepare(plain.launch, plain.run) == PROCEED and not plain.run.queues.tasks
    config = {"podMetadata": {"labels": {QUEUE_LABEL: "team-queue"}}}
    task = _task(home, tmp_path, spec, platform_spec=_executor_config(spec, config), experiment="Not A Namespace")
    _through(task, pod_metadata)
    verdict = queueing.prepare(task.launch, task.run)
    assert isinstance(verdict, Fail) and "Kueue namespace" in verdict.error
    task.launch.release()


def test_placement_gives_the_runner_the_tasks_demand(home: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
    container = next(iter(spec["deploymentSpec"]["executors"].values()))["container"]
    container["resources"] = {"resourceCpuLimit": "2"}
    task = _task(home, tmp_path, spec)
    _through(task, queueing)
    assert placement.prepare(task.launch, task.run) == PROCEED
    assert task.launch.the_request().demand.cpus == 2
