"""The two ends of a DataMigrate: a dataset path, or external storage named by a URI.

External URIs name S3-compatible storage the way ``juicefs sync`` does (``minio://HOST:PORT/
BUCKET/PATH``, ``s3://BUCKET.ENDPOINT/PATH``, ``s3://BUCKET/PATH``, ``oss://BUCKET.ENDPOINT/PATH``)
or anything else a dataset mount may name; credentials come from ``encryptOptions``. Every
file written is checked against what was read (size, and its MD5 where the store reports one).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from typing import Any, Protocol

from millpond.datasets.cache.engine import normalize, open_cache
from millpond.datasets.config import resolve_options
from millpond.datasets.operations.failures import OperationFailed
from millpond.datasets.ufs import S3_SCHEMES, UfsEntry, open_ufs, s3_settings
from millpond.errors import UserError
from millpond.settings import load_settings
from millpond.store.resources import Resource
from millpond.store.secrets import ConfigStore

_MD5 = re.compile(r"^[0-9a-f]{32}$")


class Side(Protocol):
    def describe(self) -> str: ...

    def files(self) -> list[tuple[str, int]]: ...

    def basename(self) -> str: ...

    def read(self, relative: str) -> bytes: ...

    def place(self, relative: str, single: bool, source_name: str) -> str: ...

    def write(self, relative: str, data: bytes) -> None: ...

    def stat(self, relative: str) -> UfsEntry | None: ...

    def finish(self) -> None: ...


class DatasetSide:
    """A path inside a dataset (read from its cache, written through to its UFS)."""

    def __init__(self, name: str, namespace: str, path: str) -> None:
        self.cache = open_cache(name, namespace)
        self.name = name
        self.path = normalize(path)
        self._trailing = path.endswith("/")

    def describe(self) -> str:
        return f"dataset {self.name}:/{self.path}"

    def files(self) -> list[tuple[str, int]]:
        """What is under the path now. The listing is refreshed from the UFS first: a file written by
        another machine (a training instance on a Ray node, writing through its own node's mount)
        is in the UFS but not yet in this machine's listing."""
        self.cache.sync()
        meta = self.cache.stat(self.path)
        if meta is not None:
            return [("", meta.size)]
        prefix = self.path + "/" if self.path else ""
        tree = self.cache.namespace()  # one listing: each path ``under`` names is a key of its files
        return [(p[len(prefix):], tree.files[p].size) for p in tree.under(self.path)]

    def basename(self) -> str:
        return posixpath.basename(self.path)

    def _full(self, relative: str) -> str:
        return posixpath.join(self.path, relative) if relative else self.path

    def read(self, relative: str) -> bytes:
        return self.cache.read_file(self._full(relative))

    def place(self, relative: str, single: bool, source_name: str) -> str:
        if single and (self._trailing or self.cache.is_folder(self.path) or not self.path):
            return source_name
        return relative

    def write(self, relative: str, data: bytes) -> None:
        """Straight to the dataset's UFS (its listing is refreshed once, in ``finish``)."""
        path = self._full(relative)
        mount, key = self.cache.mount_of(path)
        if self.cache.config.mounts[mount].read_only:
            raise OperationFailed(f"{self.describe()}: the dataset is read-only (accessModes)")
        entry = self.cache.ufs(mount).put(key, data)
        _check(entry, data, f"{self.describe()}/{relative}")

    def stat(self, relative: str) -> UfsEntry | None:
        """The file as the dataset's UFS holds it now (size, ETag), or None."""
        mount, key = self.cache.mount_of(self._full(relative))
        return self.cache.ufs(mount).stat(key)

    def finish(self) -> None:
        self.cache.sync()


class ExternalSide:
    """External storage at a URI (a folder-like prefix, or one object)."""

    def __init__(self, uri: str, options: dict[str, str], namespace: str = "default") -> None:
        self.uri = uri
        self.ufs = open_ufs(uri, options, load_settings().volumes_dir, namespace)  # a pvc:// of its namespace
        self._trailing = uri.endswith("/")

    def describe(self) -> str:
        return self.uri

    def files(self) -> list[tuple[str, int]]:
        listed = [(entry.key, entry.size) for entry in self.ufs.list()]
        if listed or self._trailing:
            return listed
        single = self.ufs.stat("")
        return [("", single.size)] if single is not None else []

    def basename(self) -> str:
        return posixpath.basename(self.uri.rstrip("/"))

    def read(self, relative: str) -> bytes:
        return self.ufs.read(relative)

    def place(self, relative: str, single: bool, source_name: str) -> str:
        if single:
            return source_name if self._trailing else ""
        return relative

    def write(self, relative: str, data: bytes) -> None:
        entry = self.ufs.put(relative, data)
        _check(entry, data, f"{self.uri.rstrip('/')}/{relative}" if relative else self.uri)

    def stat(self, relative: str) -> UfsEntry | None:
        """The object as the store holds it now (size, ETag), or None."""
        return self.ufs.stat(relative)

    def finish(self) -> None:
        """Nothing to refresh: external storage has no listing of millpond's."""


def _check(entry: Any, data: bytes, where: str) -> None:
    """The store holds what was sent: the same size, and the same MD5 where it reports one (S3's ETag)."""
    if entry.size != len(data):
        raise OperationFailed(f"{where}: wrote {len(data)} bytes, the store holds {entry.size}")
    if _MD5.match(entry.etag) and entry.etag != hashlib.md5(data).hexdigest():
        raise OperationFailed(f"{where}: the checksum the store reports differs from the data sent")


def open_side(side: dict[str, Any], resource: Resource, where: str) -> Side:
    """The dataset path or external URI that ``spec.from``/``spec.to`` names; OperationFailed if neither."""
    label = f"spec.{where}"
    if side.get("dataset"):
        ref = side["dataset"]
        return DatasetSide(
            str(ref["name"]), str(ref.get("namespace") or resource.namespace), str(ref.get("path") or "/")
        )
    external = side.get("externalStorage")
    if not external or not external.get("uri"):
        raise OperationFailed(f"{label}: needs a dataset or an externalStorage with a uri")
    uri = str(external["uri"])
    try:
        own = ConfigStore(load_settings().home).in_namespace(resource.namespace)  # its namespace's Secrets
        options = resolve_options(external, {}, own, label)
    except UserError as exc:
        raise OperationFailed(str(exc)) from None
    scheme = uri.split("://", 1)[0].lower()
    if scheme in S3_SCHEMES and not _has_credentials(options):
        raise OperationFailed(
            f"{label}: {uri} has no credentials "
            "(add encryptOptions naming a millpond secret with the access and secret keys)"
        )
    return ExternalSide(uri, options, resource.namespace)


def _has_credentials(options: dict[str, str]) -> bool:
    return s3_settings(options).access_key is not None
