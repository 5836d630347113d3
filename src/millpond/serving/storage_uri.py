"""A predictor's ``storageUri``, parsed: where the model's files are and how millpond reaches them.

KServe's storage initializer reads ``gs://``, ``s3://``, ``https://``/``http://``, ``hf://``,
``pvc://CLAIM/path``, ``oci://`` model images, ``hdfs://`` and local paths (``file://`` or a bare
absolute path). millpond reads most of them on this machine: ``s3://`` (and KFP's ``minio://``,
the scheme a run's Model artifact has under a MinIO root) and ``gs://`` through fsspec,
``https://`` by download, ``hf://`` through the Hugging Face hub, ``file://`` and absolute paths as
they are, and ``pvc://NAME/path`` from the millpond Dataset NAME (a PVC is a dataset here, as in
a training job's volumes). A run's Model artifact URI is ``PIPELINE_ROOT/PIPELINE/RUN_ID/TASK/OUTPUT``
(``pipelines.launcher``): an absolute path under a local root, or ``s3://``/``gs://``/``minio://``
under a remote one; both are read as any other URI of that scheme.

``model-registry://[REGISTRY/]MODEL[/VERSION]`` names a version registered in millpond's model registry
(``serving.registry_refs``, as the model registry's KServe storage initializer reads it): resolved to that
version's model artifact URI when the model is fetched, so a version registered later is served then.

``oci://`` (and ``oci+fetch://``) name a container image holding the model, ``hdfs://`` a Hadoop
cluster, a relative path a folder inside the server's image: all are accepted as KServe accepts
them, and :attr:`StorageUri.unreadable` says why millpond cannot fetch them here (the model's
status says it; the manifest is not refused).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from millpond.errors import UserError
from millpond.manifest_envelope import check_name

# scheme → what it is, for messages and for the fetcher to dispatch on.
READABLE = {
    "s3": "an S3 bucket", "minio": "a MinIO bucket (S3)", "gs": "a Google Cloud Storage bucket",
    "https": "an HTTPS download", "http": "an HTTP download", "hf": "a Hugging Face hub repository",
    "pvc": "a millpond dataset (a PVC)", "file": "a local path",
    "model-registry": "a version registered in the model registry",
}
UNREADABLE = {
    "oci": "oci:// model images are pulled by a container runtime, which millpond does not use",
    "oci+fetch": "oci+fetch:// model images are pulled from a container registry, which millpond does not do",
    "hdfs": "hdfs:// needs a Hadoop cluster, which millpond does not reach",
    "webhdfs": "webhdfs:// needs a Hadoop cluster, which millpond does not reach",
    "relative": "a relative path names a folder inside the model server's container image; "
                "write file:///ABSOLUTE/PATH for a folder of this machine",
}
_MAX_LENGTH = 4096


@dataclass(frozen=True)
class StorageUri:
    """One ``storageUri``: the text as written, its scheme, authority (bucket, host, repository owner
    or dataset name) and the path under it (no leading slash; ``""`` for the whole authority).

    ``file://`` and bare absolute paths have ``scheme == "file"``, no authority, and the absolute
    path in :attr:`local_path`.
    """

    uri: str
    scheme: str
    authority: str
    path: str

    @property
    def local_path(self) -> str | None:
        """The absolute local path of a ``file://`` URI (or a bare path), else None."""
        return "/" + self.path if self.scheme == "file" else None

    @property
    def dataset(self) -> str | None:
        """The dataset (PVC) a ``pvc://`` URI names, else None."""
        return self.authority if self.scheme == "pvc" else None

    @property
    def remote(self) -> bool:
        """Fetched over the network (fsspec, HTTP or the hub) rather than read from this machine."""
        return self.scheme in ("s3", "minio", "gs", "https", "http", "hf")

    @property
    def unreadable(self) -> str | None:
        """Why millpond cannot fetch the model from here (an accepted URI), or None when it can."""
        return UNREADABLE.get(self.scheme)

    def describe(self) -> str:
        return READABLE.get(self.scheme) or self.scheme


def parse_storage_uri(text: object, field: str = "storageUri") -> StorageUri:
    """``text`` as a :class:`StorageUri`; UserError (one line, led by ``field``) for one KServe would refuse."""
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"{field}: expected a URI such as s3://bucket/model or pvc://dataset/path")
    if len(text) > _MAX_LENGTH or any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise UserError(f"{field}: not a URI (control characters, or longer than {_MAX_LENGTH} characters)")
    if text.startswith("/"):
        return StorageUri(text, "file", "", _clean(text, field))
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower()
    if not sep:  # KServe takes a path without a scheme as a local one, relative to the server's folder
        return StorageUri(text, "relative", "", text)
    if not scheme:
        raise UserError(f"{field}: {text!r} has no scheme (use s3://, gs://, https://, hf://, pvc://, file:// "
                        "or an absolute path)")
    if scheme in UNREADABLE:
        return StorageUri(text, scheme, rest.split("/", 1)[0], rest.partition("/")[2])
    if scheme not in READABLE:
        schemes = ", ".join(f"{name}://" for name in (*READABLE, *UNREADABLE) if name != "relative")
        raise UserError(f"{field}: unsupported scheme {scheme}:// (KServe reads {schemes} and local paths)")
    if scheme == "file":
        if not rest.startswith("/"):
            raise UserError(f"{field}: {text!r}: file:// takes an absolute path (file:///models/iris)")
        return StorageUri(text, "file", "", _clean(unquote(rest), field))
    if scheme in ("http", "https"):
        parts = urlsplit(text)
        if not parts.hostname:
            raise UserError(f"{field}: {text!r} names no host")
        return StorageUri(text, scheme, parts.netloc, parts.path.lstrip("/"))
    authority, _, path = rest.partition("/")
    if not authority:
        raise UserError(f"{field}: {text!r} names no {_AUTHORITY[scheme]}")
    if scheme == "pvc":
        try:
            check_name("dataset (PVC)", authority)
        except UserError as exc:
            raise UserError(f"{field}: {text!r}: {exc}") from None
    if scheme == "hf" and not path.strip("/"):
        raise UserError(f"{field}: {text!r}: expected hf://OWNER/MODEL[:REVISION]")
    return StorageUri(text, scheme, authority, _clean("/" + path, field) if path.strip("/") else "")


_AUTHORITY = {"s3": "bucket", "minio": "bucket", "gs": "bucket", "hf": "repository owner", "pvc": "dataset (PVC)",
              "model-registry": "registered model"}


def _clean(path: str, field: str) -> str:
    """An absolute path made relative, refusing ``..`` (a model path that climbs out of its root)."""
    if any(part == ".." for part in path.split("/")):
        raise UserError(f"{field}: {path!r}: '..' is not allowed in a model path")
    return posixpath.normpath(path).lstrip("/") if path.strip("/") else ""
