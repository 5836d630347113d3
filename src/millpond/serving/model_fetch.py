"""A predictor's ``storageUri`` made a local folder its model server reads, as KServe's storage initializer does.

KServe copies the model into ``/mnt/models`` before the server starts. Here:

- ``file://`` and absolute paths are read where they are (a folder; a single file is linked into a
  folder of its own, so the server sees that file only);
- ``pvc://DATASET/path`` is read through the dataset's shared mount (``datasets.shared_mounts``,
  as a training job mounts its datasets), held while the supervisor lives, or from the named local
  volume ``$MILLPOND_HOME/volumes/DATASET`` when no Dataset has that name (a PVC on one machine);
- ``s3://``/``minio://``/``gs://`` (a run's Model artifact under a remote pipeline root is one)
  are copied with fsspec (``store.artifacts.filesystem``: s3fs reads ``AWS_ENDPOINT_URL`` and the
  AWS keys as KFP's remote roots do), a single object or everything under a prefix;
- ``https://``/``http://`` is one file downloaded; ``.tar.gz``/``.tgz``/``.tar`` and ``.zip``
  are unpacked, as KServe's initializer unpacks them, within ``archives``' limits (a compression
  ratio, the share of the free disk the home may use, a member count); a download, and a prefix's
  objects, within the same budget;
- ``model-registry://MODEL[/VERSION]`` is looked up in the namespace's model registry at each fetch
  (``serving.registry_refs``) and its model artifact's URI fetched as above; a missing model, version or
  artifact fails the fetch naming it (the service stays not Ready, and is tried again);
- ``hf://`` is not fetched yet (it needs the Hugging Face hub client and a model server that reads it).

A single file without its format's extension (a KFP Model artifact is a file named after its
output, ``model``) is given the name KServe's samples use, ``model.joblib`` or ``model.pt``, so
that the model server finds it: millpond's addition to KServe, which keeps the name.

A copy lands in ``endpoints.folder(NS, NAME)/models/REVISION``: written into a partial folder
beside it and renamed into place, with the URI it came from, so a second start of the same
revision (a restarted supervisor) reuses a complete copy and never a half one. Every key of a
listing and every member of an archive must stay inside the folder (``store.paths.contained_path``):
an S3 key ``../x`` or an archive member ``/etc/x`` fails the fetch rather than writing outside.
"""

from __future__ import annotations

import os
import shutil
import stat
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path, PurePosixPath

from millpond.datasets.shared_mounts import release, use
from millpond.errors import MillpondError, TaskFailure, UserError
from millpond.pods.run_namespaces import owner_namespace
from millpond.runners.isolation import hidden_roots
from millpond.serving import archives, endpoints
from millpond.serving.models.files import PYTORCH_EXTENSIONS, SKLEARN_EXTENSIONS
from millpond.serving.registry_refs import SCHEME as REGISTRY_SCHEME
from millpond.serving.registry_refs import UnresolvedReference, resolve
from millpond.serving.storage_uri import StorageUri
from millpond.settings import load_settings
from millpond.store import volume_folders
from millpond.store.artifacts import filesystem
from millpond.store.paths import UnsafePath, check_segment, contained_path
from millpond.store.resources import ResourceStore
from millpond.store.runs import RunStore

SOURCE_FILE = ".millpond-source"  # in a fetched copy: the URI it came from
DOWNLOAD_TIMEOUT_S = 60.0
_CHUNK = 1 << 20
_EXTENSIONS = {"sklearn": SKLEARN_EXTENSIONS, "pytorch": PYTORCH_EXTENSIONS}


class ModelLoadFailed(TaskFailure):
    """The model cannot be made a local folder (KServe's ``ModelLoadFailed``): the message names the URI or path."""


