"""A data operation's lineage, recorded when it ends (Complete or Failed): one ``millpond.DataOperation`` execution
(``store.lineage_jobs``), its id derived from the operation's uid (a Cron operation's runs, and a resumed one's,
update the one execution).

What each kind reads and writes, a dataset being the artifact ``pvc://NAME`` of its namespace (the one a job or
task mounting its PVC names) and remote storage its URI (its user and password, if the URI holds them, left out):

- DataLoad: reads the dataset's mounts (its remote storage, key the mount's name), writes the dataset (its cache);
- DataProcess: reads the dataset, and writes it when it is mounted read-write (its access modes);
- DataMigrate: reads ``spec.from``, writes ``spec.to`` (a dataset path is the dataset, ``externalStorage`` its URI);
- DataBackup: reads the dataset, writes ``backupPath``.

Recorded by the operation's own process when it writes its end (``runner._finish``), and by the reader that finds its
process dead (``liveness.step_operation``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from millpond.datasets.config import DatasetConfig, load_config
from millpond.datasets.operations.processor import dataset_ref
from millpond.errors import MillpondError
from millpond.settings import Settings, load_settings
from millpond.store.lineage import ArtifactLink, dataset_links
from millpond.store.lineage_jobs import DATA_OPERATION_EXECUTION, Ended, dataset_output, record_ended, uri_link
from millpond.store.resources import Resource

Links = tuple[ArtifactLink, ...]


def operation_ended(resource: Resource | None, settings: Settings | None = None) -> bool:
    """Record the end of the data operation ``resource`` (as stored, once Complete or Failed); False when nothing
    was recorded."""
    settings = settings or load_settings()
    phase = ((resource.status if resource else None) or {}).get("phase")
    if resource is None or phase not in ("Complete", "Failed"):
        return False
    return record_ended(lambda: _ended(resource, str(phase), settings), settings,
                        f"{resource.kind} {resource.namespace}/{resource.name}")


def _ended(resource: Resource, phase: str, settings: Settings) -> Ended:
    inputs, outputs = _links(resource, settings)
    reason = next((str(c.get("reason") or "") for c in (resource.status or {}).get("conditions") or ()), "")
    return Ended(DATA_OPERATION_EXECUTION, resource.kind, resource.name, resource.namespace, resource.uid,
                 phase == "Complete", phase, reason, inputs, outputs)


def _links(resource: Resource, settings: Settings) -> tuple[Links, Links]:
    spec, namespace = resource.spec, resource.namespace
    if resource.kind == "DataMigrate":
        return (_side(spec.get("from") or {}, namespace, "from", "COMPONENT_INPUT"),
                _side(spec.get("to") or {}, namespace, "to", "OUTPUT"))
    name, dataset_namespace = dataset_ref(resource)
    dataset = dataset_links([name], dataset_namespace)
    if resource.kind == "DataLoad":
        mounts = _config(name, dataset_namespace, settings)
        sources = tuple(uri_link(mount.name, _without_password(mount.uri), namespace, "COMPONENT_INPUT")
                        for mount in (mounts.mounts if mounts else ()))
        return sources, (dataset_output(name, dataset_namespace),)
    if resource.kind == "DataBackup":
        path = str(spec.get("backupPath") or "")
        return dataset, ((uri_link("backupPath", path, namespace, "OUTPUT"),) if path else ())
    config = _config(name, dataset_namespace, settings)  # DataProcess
    written = config is not None and not config.read_only
    return dataset, ((dataset_output(name, dataset_namespace),) if written else ())


def _side(side: dict[str, Any], namespace: str, key: str, io_type: str) -> Links:
    """``spec.from``/``spec.to`` of a DataMigrate: a dataset (by its volume), or external storage by URI."""
    ref = side.get("dataset")
    if isinstance(ref, dict) and ref.get("name"):
        name, owner = str(ref["name"]), str(ref.get("namespace") or namespace)
        return dataset_links([name], owner) if io_type != "OUTPUT" else (dataset_output(name, owner),)
    uri = str((side.get("externalStorage") or {}).get("uri") or "")
    return (uri_link(key, _without_password(uri), namespace, io_type),) if uri else ()


def _config(name: str, namespace: str, settings: Settings) -> DatasetConfig | None:
    try:
        return load_config(name, namespace, settings)
    except MillpondError:  # the dataset was deleted since
        return None


def _without_password(uri: str) -> str:
    """The URI with no user or password in its authority (``s3://KEY:SECRET@host/b`` -> ``s3://host/b``)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
