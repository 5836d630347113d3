"""The text of a compiled KFP v1 package: a ``.yaml`` file, or the ``pipeline.yaml`` of a ``.tar.gz``/``.zip``.

``dsl-compile --output pipeline.tar.gz`` (seed 002) writes a gzipped tar holding one member,
``pipeline.yaml``; ``.zip`` holds the same. The archive is read in memory, never extracted, yet
is refused when a member's name plays path tricks (absolute, ``..``, a link or device), because
such an archive was not made by kfp and whoever unpacks it next could be hurt. Sizes are bounded
before anything is decompressed in full: the archive itself, the member count, the member's
size (as declared and as read, a gzip bomb stops at the limit).
"""

from __future__ import annotations

import gzip
import io
import posixpath
import tarfile
import zipfile
from pathlib import Path

from millpond.documents import MAX_TEXT_CHARS
from millpond.errors import UserError

MAX_PACKAGE_BYTES = MAX_TEXT_CHARS  # the compressed file; the server's upload limit is the same 32 MiB
MAX_MEMBER_BYTES = MAX_TEXT_CHARS  # the pipeline.yaml inside, decompressed
MAX_UNPACKED_BYTES = 2 * MAX_TEXT_CHARS  # all of a tar's decompressed stream: a gzip bomb stops here
MAX_MEMBERS = 64  # kfp writes one; a few more (a README) are tolerated, thousands are not a package
PIPELINE_MEMBER = "pipeline.yaml"
GZIP_MAGIC, ZIP_MAGIC = b"\x1f\x8b", b"PK\x03\x04"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
YAML_SUFFIXES = (".yaml", ".yml", ".json")


class PackageError(UserError):
    """A package millpond cannot read: not an archive kfp wrote, too large, or without pipeline.yaml."""


