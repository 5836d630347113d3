"""Run one container task exactly as the KFP launcher does.

Build ``--executor_input``, resolve placeholders, stage input artifacts, run the command
(through a Runner), read output parameter files and ``executor_output.json``, and publish
output artifacts atomically. Retries, caching and platform config wrap this; they are not in it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from millpond.datasets.node_mounts import mount_all
from millpond.errors import MillpondError, TaskFailure, UserError
from millpond.pipelines.argo.paths import FIELD as ARGO_PATHS
from millpond.pipelines.argo.paths import SIDECARS_FIELD as ARGO_SIDECARS
from millpond.pipelines.argo.paths import from_ir as argo_paths
from millpond.pipelines.argo.placement import Placement
from millpond.pipelines.attempt_folders import AttemptFolders
from millpond.pipelines.outcomes import TaskOutcome
from millpond.pipelines.placeholders import PlaceholderContext
from millpond.pipelines.staging import OutputStaging, artifact_uris
from millpond.pipelines.values import from_output_file
from millpond.pipelines.views import ComponentSpec
from millpond.runners.base import (
    Bind,
    DatasetBind,
    Demand,
    InImage,
    Packages,
    ProcessResult,
    ProcessSpec,
    Runner,
    Sidecar,
)
from millpond.runners.containers import kfp_sdk
from millpond.runners.containers.command import OWNER_LABEL
from millpond.runners.containers.policy import Decision, ImageRequest, UnusedImages, decide
from millpond.runners.environment import RUN_ID_ENV, TASK_ID_ENV, inherited_environment
from millpond.runners.python_env import executor_call, python_bin_dir, split_prelude
from millpond.runners.sandbox import sandbox_problem
from millpond.store.paths import check_segment, contained_path, contained_uri


@dataclass
class TaskRequest:
    """Everything the launcher needs to run one container task once."""

    run_id: str
    run_name: str
    pipeline_name: str
    pipeline_root: str
    task_id: str
    task_name: str
    task_path: str
    component_spec: dict[str, Any]
    container: dict[str, Any]
    parameters: dict[str, Any]
    artifacts: dict[str, list[dict[str, Any]]]
    log_path: Path
    staging_dir: Path
    venvs_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_binds: list[Bind] = field(default_factory=list)
    timeout_s: float | None = None
    on_start: Callable[..., None] | None = None  # (pid, **fields for the task's row in the same write)
    demand: Demand = field(default_factory=Demand)  # its requests, for a runner placing it on another machine
    datasets: list[DatasetBind] = field(default_factory=list)  # mounted where it runs (a Ray node)
    carried: list[Path] = field(default_factory=list)  # per-task folders outside the workspace (secret files)
    hidden: list[Path] = field(default_factory=list)  # multi-user: its run's local pipeline root, covered
    image: ImageRequest | None = None  # the task's image and runtime policy (policies.image)
    memory_limit: int | None = None  # bytes; enforced when it runs in its image
    cpu_limit: float | None = None  # cores; enforced when it runs in its image
    # where it runs, as fields of the task's row, written with its start (policies.image says which)
    on_placed: Callable[[Decision], dict[str, Any]] | None = None


@dataclass(frozen=True)
class _Program:
    """What a task's process runs: its argv, the Python on its PATH, what a Ray node installs first."""

    argv: list[str]
    python_bin: Path
    packages: Packages | None
    in_process: bool  # a lightweight component with nothing to install: the fork server may run it
    needs_sdk: bool = False  # in its image, kfp's executor with millpond's kfp SDK on PYTHONPATH (kfp_sdk)


class TaskError(TaskFailure):
    """The task cannot run or its outputs are unusable; the message goes on the task."""


def _component(request: TaskRequest) -> ComponentSpec:
    return ComponentSpec(request.task_name, request.component_spec)


def output_uri(request: TaskRequest, key: str) -> str:
    return contained_uri(task_prefix(request), key, what="output artifact")


def task_prefix(request: TaskRequest) -> str:
    """``<pipeline root>/<pipeline name>/<run id>/<task path>``, proven to stay under the pipeline root."""
    check_segment(request.pipeline_name, "pipeline name")
    check_segment(request.run_id, "run id")
    return contained_uri(request.pipeline_root, request.pipeline_name, request.run_id, request.task_path, what="task")


def _log(request: TaskRequest, line: str) -> None:
    request.log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(request.log_path, "a", encoding="utf-8") as log:
        log.write(f"[millpond] {line}\n")