def fetch(storage: StorageUri, namespace: str, name: str, revision: str, held: ExitStack,
          fmt: str | None = None, kind: str = endpoints.ISVC) -> Path:
    """The local folder holding ``storage``'s model for ``revision``; a mount it needs is released by ``held``.

    ``fmt`` (``sklearn``, ``pytorch``; None for a custom container) names a single file that lacks the
    format's extension as the model server looks for it (:func:`served_name`). ``kind`` is the serving
    object's (an InferenceService's or a SeldonDeployment's: one may share the other's name).
    """
    scheme = storage.scheme
    models = models_folder(namespace, name, kind)
    if scheme == REGISTRY_SCHEME:  # the registered version's model artifact, looked up at each fetch
        try:
            resolved = resolve(storage, namespace)
        except (UnresolvedReference, UserError) as exc:
            raise ModelLoadFailed(f"storageUri {exc}" if isinstance(exc, UnresolvedReference)
                                  else f"storageUri {storage.uri}: {exc}") from None
        return fetch(resolved, namespace, name, revision, held, fmt, kind)
    if storage.unreadable:
        raise ModelLoadFailed(f"storageUri {storage.uri}: {storage.unreadable}")
    if scheme == "file":
        _check_namespace(Path(storage.local_path or "/"), storage.uri, namespace)
        return _local(Path(storage.local_path or "/"), storage.uri, models, revision, fmt)
    if scheme == "pvc":
        return _local(_pvc_root(storage, namespace, f"{kind} {namespace}/{name}", held), storage.uri, models,
                      revision, fmt, relative=storage.path)
    if scheme in ("s3", "minio", "gs"):
        return _copied(storage, models, revision, partial(_copy_remote, fmt=fmt))
    if scheme in ("http", "https"):
        return _copied(storage, models, revision, partial(_download, fmt=fmt))
    if scheme == "hf":
        raise ModelLoadFailed(f"storageUri {storage.uri}: hf:// models are not fetched yet (download the model and "
                              "give a file://, s3:// or pvc:// storageUri)")
    raise ModelLoadFailed(f"storageUri {storage.uri}: {storage.describe()} cannot be read here")


def _check_namespace(path: Path, uri: str, namespace: str) -> None:
    """Multi-user mode: a ``file://`` model inside the home or a covered root is served only from a run of the
    InferenceService's own namespace (its replica's sandbox binds it back; ``runners.isolation``)."""
    settings = load_settings()
    if not settings.multi_user:
        return
    real = Path(os.path.realpath(path))
    if not any(real == root or root in real.parents or real in root.parents for root in hidden_roots(settings)):
        return
    owner = owner_namespace(RunStore(settings.database_url), real)
    if owner != namespace:
        whose = f"namespace {owner!r}" if owner else "millpond's own files"
        raise ModelLoadFailed(f"storageUri {uri}: {path} belongs to {whose}: in multi-user mode an InferenceService of "
                              f"namespace {namespace!r} serves only its own namespace's models")


def served_name(file_name: str, fmt: str | None) -> str:
    """The name a single model file is given: its own, unless it lacks the format's extension (a KFP Model
    artifact is a file named after its output, ``model``): then ``model.joblib`` or ``model.pt``, the name
    KServe's samples use, so that the model server finds it."""
    extensions = _EXTENSIONS.get(fmt or "")
    if not extensions or file_name.endswith(extensions):
        return file_name
    return f"model{extensions[0]}"


def models_folder(namespace: str, name: str, kind: str = endpoints.ISVC) -> Path:
    """Where an InferenceService's (or a SeldonDeployment's) fetched models are kept, one folder per revision."""
    return endpoints.folder(namespace, name, kind) / "models"


def _local(root: Path, uri: str, models: Path, revision: str, fmt: str | None, relative: str = "") -> Path:
    """A folder of this machine as it is; a single file linked into a folder of its own."""
    try:
        path = contained_path(root, relative, what="storageUri path") if relative else root
    except UnsafePath as exc:
        raise ModelLoadFailed(f"storageUri {uri}: {exc}") from None
    if path.is_dir():
        return path
    if not path.is_file():
        raise ModelLoadFailed(f"storageUri {uri}: {path} {_not_a_model(path)}")
    check_segment(revision, "revision")
    target = models / revision
    link = target / served_name(path.name, fmt)
    if link.is_symlink() and os.readlink(link) == str(path):
        return target
    folder = _partial(target)
    (folder / link.name).symlink_to(path)
    _publish(folder, target, uri)
    return target


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"),
          (stat.S_ISSOCK, "a socket"))