def is_archive_name(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def read_package(path: str | Path) -> str:
    """The workflow text of the file at ``path`` (YAML as is, an archive's ``pipeline.yaml``)."""
    file = Path(path)
    if not file.is_file():
        raise PackageError(f"{file}: no such file")
    size = file.stat().st_size
    if size > MAX_PACKAGE_BYTES * (1 if is_archive_name(file.name) else 4):  # text: its UTF-8 worst case
        raise PackageError(f"{file}: larger than {MAX_PACKAGE_BYTES // (1024 * 1024)} MiB")
    data = file.read_bytes()
    if is_archive_name(file.name) or data[:2] == GZIP_MAGIC or data[:4] == ZIP_MAGIC:  # its bytes over its name
        return unpack(data, str(file))
    return _text(data, str(file), MAX_MEMBER_BYTES * 4)


def unpack(data: bytes, source: str) -> str:
    """The ``pipeline.yaml`` text of a gzipped tar or zip archive given as bytes (sniffed, not by name)."""
    if len(data) > MAX_PACKAGE_BYTES:
        raise PackageError(f"{source}: larger than {MAX_PACKAGE_BYTES // (1024 * 1024)} MiB")
    if data[:2] == GZIP_MAGIC:
        return _from_tar(data, source)
    if data[:4] == ZIP_MAGIC:
        return _from_zip(data, source)
    raise PackageError(f"{source}: not a .tar.gz or .zip archive")


def _from_tar(data: bytes, source: str) -> str:
    try:
        stream = _Bounded(gzip.GzipFile(fileobj=io.BytesIO(data)), MAX_UNPACKED_BYTES, source)
        with tarfile.open(fileobj=stream, mode="r|") as archive:  # a stream: nothing seeks back
            chosen: tarfile.TarInfo | None = None
            content = b""
            count = 0
            for member in archive:  # streamed: a huge member count stops at the limit
                count += 1
                if count > MAX_MEMBERS:
                    raise PackageError(f"{source}: more than {MAX_MEMBERS} members, not a kfp package")
                _check_name(member.name, source)
                if not (member.isfile() or member.isdir()):
                    raise PackageError(f"{source}: member {member.name[:80]!r} is a link or device, not a file")
                if member.isfile() and _is_pipeline(member.name):
                    if chosen is not None:
                        raise PackageError(f"{source}: more than one {PIPELINE_MEMBER}")
                    chosen = member
                    if member.size > MAX_MEMBER_BYTES:
                        raise PackageError(f"{source}: {member.name} is larger than {_mib(MAX_MEMBER_BYTES)}")
                    extracted = archive.extractfile(member)
                    content = extracted.read(MAX_MEMBER_BYTES + 1) if extracted else b""
            if chosen is None:
                raise PackageError(f"{source}: no {PIPELINE_MEMBER} in the archive")
    except PackageError:
        raise
    except Exception as exc:  # TarError, EOFError, zlib.error, OSError: a corrupt or truncated stream
        raise PackageError(f"{source}: not a readable .tar.gz ({type(exc).__name__})") from None
    return _text(content, f"{source}:{chosen.name}")


def _from_zip(data: bytes, source: str) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS:
                raise PackageError(f"{source}: more than {MAX_MEMBERS} members, not a kfp package")
            chosen: zipfile.ZipInfo | None = None
            for info in infos:
                _check_name(info.filename, source)
                mode = (info.external_attr >> 16) & 0o170000
                if mode and mode not in (0o100000, 0o040000):  # a symlink or device stored with its Unix mode
                    raise PackageError(f"{source}: member {info.filename[:80]!r} is a link or device, not a file")
                if not info.is_dir() and _is_pipeline(info.filename):
                    if chosen is not None:
                        raise PackageError(f"{source}: more than one {PIPELINE_MEMBER}")
                    chosen = info
            if chosen is None:
                raise PackageError(f"{source}: no {PIPELINE_MEMBER} in the archive")
            if chosen.file_size > MAX_MEMBER_BYTES:
                raise PackageError(f"{source}: {chosen.filename} is larger than {_mib(MAX_MEMBER_BYTES)}")
            with archive.open(chosen) as member:
                content = member.read(MAX_MEMBER_BYTES + 1)
    except PackageError:
        raise
    except Exception as exc:  # BadZipFile, zlib.error, NotImplementedError (an unknown compression), ...
        raise PackageError(f"{source}: not a readable .zip ({type(exc).__name__})") from None
    return _text(content, f"{source}:{chosen.filename}")


class _Bounded(io.RawIOBase):
    """A read-only stream that refuses to give more than ``limit`` bytes (a gzip bomb's end)."""

    def __init__(self, inner: gzip.GzipFile, limit: int, source: str) -> None:
        self.inner, self.limit, self.source, self.given = inner, limit, source, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        chunk = self.inner.read(self.limit + 1 - self.given if size is None or size < 0 else size)
        self.given += len(chunk)
        if self.given > self.limit:
            raise PackageError(f"{self.source}: decompresses to more than {_mib(self.limit)}")
        return chunk


def _is_pipeline(name: str) -> bool:
    """kfp's member is ``pipeline.yaml`` at the top; a single folder around it (zipped by hand) is accepted."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    return bool(parts) and parts[-1] == PIPELINE_MEMBER and len(parts) <= 2


def _check_name(name: str, source: str) -> None:
    shown = name[:80]
    if not name or "\x00" in name or "\\" in name:
        raise PackageError(f"{source}: member name {shown!r} is not a plain relative path")
    if name.startswith("/") or posixpath.isabs(name) or (len(name) > 1 and name[1] == ":"):
        raise PackageError(f"{source}: member {shown!r} has an absolute path")
    if ".." in name.split("/"):
        raise PackageError(f"{source}: member {shown!r} reaches outside the archive ('..')")


def _text(data: bytes, source: str, limit: int = MAX_MEMBER_BYTES) -> str:
    """UTF-8 text; the limit on characters is documents.py's, applied when the YAML is parsed."""
    if len(data) > limit:
        raise PackageError(f"{source}: larger than {_mib(MAX_MEMBER_BYTES)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackageError(f"{source}: not UTF-8 text (byte {exc.start})") from None


def _mib(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB"
