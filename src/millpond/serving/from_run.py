"""A run's Model artifact as an InferenceService: what ``millpond serve --from-run RUN --artifact TASK.OUTPUT`` serves.

The artifact is found in the run's history as the task recorded its outputs (``Task.outputs``:
a cached task's outputs name the artifact of the run that produced it, which the run's own
artifact rows do not), by the task's name (or its path inside the run, ``root/…/train``, for a
task inside a sub-DAG) and the output's name. Only a ``system.Model`` is served: a Dataset or
Metrics artifact is refused in one line, as is an output the task does not have.

Its URI is the predictor's ``storageUri`` as it is (a local path under a local pipeline root,
``s3://``/``gs://``/``minio://`` under a remote one: ``serving.storage_uri`` reads all of them), and
its format is the one asked, else the one the artifact says: its ``framework`` metadata
(``scikit-learn``, ``sklearn``, ``pytorch``, ``torch``), else the model file's extension
(``.joblib``/``.pkl``/``.pickle``, ``.pt``/``.pth``) for a local artifact.

A KFP component writes its Model to ``model.path`` itself, a file without an extension
(``joblib.dump(clf, model.path)``); the supervisor's fetch names such a file as the format's server
looks for it (``serving.model_fetch``), so the artifact's URI is served as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millpond.errors import NotFoundError, UserError
from millpond.serving.formats import SERVED_FORMATS
from millpond.serving.storage_uri import parse_storage_uri
from millpond.store.runs import RunStore

MODEL_TYPE = "system.Model"
_FRAMEWORKS = {"scikit-learn": "sklearn", "sklearn": "sklearn", "scikit_learn": "sklearn", "pytorch": "pytorch",
               "torch": "pytorch", "torchscript": "pytorch"}
_EXTENSIONS = {".joblib": "sklearn", ".pkl": "sklearn", ".pickle": "sklearn", ".pt": "pytorch", ".pth": "pytorch"}
ARTIFACT_ANNOTATION = "millpond.io/artifact"  # TASK.OUTPUT of the run the model came from
RUN_LABEL = "pipelines.kubeflow.org/run_id"
TASK_LABEL = "pipelines.kubeflow.org/task_id"


@dataclass(frozen=True)
class ModelArtifact:
    """One Model output of one task of one run: where it is and what it says about itself."""

    run_id: str
    run_name: str
    task: str
    output: str
    uri: str
    metadata: dict[str, Any]

    @property
    def local_path(self) -> Path | None:
        """The artifact's file or folder on this machine (a local pipeline root), else None."""
        if not self.uri.startswith(("/", "file://")):
            return None
        try:
            local = parse_storage_uri(self.uri).local_path
        except UserError:
            return None
        return Path(local) if local else None

    @property
    def format(self) -> str | None:
        """The format the artifact names (metadata, else its file's extension), or None."""
        framework = str(self.metadata.get("framework") or self.metadata.get("format") or "").strip().lower()
        if framework in _FRAMEWORKS:
            return _FRAMEWORKS[framework]
        local = self.local_path
        path = local or Path(self.uri.rstrip("/"))
        if path.suffix in _EXTENSIONS:
            return _EXTENSIONS[path.suffix]
        if local and path.is_dir():
            found = {_EXTENSIONS[p.suffix] for p in path.iterdir() if p.suffix in _EXTENSIONS}
            if len(found) == 1:
                return found.pop()
        return None


def split_artifact(text: str) -> tuple[str, str]:
    """``TASK.OUTPUT`` (the last dot splits: a task's name may hold dots, an output's name does not)."""
    task, sep, output = text.strip().rpartition(".")
    if not sep or not task or not output:
        raise UserError(f"--artifact {text!r} must be TASK.OUTPUT (train.model: the task's name, the output's name)")
    return task, output


def find_run(store: RunStore, run: str) -> Any:
    """The run with this id (or a unique prefix of one), else the newest run of this name."""
    try:
        return store.get_run(run)
    except NotFoundError:
        pass
    for found, _experiment in store.list_runs():
        if found.name == run:
            return found
    raise NotFoundError(f"no run with id or name {run!r}")