def _not_a_model(path: Path) -> str:
    """What a path that is neither a folder nor a regular file is, in words (``/dev/zero``: a device)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    kind = next((words for test, words in _KINDS if test(mode)), None)
    return f"is {kind}, not a model file or folder" if kind else "is neither a regular file nor a folder"


def _pvc_root(storage: StorageUri, namespace: str, holder: str, held: ExitStack) -> Path:
    """The dataset's shared mount (leased for the supervisor's lifetime), else the named local volume."""
    dataset = str(storage.dataset)
    if ResourceStore().get("Dataset", dataset, namespace) is not None:
        try:
            shared = use(dataset, namespace, holder)
        except MillpondError as exc:
            raise ModelLoadFailed(f"storageUri {storage.uri}: cannot mount dataset {dataset}: {exc}") from None
        held.callback(release, shared)
        return shared.folder
    try:  # the PVC of the InferenceService's own namespace (``store.volume_folders``)
        volume = volume_folders.find(load_settings().volumes_dir, namespace, dataset)
    except MillpondError as exc:
        raise ModelLoadFailed(f"storageUri {storage.uri}: {exc}") from None
    if not volume.is_dir():
        raise ModelLoadFailed(f"storageUri {storage.uri}: no Dataset {dataset} in namespace {namespace} and no "
                              f"volume {volume}")
    return volume


def _copied(storage: StorageUri, models: Path, revision: str, copy: Callable[[StorageUri, Path], None]) -> Path:
    """A complete copy of the revision's model (reused when one from the same URI is there), else a new one."""
    check_segment(revision, "revision")
    target = models / revision
    try:
        if (target / SOURCE_FILE).read_text() == storage.uri:
            return target
    except OSError:
        pass
    folder = _partial(target)
    try:
        copy(storage, folder)
    except ModelLoadFailed:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except (OSError, ValueError) as exc:  # fsspec and botocore errors derive from these
        shutil.rmtree(folder, ignore_errors=True)
        raise ModelLoadFailed(f"storageUri {storage.uri}: cannot fetch the model: {_one_line(exc)}") from None
    except Exception as exc:  # a backend's own error (botocore's ClientError…): the fetch failed, say why
        shutil.rmtree(folder, ignore_errors=True)
        raise ModelLoadFailed(f"storageUri {storage.uri}: cannot fetch the model: {type(exc).__name__}: "
                              f"{_one_line(exc)}") from None
    _publish(folder, target, storage.uri)
    return target


def _partial(target: Path) -> Path:
    folder = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.partial"
    folder.mkdir(parents=True)
    return folder


def _publish(folder: Path, target: Path, uri: str) -> None:
    """Rename the filled partial folder into place (an older copy of the revision is replaced)."""
    (folder / SOURCE_FILE).write_text(uri)
    if target.exists() or target.is_symlink():
        old = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.old"
        os.rename(target, old)
        shutil.rmtree(old, ignore_errors=True)
    os.rename(folder, target)


