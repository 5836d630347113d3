"""The KFP conformance protocol (the one KFP's backend end-to-end tests use), applied to a folder.

Every file gets protocol values for its required root parameters, runs in one isolated
MILLPOND_HOME that holds the protocol's secrets, and is judged by the folder it sits in:
``essential``, ``critical`` and ``parallel_and_nested`` must succeed; ``failing`` must fail
with its exit handlers run; ``local_execution`` has its own rules; ``gpu-scheduling`` must
fail before any task starts when no GPU is here; ``integration`` must fail with the task's
own error in its log.

With ``twice``, every case runs a second time on the same home, with the same protocol values
(fresh ``marker_path`` / ``counter_path`` files, as the protocol asks of every run). The second run
must end in the first run's state and pass the same checks, and every container task with caching
on that succeeded in the first run and gets the same resolved inputs must be a cache hit.
"""

from __future__ import annotations

import os
import random
import string
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from millpond.errors import UserError
from millpond.pipelines.builtin_images import CREATE_PVC_IMAGE, DELETE_PVC_IMAGE
from millpond.pipelines.engine import Engine, RunResult
from millpond.pipelines.loader import LoadedPipeline, load_pipeline
from millpond.pipelines.submit import RunRequest, prepare_run
from millpond.pipelines.views import PipelineSpec, TaskSpec
from millpond.settings import load_settings
from millpond.store.journal import TaskRecord, open_journal
from millpond.store.secrets import ConfigStore

PROTOCOL_SECRETS = {
    "test-secret-1": {"username": "user1"},
    "test-secret-2": {"password": "psw1"},
    "test-secret-3": {"password": "psw2"},
}
SKIPPED_NAMES = ("_GH-", "pipeline_with_submit_request")
MUST_SUCCEED = ("essential", "critical", "parallel_and_nested", "local_execution")
# critical/ pipelines that need the outside world: they must fail naming what they could not reach.
UNREACHABLE = {
    "pipeline_with_artifact_upload_download": ("huggingface", "hf://", "Hugging Face"),
    "modelcar": ("oci://",),
}
IGNORE_UPSTREAM = "local_execution_pipeline_with_ignore_upstream_failure"
RETRY = "local_execution_pipeline_with_retry"
FILE_PARAMETERS = ("marker_path", "counter_path")


@dataclass
class Verdict:
    file: Path
    expected: str
    got: str
    seconds: float
    ok: bool
    reason: str = ""
    skipped: bool = False
    second: str = ""  # with ``twice``: the second run's state
    cached: int = 0  # with ``twice``: how many of the second run's tasks were cache hits


@dataclass
class Attempt:
    """One run of a case: how it ended, its tasks, and the protocol values it was given."""

    result: RunResult
    tasks: list[TaskRecord]
    values: dict[str, Any]


def protocol_value(parameter_type: str, rng: random.Random) -> Any:
    """The protocol's value for a required root parameter of this type."""
    if parameter_type == "NUMBER_INTEGER":
        return rng.randrange(1000)
    if parameter_type == "NUMBER_DOUBLE":
        return rng.random()
    if parameter_type == "STRUCT":
        return {"A": str(rng.random()), "B": str(rng.random())}
    if parameter_type == "LIST":
        return [_random_string(rng)]
    if parameter_type == "BOOLEAN":
        return True
    return _random_string(rng)


def _random_string(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(20))


def fresh_files(values: dict[str, Any], scratch: Path, rng: random.Random) -> dict[str, Any]:
    """The same protocol values, with new temporary files for the parameters that name one."""
    return {
        name: str(scratch / f"{name}-{_random_string(rng)}") if name in FILE_PARAMETERS else value
        for name, value in values.items()
    }


def protocol_arguments(spec: dict[str, Any], scratch: Path, rng: random.Random) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, definition in PipelineSpec(spec).root.input_parameters.items():
        if name in FILE_PARAMETERS:
            values[name] = str(scratch / f"{name}-{_random_string(rng)}")
        elif not definition.has_default and not definition.is_optional:
            values[name] = protocol_value(definition.type, rng)
    return values


