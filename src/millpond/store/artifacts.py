"""Artifact storage under a pipeline root: a local folder or any fsspec URI (s3://, gs://, …).

A task never writes under an artifact's final URI directly. Its outputs land in a staging
folder (bound over the task's output folder inside its sandbox, or mirrored under ``/s3``
for remote roots) and are moved or uploaded into place only after the task succeeded, so
a failed or killed task leaves nothing half-written where readers look.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from millpond.errors import UnavailableError, UserError

REMOTE_SCHEMES = ("s3://", "gs://", "minio://")


def is_remote(uri: str) -> bool:
    return uri.startswith(REMOTE_SCHEMES)


def normalize_root(root: str) -> str:
    """A pipeline root as millpond stores it: an absolute path, or a remote URI without a trailing slash."""
    if root.startswith("file://"):
        root = root.removeprefix("file://")
    if "://" in root:
        if not is_remote(root):
            raise UserError(f"--pipeline-root {root}: unsupported scheme (use a local path, s3://, gs:// or minio://)")
        if root.count("/") < 2 or not root.split("://", 1)[1].strip("/"):
            raise UserError(f"--pipeline-root {root}: expected SCHEME://BUCKET[/PREFIX]")
        return root.rstrip("/")
    return str(Path(root).expanduser().resolve())


def filesystem(uri: str) -> Any:
    """The fsspec filesystem of a remote URI (s3fs reads AWS_ENDPOINT_URL and the usual keys)."""
    import fsspec  # noqa: PLC0415 - fsspec's backends when used

    protocol = uri.split("://", 1)[0]
    if protocol == "minio":
        protocol = "s3"
    try:
        return fsspec.filesystem(protocol)
    except ImportError as exc:
        raise UserError(
            f"{uri}: the {protocol}:// filesystem needs an extra package ({exc}); try: pip install 'millpond[s3]'"
        ) from None


def remote_key(uri: str) -> str:
    return uri.split("://", 1)[1]


def move_into_place(source: Path, target: Path) -> None:
    """Atomically publish ``source`` (file or folder) at ``target``, across filesystems too."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        _remove(target)
    try:
        os.rename(source, target)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    temporary = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.partial"
    if source.is_dir():
        shutil.copytree(source, temporary, symlinks=True)
    else:
        shutil.copy2(source, temporary)
    os.rename(temporary, target)
    _remove(source)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


class StorageError(UnavailableError):
    """A remote artifact cannot be read or written: access denied, no such bucket, unreachable endpoint.

    An outside failure, not bad input: the launcher fails the task with this one line (exit 1, not 2).
    """


def _storage_error(action: str, uri: str, exc: Exception) -> StorageError:
    lines = str(exc).strip().splitlines()
    return StorageError(f"could not {action} {uri}: {lines[0] if lines else type(exc).__name__}")


def download(uri: str, target: Path) -> None:
    """Copy a remote artifact (file or folder) to a local path; nothing when it does not exist."""
    fs = filesystem(uri)
    key = remote_key(uri)
    try:
        if not fs.exists(key):
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        if fs.isdir(key):
            fs.get(key.rstrip("/") + "/", str(target), recursive=True)
        else:
            fs.get(key, str(target))
    except Exception as exc:  # s3fs/botocore errors come in many types
        raise _storage_error("download input artifact", uri, exc) from None


def upload(source: Path, uri: str) -> None:
    """Publish a local file or folder at a remote URI; each object appears whole (S3 PUT).

    When it fails, what it had put there is removed again (as far as the store allows).
    """
    fs = filesystem(uri)
    key = remote_key(uri)
    try:
        if source.is_dir():
            fs.put(str(source).rstrip("/") + "/", key, recursive=True)
        else:
            fs.put_file(str(source), key)
    except Exception as exc:  # s3fs/botocore errors come in many types
        try:
            fs.invalidate_cache()
            if fs.exists(key):
                fs.rm(key, recursive=True)
        except Exception:  # noqa: BLE001 - the upload's error is the one to report
            pass
        raise _storage_error("upload output artifact", uri, exc) from None


def remove_uri(uri: str) -> None:
    """Delete whatever is under an artifact URI (used before a task re-runs)."""
    if is_remote(uri):
        fs = filesystem(uri)
        key = remote_key(uri)
        try:
            if fs.exists(key):
                fs.rm(key, recursive=True)
        except Exception as exc:  # s3fs/botocore errors come in many types
            raise _storage_error("remove", uri, exc) from None
    else:
        path = Path(uri)
        if path.exists() or path.is_symlink():
            _remove(path)