def _last_log_line(log_path: Path, limit: int = 300) -> str:
    """The task's own last words (usually the exception), to name why it failed."""
    try:
        with open(log_path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 8192))
            lines = log.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if line.strip() and not line.startswith("[millpond]"):
            return line.strip()[:limit]
    return ""


class ContainerLauncher:
    """Turns a TaskRequest into a process, and the process's files back into outputs."""

    def __init__(self, runner: Runner, slots: threading.Semaphore | None = None) -> None:
        self.runner = runner
        # The images this launcher's tasks did not run in and why, for the run to say once (policy.UnusedImages).
        self.images_not_used: UnusedImages | None = None
        # At most this many task processes at once; preparing and collecting outputs run outside it,
        # so the engine's share of a short task overlaps the next task's process.
        self.slots = slots
        self._folders: dict[tuple[Path, str], AttemptFolders] = {}  # by (staging dir, run id): kept for the run
        self._folders_lock = threading.Lock()

    def launch(self, request: TaskRequest, cancel: threading.Event) -> TaskOutcome:
        """Run one attempt of ``request``; one cancelled before it began touches nothing.

        A wide loop queues thousands of tasks for the worker threads; once the run is cancelled,
        each of them still reaches a worker. Without the first check each one made its workspace,
        staged its inputs (from S3 too) and removed them again: a cancelled 20,000-item loop took
        a minute to end.
        """
        if cancel.is_set():
            return TaskOutcome(succeeded=False, error="canceled before it started")
        folders = self._attempt_folders(request)
        attempt_dir = folders.take()
        try:
            return self._launch(request, attempt_dir, cancel)
        except MillpondError as exc:  # a task failure, bad content, or an unreachable object store: one line
            _log(request, f"error: {exc}")
            return TaskOutcome(succeeded=False, error=str(exc))
        except Exception as exc:  # storage or OS trouble: the task fails, the engine goes on
            _log(request, "error:\n" + traceback.format_exc())
            reason = (str(exc).strip().splitlines() or [""])[0]
            return TaskOutcome(succeeded=False, error=f"{type(exc).__name__}: {reason}")
        finally:
            folders.give_back(attempt_dir)

    def close(self) -> None:
        """Remove the attempt folders kept for the run's tasks (the run ended)."""
        with self._folders_lock:
            folders, self._folders = list(self._folders.values()), {}
        for kept in folders:
            kept.close()

    def _attempt_folders(self, request: TaskRequest) -> AttemptFolders:
        key = (request.staging_dir, request.run_id)
        with self._folders_lock:
            if key not in self._folders:
                self._folders[key] = AttemptFolders(request.staging_dir, request.run_id)
            return self._folders[key]

    def _launch(self, request: TaskRequest, attempt_dir: Path, cancel: threading.Event) -> TaskOutcome:
        outputs_dir = attempt_dir / "outputs"  # the attempt folder's skeleton (attempt_folders.SKELETON)
        workdir = attempt_dir / "work"
        tmpdir = attempt_dir / "tmp"  # kfp's program does mktemp -d: keep that inside the attempt
        has_outputs = bool(_component(request).output_artifacts)
        executor_input = self._executor_input(request, outputs_dir)
        staging = OutputStaging(
            task_prefix(request), attempt_dir, has_outputs, artifact_uris(executor_input),
            fetch_here=not getattr(self.runner, "fetches_inputs", False),  # a Ray node reads them from the root
        )
        executor_input["outputs"]["outputFile"] = staging.task_output_file
        context = PlaceholderContext(executor_input, job=self._job_placeholders(request))

        decision, sidecars = self._where(request, context)
        in_image = decision is not None and decision.runtime is not None
        program = self._program(request, context, cancel) if not in_image else self._image_program(request, context)
        env = self._environment(request, context, program.python_bin, tmpdir)
        binds: list[Bind] = []
        if program.needs_sdk:
            binds.append(Bind(kfp_sdk.sdk_folder(request.venvs_dir.parent / "kfp-sdk"), kfp_sdk.TARGET, read_only=True))
            env["PYTHONPATH"] = kfp_sdk.TARGET
        # what the step sees as it is if its /tmp becomes private (``argo.placement``, ``sandbox.wrap``)
        keep = (workdir, *(Path(p) for p in env["PATH"].split(os.pathsep) if p.startswith("/")))
        placement = self._argo_placement(request, attempt_dir, staging, context, keep)

        spec = ProcessSpec(
            argv=program.argv, env=env, cwd=workdir, log_path=request.log_path,
            binds=staging.binds + request.extra_binds + (placement.binds if placement else []) + binds,
            timeout_s=request.timeout_s, on_start=self._starter(request, decision),
            python_task=executor_call(program.argv) if program.in_process else None,
            demand=request.demand, workspace=attempt_dir, fetch=staging.fetches,
            datasets=list(request.datasets), mounter=mount_all if request.datasets else None,
            carried=list(request.carried), packages=program.packages,
            in_image=self._in_image(request, decision, sidecars) if in_image and decision else None,
            hidden=list(request.hidden),
        )
        if self.slots is None:
            result = self.runner.run(spec, cancel)
        else:
            with self.slots:
                result = self.runner.run(spec, cancel)
        outcome = self._finish(request, result, placement, executor_input, staging, context)
        if not outcome.succeeded and decision is not None and decision.runtime is None and outcome.error:
            outcome.error += f"; image {decision.image} was not used: {decision.reason}"
        return outcome

    def _where(
        self, request: TaskRequest, context: PlaceholderContext
    ) -> tuple[Decision | None, tuple[Sidecar, ...]]:
        """In its image or on the host (None: it names no image), with its sidecars in theirs; the task's log says
        which, and why. A step whose sidecar cannot run in its own image runs on the host with its sidecars.

        On a Ray node (cluster mode) tasks run on the node's host: images are not carried there yet.
        """
        if request.image is None:
            return None, ()
        sidecars: tuple[Sidecar, ...] = ()
        if getattr(self.runner, "fetches_inputs", False):
            decision = Decision(request.image.image, None, "cluster mode runs tasks on the Ray nodes' hosts")
        else:
            request.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(request.log_path, "ab") as log:
                decision = decide(request.image, log)
                if decision.runtime is not None and request.container.get(ARGO_SIDECARS):
                    decision, sidecars = self._sidecars(request, context, decision, log)
        if decision.runtime is not None:  # on the host, the task's log stays as it was: the run says it once
            _log(request, f"running in image {decision.image} ({decision.runtime.name})")
        if self.images_not_used is not None:
            self.images_not_used.add(decision)
        return decision, sidecars

    def _starter(self, request: TaskRequest, decision: Decision | None) -> Callable[[int | None], None] | None:
        """The request's ``on_start``, told where the task runs (written with its RUNNING, in one write)."""
        on_start, on_placed = request.on_start, request.on_placed
        if on_start is None or on_placed is None or decision is None:
            return on_start
        fields = on_placed(decision)
        return lambda pid: on_start(pid, **fields)

    def _sidecars(
        self, request: TaskRequest, context: PlaceholderContext, main: Decision, log: IO[bytes]
    ) -> tuple[Decision, tuple[Sidecar, ...]]:
        """The step's sidecars (``argoSidecars``), each decided in its own image under the step's policy and pull
        secrets; the host for the whole step when one of them cannot run in its image."""
        assert request.image is not None
        sidecars = []
        for record in request.container[ARGO_SIDECARS]:
            image = context.substitute(str(record["image"])).strip()
            wanted = ImageRequest(image, policy=request.image.policy, pull_secrets=request.image.pull_secrets)
            decision = decide(wanted, log)
            if decision.runtime is None:
                return Decision(main.image, None, f"sidecar {record['name']!r}: image {image} not used: "
                                                  f"{decision.reason}"), ()
            command, args = list(record.get("command") or []), list(record.get("args") or [])
            sidecars.append(Sidecar(
                name=str(record["name"]), image=image, argv=tuple(command + args), args_only=not command,
                env={str(e["name"]): str(e["value"]) for e in record.get("env") or []},
                mirror_binds=bool(record.get("mirrorVolumeMounts")),
            ))
        return main, tuple(sidecars)

    def _in_image(self, request: TaskRequest, decision: Decision, sidecars: tuple[Sidecar, ...]) -> InImage:
        assert decision.runtime is not None and request.image is not None
        return InImage(
            runtime=decision.runtime, image=decision.image, args_only=request.image.args_only, sidecars=sidecars,
            memory_bytes=request.memory_limit, cpus=request.cpu_limit, shm_bytes=request.image.shm_bytes,
            labels={OWNER_LABEL: f"run/{request.run_id}", "io.millpond.task": request.task_id},
        )

    def _image_program(self, request: TaskRequest, context: PlaceholderContext) -> _Program:
        """The command line in the task's image: Kubernetes' command and args (no args: the image's own).

        A lightweight component with nothing to install runs kfp's executor program with millpond's kfp SDK
        on PYTHONPATH (``kfp_sdk``); one with ``packages_to_install`` runs kfp's own command, whose pip
        installs them in the image.
        """
        command = list(request.container.get("command") or [])
        args = list(request.container.get("args") or [])
        if request.container.get(ARGO_SIDECARS) and command == ["sh"] and args[:1] == ["-c"] and len(args) >= 3:
            command, args = args[3:], []  # the host's wrapper (``step_config.sidecar_script``) less: they have theirs
        prelude = split_prelude(command)
        needs_sdk = prelude is not None and not prelude.requirements
        if needs_sdk and prelude is not None:
            command = prelude.program
        python_bin = Path(sys.executable).parent
        return _Program(context.command_line(command + args), python_bin, None, False, needs_sdk)

    def _program(self, request: TaskRequest, context: PlaceholderContext, cancel: threading.Event) -> _Program:
        """The command line, with the Python that runs it: a lightweight component's packages_to_install
        go into a cached venv here, or into the Ray node's (``Packages``)."""
        command = list(request.container.get("command") or [])
        args = list(request.container.get("args") or [])
        if not command and not args:
            raise TaskError(
                "the container has neither command nor args (an image's entrypoint cannot run without its image)"
            )
        prelude = split_prelude(command)
        python_bin = Path(sys.executable).parent
        packages = None
        if prelude is not None:
            if prelude.requirements and getattr(self.runner, "installs_packages", False):
                # a Ray node builds (or reuses) the venv in its own folder, keyed as here
                packages = Packages(prelude.requirements, prelude.index_options)
            elif prelude.requirements:
                _log(request, f"installing packages_to_install into a cached venv: {' '.join(prelude.requirements)}")
                python_bin = python_bin_dir(prelude, request.venvs_dir, cancel)
            command = prelude.program
        in_process = prelude is not None and not prelude.requirements
        return _Program(context.command_line(command + args), python_bin, packages, in_process)

    def _environment(
        self, request: TaskRequest, context: PlaceholderContext, python_bin: Path, tmpdir: Path
    ) -> dict[str, str]:
        """The task's environment: this process's (never the server's token), its Python first on PATH, the
        container's env with its placeholders filled, and what the engine's policies added (platform, grant)."""
        env = inherited_environment()  # never the server's token
        env["PATH"] = f"{python_bin}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONUNBUFFERED"] = "1"
        env["TMPDIR"] = str(tmpdir)
        env.pop("VIRTUAL_ENV", None)
        env[RUN_ID_ENV], env[TASK_ID_ENV] = request.run_id, request.task_id
        for item in request.container.get("env") or []:
            env[item["name"]] = context.substitute(str(item.get("value", "")))
        env.update(request.extra_env)
        return env

    def _finish(
        self, request: TaskRequest, result: ProcessResult, placement: Placement | None,
        executor_input: dict[str, Any], staging: OutputStaging, context: PlaceholderContext,
    ) -> TaskOutcome:
        """The process's end as the task's outcome: its outputs read and published, or why it failed."""
        if result.error:
            _log(request, result.error)
        if result.exit_code != 0 or result.error:
            staging.discard()
            reason = result.error or f"the command exited with status {result.exit_code}"
            last = _last_log_line(request.log_path)
            if last and not result.error:
                reason += f": {last}"
            return TaskOutcome(succeeded=False, exit_code=result.exit_code, error=reason)
        try:
            if placement is not None:
                self._argo_outputs(placement, executor_input, staging, context)
            parameters, artifacts = self._read_outputs(request, executor_input, staging)
            staging.publish()
        except Exception:
            staging.discard()
            raise
        return TaskOutcome(succeeded=True, parameters=parameters, artifacts=artifacts, exit_code=0)

    # --- kfp 1.x's fixed paths -----------------------------------------------------------
    def _argo_placement(
        self, request: TaskRequest, attempt_dir: Path, staging: OutputStaging, context: PlaceholderContext,
        keep: tuple[Path, ...],
    ) -> Placement | None:
        """A kfp 1.x step's Argo paths (``argo.paths``) made real in its sandbox: None for any other step.

        Its staging lives in the attempt folder, so on a Ray node (which gets that folder and sends it
        back) it works the same; inputs the node downloads are bound from its download there.
        """
        record = request.container.get(ARGO_PATHS)
        if record is None:
            return None
        try:
            paths = argo_paths(record, f"executor of task {request.task_name!r}")
        except UserError as exc:
            raise TaskError(str(exc)) from None
        mounts = staging.binds + request.extra_binds
        keep = (*keep, *(Path(b.source) for b in mounts))
        remote = bool(getattr(self.runner, "fetches_inputs", False))  # a Ray node: mtimes do not come back
        placement = Placement(paths, attempt_dir / "argo", mounts, sandbox_problem(), keep, exact_stamps=not remote)
        sources = {
            name: staging.host_input(str(items[0].get("uri", "")))
            for name, items in request.artifacts.items() if items
        }
        fetched = {str(path) for _, path in staging.fetches}
        placement.prepare(sources, context.substitute,
                          frozenset(name for name, source in sources.items() if str(source) in fetched))
        return placement

    def _argo_outputs(
        self, placement: Placement, executor_input: dict[str, Any], staging: OutputStaging,
        context: PlaceholderContext,
    ) -> None:
        """Argo's outputs as the task's: parameters into their output files, artifacts into the staging."""
        declared = executor_input["outputs"]
        for name, text in placement.parameters(context.substitute).items():
            if name in declared["parameters"]:
                Path(declared["parameters"][name]["outputFile"]).write_text(text, encoding="utf-8")
        uris = {name: entry["artifacts"][0]["uri"] for name, entry in declared["artifacts"].items()}

        def target(name: str) -> Path:
            if name not in uris:  # a hand-written IR's record naming an output the component lacks
                raise TaskError(f"Argo output artifact {name!r} is not an output of the component")
            return staging.host_path(uris[name])

        missing = placement.artifacts(target)
        for name in missing:  # an optional output the step did not write: no artifact at all
            declared["artifacts"].pop(name, None)

    # --- executor input -----------------------------------------------------------------
    def _executor_input(self, request: TaskRequest, outputs_dir: Path) -> dict[str, Any]:
        component = _component(request)
        outputs: dict[str, Any] = {
            "parameters": {
                name: {"outputFile": str(contained_path(outputs_dir / "parameters", name, what="output parameter"))}
                for name in component.output_parameters
            },
            "artifacts": {
                name: {
                    "artifacts": [
                        {
                            "name": name,
                            "type": definition.type_schema,
                            "uri": output_uri(request, name),
                            "metadata": {},
                        }
                    ]
                }
                for name, definition in component.output_artifacts.items()
            },
            "outputFile": str(outputs_dir / "executor_output.json"),
        }
        inputs: dict[str, Any] = {"parameterValues": dict(request.parameters)}
        if request.artifacts:
            inputs["artifacts"] = {name: {"artifacts": list(items)} for name, items in request.artifacts.items()}
        return {"inputs": inputs, "outputs": outputs}

    def _job_placeholders(self, request: TaskRequest) -> dict[str, str]:
        return {
            "pipeline_job_name": request.run_name,
            "pipeline_job_resource_name": request.run_name,
            "pipeline_job_uuid": request.run_id,
            "pipeline_task_name": request.task_name,
            "pipeline_task_uuid": request.task_id,
            "pipeline_root": request.pipeline_root,
        }

    # --- outputs ------------------------------------------------------------------------
    def _read_outputs(
        self, request: TaskRequest, executor_input: dict[str, Any], staging: OutputStaging
    ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
        executor_output: dict[str, Any] = {}
        output_file = staging.host_output_file
        if output_file.exists() and output_file.stat().st_size:
            try:
                executor_output = json.loads(output_file.read_text())
            except json.JSONDecodeError as exc:
                raise TaskError(f"executor_output.json is not valid JSON: {exc.msg}") from None
        parameters: dict[str, Any] = {}
        written = executor_output.get("parameterValues", {})
        for name, definition in _component(request).output_parameters.items():
            type_ = definition.type
            where = f"output parameter {name!r}"
            if name in written:
                value = written[name]
                if type_ != "STRING" and isinstance(value, str) and type_ not in ("LIST", "STRUCT"):
                    value = from_output_file(value, type_, where)
                parameters[name] = value
                continue
            path = Path(executor_input["outputs"]["parameters"][name]["outputFile"])
            if not path.exists():
                raise TaskError(f"the task did not write its {where} (expected the file the placeholder named)")
            try:
                parameters[name] = from_output_file(path.read_text(), type_, where)
            except (UserError, ValueError) as exc:
                raise TaskError(f"{where}: {exc}") from None
        artifacts: dict[str, list[dict[str, Any]]] = {}
        reported = executor_output.get("artifacts", {})
        for name, entry in executor_input["outputs"]["artifacts"].items():
            items = [dict(item) for item in entry["artifacts"]]
            updates = reported.get(name, {}).get("artifacts", [])
            for item, update in zip(items, updates, strict=False):
                # A pythonic artifact (dsl.get_uri()) names its own URI; a custom path is copied in.
                item["uri"] = update.get("uri") or item["uri"]
                item["metadata"] = {**item.get("metadata", {}), **(update.get("metadata") or {})}
                if update.get("custom_path"):
                    staging.adopt(Path(update["custom_path"]), item["uri"])
            artifacts[name] = items
        return parameters, artifacts
