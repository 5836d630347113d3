"""``model-registry://`` references, and which URIs the model registry accepts for a version's files.

The model registry's KServe storage initializer (``kubeflow/model-registry`` ``cmd/csi``,
``internal/storage/modelregistry_provider.go``) reads four forms of ``storageUri``:

- ``model-registry://MODEL`` — the model's latest version: its versions sorted by id, descending, the
  first (archived ones included: upstream does not skip them);
- ``model-registry://MODEL/VERSION``;
- ``model-registry://REGISTRY/MODEL`` and ``model-registry://REGISTRY/MODEL/VERSION``, where REGISTRY is
  the registry's address (upstream drops the first of two segments only when it equals the address it
  was configured with).

then takes the version's artifacts, newest first, and serves the first one's URI when it is a
``ModelArtifact`` (an error otherwise). Here the registry is millpond's own, one per namespace: a
REGISTRY segment is dropped when there are three segments, or when it reads as a service address (it
has a ``:PORT`` or a ``.svc`` label). Its namespace is the second label of ``NAME.NAMESPACE.svc…``
when it has one, else the InferenceService's own namespace.

A registered URI must be one a model server could read and must not climb out of its root:
:func:`check_registered_uri` parses it as a ``storageUri`` (``serving.storage_uri``: a known scheme, no
``..``), refuses a relative path, another ``model-registry://`` reference, and a local path outside the
folders a model may come from — the home's pipeline root and volumes, ``MILLPOND_SHARED_ROOTS`` and
``MILLPOND_MODEL_ROOTS`` (folders separated by ``:``), symbolic links followed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from millpond.errors import NotFoundError, TaskFailure, UserError
from millpond.serving.storage_uri import StorageUri, parse_storage_uri
from millpond.settings import Settings, load_settings
from millpond.store.model_registry import ARTIFACT, MODEL, VERSION, Entry, RegistryStore

SCHEME = "model-registry"
MODEL_ROOTS_ENV = "MILLPOND_MODEL_ROOTS"
MODEL_ARTIFACT = "model-artifact"


class UnresolvedReference(TaskFailure):
    """A ``model-registry://`` reference that names no servable version: the message names what is missing."""


@dataclass(frozen=True)
class RegistryRef:
    """A parsed ``model-registry://`` reference: the registry's namespace (None: the server's own), the
    registered model's name and the version's (None: the latest)."""

    namespace: str | None
    model: str
    version: str | None


def parse_ref(uri: str) -> RegistryRef:
    """The reference ``uri`` names; UserError for one that is not ``model-registry://[REGISTRY/]MODEL[/VERSION]``."""
    text = uri.split("?", 1)[0]
    if not text.startswith(f"{SCHEME}://"):
        raise UserError(f"{uri!r} is not a {SCHEME}:// reference")
    tokens = [token for token in text[len(SCHEME) + 3:].split("/")]
    if not tokens or len(tokens) > 3 or any(not token for token in tokens):
        raise UserError(f"{uri!r}: expected {SCHEME}://MODEL, {SCHEME}://MODEL/VERSION or "
                        f"{SCHEME}://REGISTRY/MODEL/VERSION")
    namespace = None
    if len(tokens) == 3 or (len(tokens) == 2 and _is_address(tokens[0])):
        namespace = _namespace_of(tokens[0])
        tokens = tokens[1:]
    return RegistryRef(namespace, tokens[0], tokens[1] if len(tokens) == 2 else None)


def _is_address(token: str) -> bool:
    return ":" in token or ".svc" in token


def _namespace_of(address: str) -> str | None:
    labels = address.split(":", 1)[0].split(".")
    return labels[1] if len(labels) >= 3 and labels[2] == "svc" else None


def resolve_artifact(uri: str, namespace: str, store: RegistryStore | None = None) -> Entry:
    """The model artifact a ``model-registry://`` reference stands for, in ``namespace``'s registry (unless the
    reference names another); UnresolvedReference naming the missing model, version or artifact."""
    ref = parse_ref(uri)
    where = ref.namespace or namespace
    store = store or RegistryStore(load_settings().database_url)
    try:
        model = store.find(MODEL, where, name=ref.model)
    except NotFoundError:
        raise UnresolvedReference(f"{uri}: no registered model {ref.model!r} in the model registry of "
                                  f"namespace {where}") from None
    if ref.version is None:
        latest = store.page(VERSION, where, parent_id=model.id, descending=True, limit=1).entries
        if not latest:
            raise UnresolvedReference(f"{uri}: registered model {ref.model!r} has no versions")
        version = latest[0]
    else:
        try:
            version = store.find(VERSION, where, name=ref.version, parent_id=model.id)
        except NotFoundError:
            raise UnresolvedReference(f"{uri}: registered model {ref.model!r} has no version "
                                      f"{ref.version!r}") from None
    artifacts = store.page(ARTIFACT, where, parent_id=version.id, order_by="CREATE_TIME", descending=True,
                           limit=1).entries
    if not artifacts or artifacts[0].artifact_type != MODEL_ARTIFACT:
        raise UnresolvedReference(f"{uri}: version {version.name!r} of {ref.model!r} has no model artifact")
    if not artifacts[0].uri:
        raise UnresolvedReference(f"{uri}: the model artifact of version {version.name!r} of {ref.model!r} "
                                  "has no URI")
    return artifacts[0]


def resolve(storage: StorageUri, namespace: str, store: RegistryStore | None = None) -> StorageUri:
    """The ``storageUri`` a ``model-registry://`` reference stands for: its model artifact's URI, parsed."""
    artifact = resolve_artifact(storage.uri, namespace, store)
    return parse_storage_uri(artifact.uri, f"{storage.uri} (its model artifact's uri)")


def model_roots(settings: Settings) -> tuple[Path, ...]:
    """The folders a registered local path may lie in (real paths)."""
    named = [Path(p) for p in os.environ.get(MODEL_ROOTS_ENV, "").split(os.pathsep) if p]
    folders = [settings.default_pipeline_root, settings.volumes_dir, *map(Path, settings.shared_roots), *named]
    return tuple(Path(os.path.realpath(folder)) for folder in folders)


def check_registered_uri(uri: str, field: str = "uri", settings: Settings | None = None) -> StorageUri:
    """``uri`` parsed, when the registry may record it as where a version's files are; UserError (400) saying why
    not otherwise."""
    storage = parse_storage_uri(uri, field)
    if storage.scheme == SCHEME:
        raise UserError(f"{field}: {uri!r}: a registered artifact's URI cannot be another {SCHEME}:// reference")
    if storage.scheme == "relative":
        raise UserError(f"{field}: {uri!r}: a relative path; register an absolute one (file:///PATH or s3://…)")
    path = urlsplit(uri).path if storage.scheme in ("http", "https") else storage.path
    if ".." in PurePosixPath(path).parts:
        raise UserError(f"{field}: {uri!r}: '..' is not allowed in a model's URI")
    local = storage.local_path
    if local is not None:
        settings = settings or load_settings()
        real = Path(os.path.realpath(local))
        roots = model_roots(settings)
        if not any(real == root or root in real.parents for root in roots):
            raise UserError(f"{field}: {uri!r} is outside the folders a registered model may come from "
                            f"({', '.join(str(root) for root in roots)}; add one to {MODEL_ROOTS_ENV})")
    return storage