def model_artifact(store: RunStore, run: str, artifact: str) -> ModelArtifact:
    """The run's Model output ``TASK.OUTPUT``; NotFoundError/UserError (one line) when there is none."""
    task_name, output = split_artifact(artifact)
    found = find_run(store, run)
    tasks = [t for t in store.list_tasks(found.id) if task_name in (t.name, t.path)]
    if not tasks:
        names = sorted({t.name for t in store.list_tasks(found.id) if t.kind == "container"})
        raise NotFoundError(f"run {found.name} ({found.id[:8]}) has no task {task_name!r} (its tasks: "
                            f"{', '.join(names) or 'none'})")
    entries = [entry for t in tasks for entry in _entries(t.outputs, output)]
    if not entries:
        have = sorted({name for t in tasks for name in ((t.outputs or {}).get("artifacts") or {})})
        state = {t.state for t in tasks}
        raise NotFoundError(f"task {task_name} of run {found.name} has no output artifact {output!r} "
                            f"(its artifacts: {', '.join(have) or 'none'}; the task is {', '.join(sorted(state))})")
    if len(entries) > 1:
        raise UserError(f"task {task_name} of run {found.name} ran several times (a loop): {len(entries)} artifacts "
                        f"named {output}; serve one by its storageUri with arena serve sklearn --model-uri")
    entry = entries[0]
    kind = str((entry.get("type") or {}).get("schemaTitle") or "")
    if kind != MODEL_TYPE:
        raise UserError(f"{task_name}.{output} of run {found.name} is a {kind or 'untyped artifact'}, not a "
                        f"{MODEL_TYPE}: only a Model is served")
    return ModelArtifact(found.id, found.name, task_name, output, str(entry.get("uri") or ""),
                         dict(entry.get("metadata") or {}))


def _entries(outputs: Any, output: str) -> list[dict[str, Any]]:
    items = ((outputs or {}).get("artifacts") or {}).get(output) or []
    return [item for item in (items if isinstance(items, list) else [items]) if isinstance(item, dict)]


def default_name(artifact: ModelArtifact) -> str:
    """An InferenceService name for the artifact: ``TASK-OUTPUT`` made a DNS label (led by a letter)."""
    raw = re.sub(r"[^a-z0-9-]+", "-", f"{artifact.task}-{artifact.output}".lower()).strip("-")
    raw = raw if raw[:1].isalpha() else f"model-{raw}"
    return raw[:63].rstrip("-") or "model"


def inference_service(artifact: ModelArtifact, name: str, namespace: str = "default", fmt: str = "",
                      replicas: int = 1, labels: dict[str, str] | None = None,
                      annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The InferenceService serving ``artifact``: the format's shorthand predictor with its URI as storageUri."""
    chosen = fmt.strip().lower() or artifact.format
    if not chosen:
        raise UserError(f"{artifact.task}.{artifact.output}: cannot tell the model's format (no framework in its "
                        f"metadata, no .joblib/.pkl/.pt file): give its format ({' or '.join(SERVED_FORMATS)})")
    if not artifact.uri:
        raise UserError(f"{artifact.task}.{artifact.output} of run {artifact.run_name} has no URI")
    return shorthand_service(name, namespace, chosen, artifact.uri, replicas,
                             labels={RUN_LABEL: artifact.run_id, **(labels or {})}, annotations=annotations)


def shorthand_service(name: str, namespace: str, fmt: str, uri: str, replicas: int = 1,
                      labels: dict[str, str] | None = None,
                      annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """An InferenceService whose predictor is ``fmt``'s shorthand (``sklearn``, ``pytorch``) with ``uri`` as its
    storageUri; UserError for a format millpond does not serve or fewer than one replica."""
    if fmt not in SERVED_FORMATS:
        raise UserError(f"--format {fmt!r}: millpond serves {' and '.join(SERVED_FORMATS)} models")
    if replicas < 1:
        raise UserError(f"--replicas {replicas}: at least 1")
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, **({"labels": labels} if labels else {}),
                                **({"annotations": annotations} if annotations else {})}
    predictor: dict[str, Any] = {fmt: {"storageUri": uri}}
    if replicas != 1:
        predictor["minReplicas"] = replicas
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": metadata,
            "spec": {"predictor": predictor}}

