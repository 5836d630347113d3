"""A Dataset's ``mountPoint``: which under file system it names, checked before anything is stored.

Fluid finds a bad mount point when its runtime pods start failing; here it is one line at
``apply`` time naming the field. The schemes are Fluid's own (s3, oss, local, pvc, …) plus
any protocol fsspec can open, since fsspec is how millpond reads an under file system.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from millpond.datasets.fields import show
from millpond.datasets.placeholders import placeholder_message, unfilled
from millpond.errors import UserError
from millpond.manifest_envelope import check_name

BUCKET_SCHEMES = frozenset({"s3", "s3a", "oss", "minio"})
PATH_SCHEMES = frozenset({"file", "local"})
REFERENCE_SCHEME = "dataset"  # Fluid's reference to another namespace's dataset: dataset://NAMESPACE/NAME
NATIVE_SCHEMES = BUCKET_SCHEMES | PATH_SCHEMES | {"http", "https", "pvc", "juicefs", REFERENCE_SCHEME}

# S3's rule for bucket names (OSS and MinIO follow it): 3-63 characters, lowercase, digits, '.', '-'.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True)
class MountPoint:
    """A parsed mount point: ``s3://bucket/prefix`` is scheme ``s3``, netloc ``bucket``, path ``/prefix``."""

    scheme: str
    netloc: str
    path: str
    uri: str

    @property
    def bucket(self) -> str | None:
        """The bucket of an object-store mount point (s3, s3a, oss, minio); None for the others."""
        if self.scheme == "minio":  # minio://HOST:PORT/BUCKET/PATH, as juicefs sync spells it
            return self.path.strip("/").split("/", 1)[0] or None
        if self.scheme in BUCKET_SCHEMES:
            # s3://BUCKET.ENDPOINT/PATH names its endpoint after the bucket (juicefs sync's form)
            return self.netloc.split(".", 1)[0] if self.scheme == "oss" else self.netloc
        return None


def escapes_root(path: str) -> bool:
    """True when a ``..`` segment climbs above the start of ``path`` (``a/../b`` does not; ``../b`` does)."""
    depth = 0
    for segment in path.split("/"):
        if segment == "..":
            depth -= 1
            if depth < 0:
                return True
        elif segment not in ("", "."):
            depth += 1
    return False


def parse_mount_point(uri: str, where: str) -> MountPoint:
    """Parse and check ``uri``; a UserError names ``where`` (the field, e.g. ``spec.mounts[0].mountPoint``)."""

    def fail(problem: str) -> UserError:
        return UserError(f"{where}: {problem}")

    placeholder = unfilled(uri, angle_anywhere=True)
    if placeholder:
        raise fail(placeholder_message(uri, placeholder))
    if "://" not in uri:
        raise fail(f"{show(uri)} is not a URI: expected SCHEME://…, such as s3://bucket/path or local:///data")
    try:
        parts = urlsplit(uri)
    except ValueError as exc:  # a bracketed host that is no IPv6 address, as in s3://[bucket]/
        raise fail(f"{show(uri)} is not a valid URI ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in NATIVE_SCHEMES:
        _check_fsspec_protocol(scheme, fail)
    mount = MountPoint(scheme=scheme, netloc=parts.netloc, path=parts.path, uri=uri)
    if escapes_root(mount.path):
        raise fail(f"{show(uri)}: '..' climbs above the root of the mount point")
    if scheme in BUCKET_SCHEMES:
        bucket = mount.bucket or ""
        if not _BUCKET.fullmatch(bucket) and not (scheme == "s3" and _BUCKET.fullmatch(bucket.split(".", 1)[0])):
            raise fail(
                f"{show(uri)}: {show(bucket)} is not a valid bucket name "
                "(3-63 characters: lowercase letters, digits, '.' and '-', starting and ending with a letter or digit)"
            )
    elif scheme in PATH_SCHEMES:
        if mount.netloc not in ("", "localhost"):
            raise fail(f"{show(uri)}: the path must be absolute, as in {scheme}:///{mount.netloc}{mount.path}")
        if not mount.path.startswith("/"):
            raise fail(f"{show(uri)}: the path must be absolute, as in {scheme}:///data")
    elif scheme == "pvc":
        try:
            check_name("PersistentVolumeClaim", mount.netloc)
        except UserError as exc:
            raise fail(f"{show(uri)}: {exc}") from None
    elif scheme == REFERENCE_SCHEME:
        name = mount.path.strip("/")
        try:
            check_name("Namespace", mount.netloc)
            check_name("Dataset", name)
        except UserError as exc:
            raise fail(f"{show(uri)}: expected dataset://NAMESPACE/NAME ({exc})") from None
        if "/" in name:
            raise fail(f"{show(uri)}: expected dataset://NAMESPACE/NAME (a whole dataset, not a folder of it)")
    elif scheme in ("http", "https") and not mount.netloc:
        raise fail(f"{show(uri)} names no host")
    return mount


def _check_fsspec_protocol(scheme: str, fail: Callable[[str], UserError]) -> None:
    """An fsspec protocol is fine when its implementation imports; otherwise say what to install."""
    from fsspec import get_filesystem_class  # noqa: PLC0415 - fsspec's backends when used
    from fsspec.registry import known_implementations  # noqa: PLC0415 - fsspec's backends when used

    known = known_implementations.get(scheme)
    if known is None:
        names = ", ".join(sorted(NATIVE_SCHEMES))
        raise fail(f"unknown scheme {show(scheme)}: use one of {names}, or a protocol fsspec knows (gs, az, hf, …)")
    try:
        get_filesystem_class(scheme)
    except ImportError:
        package = known["class"].split(".")[0]
        hint = known.get("err") or f"it needs {package}"
        install = f" (pip install {package})" if package != "fsspec" else ""
        raise fail(f"scheme {show(scheme)} needs a package that is not installed: {hint}{install}") from None