def expectation(file: Path) -> str:
    group = file.parent.name
    must_fail = group in ("failing", "gpu-scheduling", "integration")
    if file.stem in UNREACHABLE or must_fail or file.stem == IGNORE_UPSTREAM:
        return "FAILED"
    return "SUCCEEDED"


class ConformanceRunner:
    """Runs every pipeline file of a folder under the protocol and judges each."""

    def __init__(self, timeout_s: float = 600.0, seed: int | None = None, twice: bool = False) -> None:
        self.timeout_s = timeout_s
        self.rng = random.Random(seed)
        self.twice = twice

    def files(self, folder: Path) -> list[Path]:
        if not folder.is_dir():
            raise UserError(f"{folder}: not a folder")
        found = sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        if not found:
            raise UserError(f"{folder}: no pipeline files (.yaml) in it")
        return found

    def run_all(self, folder: Path, report: Callable[[Verdict], None]) -> list[Verdict]:
        with tempfile.TemporaryDirectory(prefix="millpond-conformance-") as tmp:
            home = Path(tmp) / "home"
            saved = os.environ.get("MILLPOND_HOME")
            os.environ["MILLPOND_HOME"] = str(home)
            try:
                self._create_secrets()
                verdicts = []
                for file in self.files(folder):
                    verdict = self.run_one(file, Path(tmp))
                    report(verdict)
                    verdicts.append(verdict)
                return verdicts
            finally:
                if saved is None:
                    os.environ.pop("MILLPOND_HOME", None)
                else:
                    os.environ["MILLPOND_HOME"] = saved

    def _create_secrets(self) -> None:
        configs = ConfigStore(load_settings().home)
        for name, data in PROTOCOL_SECRETS.items():
            configs.create("secret", name, data, replace=True)

    def run_one(self, file: Path, scratch: Path) -> Verdict:
        expected = expectation(file)
        if any(marker in file.name for marker in SKIPPED_NAMES):
            return Verdict(file, expected, "-", 0.0, ok=True, reason="skipped by the protocol", skipped=True)
        started = time.monotonic()
        verdict = Verdict(file, expected, "INVALID", 0.0, ok=False)
        try:
            self._judge(file, scratch, verdict)
        except UserError as exc:
            verdict.reason, verdict.ok = str(exc), False
        verdict.seconds = time.monotonic() - started
        return verdict

    def _judge(self, file: Path, scratch: Path, verdict: Verdict) -> None:
        """Fill in ``verdict``: the first run's state and whether it meets the protocol, then the second's."""
        loaded = load_pipeline(file)
        first = self._attempt(file, loaded, protocol_arguments(loaded.spec, scratch, self.rng))
        verdict.got = first.result.state
        problem = self._problem(file, loaded.spec, first, verdict.expected)
        verdict.ok, verdict.reason = not problem, problem or first.result.error or ""
        if problem or not self.twice:
            return
        second = self._attempt(file, loaded, fresh_files(first.values, scratch, self.rng))
        verdict.second = second.result.state
        verdict.cached = sum(1 for t in second.tasks if t.cached)
        problem = self._problem(file, loaded.spec, second, verdict.expected)
        missed = missed_hits(loaded.spec, first.tasks, second.tasks)
        if not problem and missed:
            problem = f"task {missed[0]!r} was not a cache hit, though its first run succeeded with the same inputs"
        if problem:
            verdict.ok, verdict.reason = False, f"second run ({second.result.state}): {problem}"

    def _attempt(self, file: Path, loaded: LoadedPipeline, values: dict[str, Any]) -> Attempt:
        """Run ``loaded`` once with ``values`` in the current home, cancelled after the timeout."""
        settings = load_settings()
        store = open_journal(settings.database_url)
        request = RunRequest(pipeline=loaded, texts={}, values=values, experiment="conformance")
        run = prepare_run(store, settings, request)
        # local_execution/ is defined by kfp.local, which ignores resource requests ("k8s-only methods").
        engine = Engine(store, settings, ignore_resources=file.parent.name == "local_execution")
        timer = threading.Timer(self.timeout_s, engine.cancel.set)
        timer.start()
        try:
            result = engine.execute(run)
        finally:
            timer.cancel()
        return Attempt(result, store.list_tasks(run.id), values)

    def _problem(self, file: Path, spec: dict[str, Any], attempt: Attempt, expected: str) -> str:
        """Why ``attempt`` does not meet the protocol; '' when it does."""
        error = attempt.result.error or ""
        if attempt.result.state != expected:
            return error or "succeeded where it must fail"
        return self._extra_checks(file, spec, attempt.result, attempt.tasks, attempt.values, error)

    def _extra_checks(
        self, file: Path, spec: dict[str, Any], result: RunResult, tasks: list[TaskRecord], values: dict[str, Any],
        error: str,
    ) -> str:
        """What the protocol demands beyond the final state; '' when all hold."""
        group, stem = file.parent.name, file.stem
        if stem in UNREACHABLE and not any(word.lower() in error.lower() for word in UNREACHABLE[stem]):
            return f"the error does not name the unreachable source: {error}"
        if group == "failing" or stem == IGNORE_UPSTREAM:
            handlers = [t for t in tasks if t.state == "SKIPPED" and _runs_after_failures(spec, t.path)]
            if handlers:
                return f"exit handler {handlers[0].path} did not run"
        if stem == IGNORE_UPSTREAM:
            marker = Path(values["marker_path"])
            if not marker.exists() or "cleanup_ran" not in marker.read_text():
                return "the cleanup task did not write cleanup_ran to marker_path"
        if stem == RETRY and result.outputs.parameters.get("Output") != "attempt=2":
            return f"final output is {result.outputs.parameters.get('Output')!r}, want 'attempt=2'"
        if group == "gpu-scheduling":
            if any(t.started_at and t.kind == "container" and t.state != "SKIPPED" for t in tasks):
                return "a task started although no GPU is here"
            if "nvidia.com/gpu" not in error and "gpu" not in error.lower():
                return f"the error does not name the accelerator: {error}"
        if group == "integration":
            logs = [Path(t.log_path) for t in tasks if t.state == "FAILED" and t.log_path]
            if not logs or not logs[0].is_file() or not logs[0].read_text().strip():
                return "the failed task left no log"
        return ""


