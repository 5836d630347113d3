"""A downloaded model archive (``.tar.gz``/``.tgz``/``.tar``, ``.zip``) unpacked within limits.

KServe's storage initializer unpacks what it downloads; so does ``model_fetch``. Real models are many
GB, so no fixed small cap fits; what is refused is what no model is and what this machine cannot hold
(:class:`UnpackLimits`, from the settings and the free disk when the fetch starts):

- **a compression ratio that is absurd**: a zip member whose size is more than ``max_ratio`` times
  its compressed size, and a tar stream that decompresses to more than ``max_ratio`` times the
  archive (counted while it is read, headers included, so a GNU long-name or pax header cannot
  balloon either); content below ``RATIO_FLOOR`` is never judged by its ratio (a small config file
  compresses well);
- **more than the home may use**: declared sizes (a zip's directory, a tar member's header) before
  anything is written, and the bytes actually written, against ``max_bytes`` (a share of the free
  disk, or ``MILLPOND_UNPACK_BUDGET``'s byte quantity, never more than is free);
- **more members than** ``max_members``;
- a member whose name leaves the folder (``../x``, ``/etc/x``), a link or a device (``filter="data"``).

A refusal is :class:`ArchiveRefused`, one line naming the limit; ``model_fetch`` makes it the fetch's
``ModelLoadFailed`` and removes the partial folder, so no half-unpacked model stays behind.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from millpond.errors import MillpondError
from millpond.settings import Settings, load_settings
from millpond.store.paths import UnsafePath, contained_path

RATIO_FLOOR = 16 * 2**20  # content this small is never refused for its ratio
MAX_MEMBERS = 100_000
_CHUNK = 1 << 20


class ArchiveRefused(MillpondError):
    """The archive is beyond a limit, unreadable, or names a path outside its folder (one line, no URI)."""


@dataclass(frozen=True)
class UnpackLimits:
    """What one fetch may write: ``max_bytes`` in all, ``max_ratio`` of compression, ``max_members`` files.
    ``budget`` says where ``max_bytes`` comes from, for messages."""

    max_bytes: int
    max_ratio: int
    max_members: int = MAX_MEMBERS
    budget: str = ""

    def check_bytes(self, what: str, size: int) -> None:
        if size > self.max_bytes:
            raise ArchiveRefused(f"{what} {_size(size)}, more than the {_size(self.max_bytes)} a model may take "
                                 f"here ({self.budget or 'the budget'})")

    def check_ratio(self, what: str, size: int, compressed: int) -> None:
        if size > max(RATIO_FLOOR, self.max_ratio * compressed):
            raise ArchiveRefused(f"{what} {_size(size)} from {_size(compressed)} "
                                 f"({size // max(compressed, 1)}:1), beyond the {self.max_ratio}:1 compression "
                                 "ratio a model archive may have (MILLPOND_UNPACK_MAX_RATIO)")

    def check_members(self, name: str, count: int) -> None:
        if count > self.max_members:
            raise ArchiveRefused(f"{name} holds more than {self.max_members} members, more than a model archive "
                                 "may have")

    def less(self, used: int) -> UnpackLimits:
        """What is left once ``used`` bytes are taken (the downloaded archive itself, while it unpacks)."""
        return UnpackLimits(max(0, self.max_bytes - used), self.max_ratio, self.max_members,
                            f"{self.budget}, less the {_size(used)} archive")


def limits_for(folder: Path, settings: Settings | None = None) -> UnpackLimits:
    """The limits of a fetch into ``folder`` now: the settings' budget of its file system's free space."""
    settings = settings or load_settings()
    free = shutil.disk_usage(folder).free
    share = int(free * settings.unpack_free_share)
    explicit = settings.unpack_max_bytes
    if explicit is not None and explicit < share:
        budget = f"MILLPOND_UNPACK_BUDGET={_size(explicit)}"
        return UnpackLimits(explicit, settings.unpack_max_ratio, budget=budget)
    budget = f"{settings.unpack_free_share:.0%} of the {_size(free)} free on {folder.parent}; MILLPOND_UNPACK_BUDGET"
    return UnpackLimits(share, settings.unpack_max_ratio, budget=budget)


def unpack_zip(archive: Path, into: Path, limits: UnpackLimits) -> None:
    """Every member of ``archive`` into ``into``, after its directory was checked against ``limits``."""
    name = archive.name
    compressed = archive.stat().st_size
    try:
        with zipfile.ZipFile(archive) as zipped:
            members = zipped.infolist()
            limits.check_members(name, len(members))
            limits.check_bytes(f"{name} unpacks to", sum(m.file_size for m in members))
            limits.check_ratio(f"{name} unpacks to", sum(m.file_size for m in members), compressed)
            for member in members:  # a member's sizes are in the directory: judged before anything is written
                limits.check_ratio(f"{name}: {member.filename} unpacks to", member.file_size, member.compress_size)
            written = 0
            for member in members:
                target = _inside(into, member.filename)
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zipped.open(member) as source, open(target, "wb") as out:
                    while chunk := source.read(_CHUNK):  # zipfile stops at the declared size; counted anyway
                        written += len(chunk)
                        limits.check_bytes(f"{name} unpacks to at least", written)
                        out.write(chunk)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
        raise ArchiveRefused(f"not a readable zip archive: {_one_line(exc)}") from None
    archive.unlink()


def unpack_tar(archive: Path, into: Path, limits: UnpackLimits) -> None:
    """Every member of the (gzip, bzip2, xz or plain) tar ``archive`` into ``into``, read once as a stream:
    the decompressed bytes are counted as they are read and each member's declared size is judged before
    it is written."""
    name = archive.name
    compressed = archive.stat().st_size
    try:
        with _decompressed(archive) as raw:
            stream = _Counted(raw, name, compressed, limits)
            with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]  # stream: read() only
                count = declared = 0
                for member in tar:
                    count += 1
                    limits.check_members(name, count)
                    declared += member.size
                    limits.check_bytes(f"{name}: up to {member.name} unpacks to", declared)
                    limits.check_ratio(f"{name}: up to {member.name} unpacks to", declared, compressed)
                    _inside(into, member.name)
                    tar.extract(member, into, filter="data")  # no links out, no devices, no absolute names
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:
        raise ArchiveRefused(f"not a readable tar archive: {_one_line(exc)}") from None
    archive.unlink()


def _decompressed(archive: Path) -> io.BufferedIOBase:
    """The archive's bytes, decompressed as its first bytes say (gzip, bzip2, xz), else as they are."""
    with open(archive, "rb") as probe:
        magic = probe.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(archive, "rb")
    if magic.startswith(b"BZh"):
        return bz2.open(archive, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(archive, "rb")
    return open(archive, "rb")


class _Counted:
    """A reader that refuses to hand out more decompressed bytes than the ratio and the budget allow."""

    def __init__(self, source: io.BufferedIOBase, name: str, compressed: int, limits: UnpackLimits) -> None:
        self.source, self.name, self.compressed, self.limits = source, name, compressed, limits
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.source.read(_CHUNK if size is None or size < 0 else size)
        self.read_bytes += len(chunk)
        self.limits.check_ratio(f"{self.name} decompresses to more than", self.read_bytes, self.compressed)
        self.limits.check_bytes(f"{self.name} decompresses to more than", self.read_bytes)
        return chunk


def _inside(into: Path, relative: str) -> Path:
    try:
        return contained_path(into, relative.rstrip("/"), what="model file")
    except UnsafePath as exc:
        raise ArchiveRefused(str(exc)) from None


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