def _copy_remote(storage: StorageUri, into: Path, fmt: str | None = None) -> None:
    """One object, or every object under the prefix, copied with fsspec; a key leaving ``into`` is refused."""
    fs = filesystem(storage.uri)
    root = f"{storage.authority}/{storage.path}".rstrip("/")
    if storage.path and fs.isfile(root):
        try:
            archives.limits_for(into).check_bytes(f"{root} is", int(fs.size(root) or 0))
        except archives.ArchiveRefused as exc:
            raise ModelLoadFailed(f"storageUri {storage.uri}: {exc}") from None
        fs.get_file(root, str(into / served_name(_file_name(storage, PurePosixPath(root).name), fmt)))
        return
    listed = fs.find(root, detail=True)
    keys = [key for key in listed if not key.endswith("/")]
    if not keys:
        raise ModelLoadFailed(f"storageUri {storage.uri}: no object there (nothing under {root}/)")
    limits = archives.limits_for(into)
    try:
        limits.check_members(f"{root}/", len(keys))
        limits.check_bytes(f"the objects under {root}/ are", sum(int(listed[key].get("size") or 0) for key in keys))
    except archives.ArchiveRefused as exc:
        raise ModelLoadFailed(f"storageUri {storage.uri}: {exc}") from None
    for key in keys:
        relative = key[len(root):].lstrip("/") if key.startswith(root) else ""
        target = _inside(into, relative, storage.uri)
        target.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(key, str(target))


def _download(storage: StorageUri, into: Path, fmt: str | None = None) -> None:
    """One file over HTTP(S), within the home's budget; an archive (.tar.gz, .tgz, .tar, .zip) unpacked in place
    of it, within ``archives.limits_for`` (the archive's own bytes counted while it unpacks)."""
    file_name = _file_name(storage, PurePosixPath(storage.path).name or "model")
    target = into / file_name
    limits = archives.limits_for(into)
    try:
        with urllib.request.urlopen(storage.uri, timeout=DOWNLOAD_TIMEOUT_S) as response, open(target, "wb") as out:
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit():
                limits.check_bytes(f"{file_name} is", int(declared))
            written = 0
            while chunk := response.read(_CHUNK):
                written += len(chunk)
                limits.check_bytes(f"{file_name} is at least", written)
                out.write(chunk)
    except urllib.error.HTTPError as exc:
        raise ModelLoadFailed(f"storageUri {storage.uri}: the download answered HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError) as exc:
        raise ModelLoadFailed(f"storageUri {storage.uri}: cannot download: {_one_line(exc)}") from None
    except archives.ArchiveRefused as exc:
        raise ModelLoadFailed(f"storageUri {storage.uri}: {exc}") from None
    lower = file_name.lower()
    if lower.endswith((".tar.gz", ".tgz", ".tar")):
        _unpack_tar(target, into, storage.uri, limits.less(written))
    elif lower.endswith(".zip"):
        _unpack_zip(target, into, storage.uri, limits.less(written))
    elif served_name(file_name, fmt) != file_name:
        target.rename(into / served_name(file_name, fmt))


def _unpack_tar(archive: Path, into: Path, uri: str, limits: archives.UnpackLimits | None = None) -> None:
    try:
        archives.unpack_tar(archive, into, limits or archives.limits_for(into))
    except archives.ArchiveRefused as exc:
        raise ModelLoadFailed(f"storageUri {uri}: {exc}") from None


def _unpack_zip(archive: Path, into: Path, uri: str, limits: archives.UnpackLimits | None = None) -> None:
    try:
        archives.unpack_zip(archive, into, limits or archives.limits_for(into))
    except archives.ArchiveRefused as exc:
        raise ModelLoadFailed(f"storageUri {uri}: {exc}") from None


def _inside(into: Path, relative: str, uri: str) -> Path:
    """``into/relative``, or ModelLoadFailed when the name (a listing's key, an archive's member) leaves it."""
    try:
        return contained_path(into, relative.rstrip("/"), what="model file")
    except UnsafePath as exc:
        raise ModelLoadFailed(f"storageUri {uri}: {exc}") from None


def _file_name(storage: StorageUri, name: str) -> str:
    try:
        check_segment(name, "model file")
    except UnsafePath as exc:
        raise ModelLoadFailed(f"storageUri {storage.uri}: {exc}") from None
    if name == SOURCE_FILE:
        raise ModelLoadFailed(f"storageUri {storage.uri}: {name!r} is a name millpond keeps for itself")
    return name


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