def _task_spec(spec: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The IR task a run's task path (``loop/iteration-0/train``) is an instance of."""
    component: dict[str, Any] = spec["root"]
    task: dict[str, Any] | None = None
    for part in path.split("/"):
        if part.startswith("iteration-"):
            continue
        if task is not None:
            component = spec["components"][task["componentRef"]["name"]]
        task = component.get("dag", {}).get("tasks", {}).get(part)
        if task is None:
            return None
    return task


def _runs_after_failures(spec: dict[str, Any], path: str) -> bool:
    """Whether the task at ``path`` is an exit handler (trigger strategy ALL_UPSTREAM_TASKS_COMPLETED)."""
    task = _task_spec(spec, path)
    return task is not None and task.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED"


def missed_hits(spec: dict[str, Any], first: list[TaskRecord], second: list[TaskRecord]) -> list[str]:
    """The container tasks of a second run that should have been cache hits and were not.

    A task should hit when, at the same path, the first run's task SUCCEEDED with caching on
    and the same resolved inputs. Inputs that name the run (a PipelineTaskFinalStatus, the run's
    id) or a protocol file parameter legitimately differ, and then nothing is demanded. A
    kfp-kubernetes CreatePVC/DeletePVC acts on a volume rather than computing outputs: the engine
    never caches it (a cached CreatePVC would name a volume the first run's DeletePVC removed).
    """
    before = {
        t.path: t for t in first
        if t.kind == "container" and t.state == "SUCCEEDED" and t.image not in (CREATE_PVC_IMAGE, DELETE_PVC_IMAGE)
    }
    missed = []
    for t in second:
        earlier = before.get(t.path)
        if earlier is None or t.cached or t.kind != "container" or t.inputs != earlier.inputs:
            continue
        task = _task_spec(spec, t.path)
        if task is not None and TaskSpec(task).caching_enabled:
            missed.append(t.path)
    return missed
