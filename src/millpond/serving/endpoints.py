"""Where an InferenceService's model processes answer: written by its supervisor, read by whoever routes.

One InferenceService has one supervisor process (``serving.supervisor``), which starts its
replicas (model server processes, or a custom container's command) and restarts the ones that
die. Whenever the set of replicas that answer changes, the supervisor rewrites one small JSON
file, ``$MILLPOND_HOME/serving/NAMESPACE/NAME/endpoints.json``; the gateway on ``millpond
server`` and the InferenceService's own port read it to pick a replica for each request. A
file, not a database row: it changes on every restart of a replica, is read on every request
(cached on its modification time) and only means something on the machine whose processes it names.

The file names the supervisor that wrote it (pid + start ticks): once that process is gone its
replicas are gone with it (they run in its process group), so :func:`read` answers None rather
than addresses nobody answers at, and a status never claims a model that is not served.

Revisions are KServe's: each change of the predictor's spec is a new revision
(``NAME-predictor-00001``, ``…-00002``); with ``canaryTrafficPercent`` the latest one gets that
share of the requests and the previous rolled-out one the rest.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from millpond.runners.processes import ProcessIdentity
from millpond.settings import load_settings
from millpond.store.paths import check_segment

FILE_NAME = "endpoints.json"
ISVC = "InferenceService"
# where each kind's supervisors keep their files under the home: a SeldonDeployment may share an
# InferenceService's name and namespace, so each kind has a folder of its own
ROOTS = {ISVC: "serving", "SeldonDeployment": "seldon"}


@dataclass(frozen=True)
class Revision:
    """One revision of the predictor: its KServe name, its share of the traffic (percent) and the base
    URLs (``http://127.0.0.1:PORT``) of its replicas that are up and answer now."""

    name: str
    percent: int
    replicas: tuple[str, ...]


@dataclass(frozen=True)
class Endpoints:
    """What routes to one InferenceService: the model name its servers answer to (KServe: the
    InferenceService's name), the protocol (``v1``, ``v2``), the InferenceService's own port (stable
    across restarts of its replicas: its ``status.url``), its revisions, and who wrote it."""

    name: str
    namespace: str
    uid: str
    model_name: str
    protocol: str
    port: int
    revisions: tuple[Revision, ...]
    supervisor_pid: int
    supervisor_ticks: str | None
    updated: str  # ISO 8601, UTC
    server: str = "sklearn"  # sklearn, pytorch (millpond's model server) or command (a custom container)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    kind: str = ISVC  # what it serves: an InferenceService, or a SeldonDeployment (its predictors as revisions)

    @property
    def supervisor(self) -> ProcessIdentity:
        return ProcessIdentity(self.supervisor_pid, self.supervisor_ticks)

    @property
    def ready(self) -> bool:
        """Some revision with traffic has a replica that answers."""
        return any(revision.replicas and revision.percent > 0 for revision in self.revisions)


def folder(namespace: str, name: str, kind: str = ISVC) -> Path:
    """``$MILLPOND_HOME/serving/NAMESPACE/NAME``: the InferenceService's endpoints, logs and model copies
    (a SeldonDeployment's: ``$MILLPOND_HOME/seldon/NAMESPACE/NAME``)."""
    check_segment(namespace, "namespace")
    check_segment(name, kind)
    return load_settings().home / ROOTS[kind] / namespace / name


def replica_log(namespace: str, name: str, revision: str, replica: int, kind: str = ISVC) -> Path:
    """The output of one replica of one revision (``arena serve logs`` reads it)."""
    check_segment(revision, "revision")
    return folder(namespace, name, kind) / "logs" / revision / f"replica-{int(replica)}.log"


def write(endpoints: Endpoints) -> None:
    """Publish ``endpoints`` atomically: a reader sees the old file or the new one, never half of one."""
    path = folder(endpoints.namespace, endpoints.name, endpoints.kind) / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{FILE_NAME}.{os.getpid()}.partial")
    partial.write_text(json.dumps(asdict(endpoints), sort_keys=True))
    os.replace(partial, path)


def read_file(namespace: str, name: str, kind: str = ISVC) -> Endpoints | None:
    """The file as written (None when there is none or it cannot be read), whether or not its writer lives."""
    try:
        raw = json.loads((folder(namespace, name, kind) / FILE_NAME).read_text())
        revisions = tuple(Revision(str(r["name"]), int(r["percent"]), tuple(str(u) for u in r["replicas"]))
                          for r in raw["revisions"])
        return Endpoints(
            name=str(raw["name"]), namespace=str(raw["namespace"]), uid=str(raw["uid"]),
            model_name=str(raw["model_name"]), protocol=str(raw["protocol"]), port=int(raw["port"]),
            revisions=revisions, supervisor_pid=int(raw["supervisor_pid"]),
            supervisor_ticks=raw.get("supervisor_ticks"), updated=str(raw["updated"]),
            server=str(raw.get("server") or "sklearn"), extra=dict(raw.get("extra") or {}),
            kind=str(raw.get("kind") or ISVC))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read(namespace: str, name: str, kind: str = ISVC) -> Endpoints | None:
    """The endpoints of a served InferenceService: None when none were written or their supervisor is gone."""
    found = read_file(namespace, name, kind)
    if found is None or not found.supervisor.is_running():
        return None
    return found


def clear(namespace: str, name: str, kind: str = ISVC) -> None:
    """Forget the endpoints (the supervisor stopped, or the InferenceService was deleted)."""
    try:
        (folder(namespace, name, kind) / FILE_NAME).unlink()
    except FileNotFoundError:
        pass
