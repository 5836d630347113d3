"""The FUSE mount of a dataset: POSIX reads for code that only knows paths.

``millpond dataset mount NAME DIR`` starts this module as a background process and returns
once DIR is mounted. Reads are served by the dataset's cache (lazily filled from the UFS);
the kernel keeps file pages between opens (``kernel_cache``) and caches names and attributes
for the metadata TTL; a ReadOnly mount also declines ``open`` and ``flush`` (FUSE's no_open and
no_flush), so a warm file is opened, read and closed at page-cache speed without a round trip
to Python. A mount lives for hours while
other processes load, repair, replace and clean the cache files it holds open: every read it
serves checks the file it reads from (see ``cache/reader.py``), so it serves only true bytes.
A ReadWrite dataset accepts new files: each is written to a temporary file and uploaded to
the UFS when closed (write-through), then cached.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import stat
import sys
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from millpond.datasets.cache.engine import DatasetCache, open_cache
from millpond.datasets.cache.reader import CachedFile
from millpond.datasets.ufs import UfsError

log = logging.getLogger("millpond.fuse")
# A ReadOnly mount pins the files read most recently (the kernel does not tell when a reader
# closes them): eviction skips these, and a file evicted later is fetched again transparently.
PINNED_READERS = 256
HIT_REPORT_BYTES = 16 << 20  # a kept reader reports its cache hits this often, not only when closed
MAX_READ = 1 << 20  # bytes per FUSE read request (the kernel default, 128 KiB, costs 8x the round trips)
# libfuse 3's readdir flags (fuse.h): the kernel asked for READDIRPLUS; the filler's stat is complete.
READDIR_PLUS = 1
FILL_DIR_PLUS = 2
CAP_READDIRPLUS_AUTO = 1 << 14  # fuse_common.h: READDIRPLUS only for a listing's first request


def _operations_base() -> type:
    import mfusepy  # noqa: PLC0415 - FUSE only when mounting

    return mfusepy.Operations


def _fuse_class() -> type:
    """mfusepy's FUSE, its readdir answering READDIRPLUS with every entry's attributes.

    Listing a folder then gives the kernel each name's inode and attributes, cached for the
    metadata TTL like a LOOKUP's: a reader opening the folder's files one by one after the
    listing (a training loop; the first epoch after the kernel dropped its caches) costs no
    LOOKUP round trip into Python per file. mfusepy passes no attributes (flags 0), and
    libfuse 3.14 sends a listing's attributes only when the entries carry offsets, so this
    readdir fills them itself from ``listing`` (name, attributes), an offset per entry.
    """
    import mfusepy  # noqa: PLC0415 - FUSE only when mounting

    class DatasetFUSE(mfusepy.FUSE):
        def readdir_fuse_3(self, path: bytes | None, buf: Any, filler: Any, offset: int, fip: Any, flags: int) -> int:
            inner = "" if path is None else path.decode(self.encoding, self.errors)
            plus = FILL_DIR_PLUS if flags & READDIR_PLUS else 0
            st = mfusepy.c_stat()
            entries = self.operations.listing(inner, fip.contents.fh, offset)
            for position, (name, attrs) in enumerate(entries, start=offset + 1):
                ctypes.memset(ctypes.byref(st), 0, ctypes.sizeof(st))
                mfusepy.set_st_attrs(st, attrs, use_ns=True)
                if filler(buf, name.encode(self.encoding, self.errors), st, position, plus) != 0:
                    break  # the kernel's buffer is full: it asks again from the next offset
            return 0

    return DatasetFUSE


class _Upload:
    """A file being written through the mount: a temporary file until release uploads it."""

    def __init__(self, path: str, source: CachedFile | None) -> None:
        self.path = path
        self.file = tempfile.NamedTemporaryFile(prefix="millpond-fuse-", delete=False)
        if source is not None:
            with source:
                while chunk := source.read(8 << 20):
                    self.file.write(chunk)
        self.dirty = source is None
        self.handle = 0


def make_operations(cache: DatasetCache) -> Any:
    """The FUSE callbacks over one DatasetCache (a class made here so mfusepy is imported only when mounting)."""
    import mfusepy  # noqa: PLC0415 - FUSE only when mounting

    fuse_error = mfusepy.FuseOSError
    read_only = cache.config.read_only
    file_mode = stat.S_IFREG | (0o444 if read_only else 0o644)
    folder_mode = stat.S_IFDIR | (0o555 if read_only else 0o755)
    uid, gid = os.getuid(), os.getgid()

    class DatasetOperations(_operations_base()):  # type: ignore[misc]  # mfusepy is imported late and untyped
        use_ns = True

        def __init__(self) -> None:
            self.handles: dict[int, CachedFile | _Upload] = {}
            self.next_handle = 1
            self._mutex = threading.Lock()
            self.folders: set[str] = set()  # made by mkdir, not yet holding files (object stores have no folders)
            self.readers: OrderedDict[str, CachedFile] = OrderedDict()
            self.uploads: dict[str, _Upload] = {}  # files being written, by path: stat sees them before release
            self.listings: dict[int, list[tuple[str, dict[str, Any]]]] = {}  # open folders' entries, by handle

        def _keep(self, handle: CachedFile | _Upload) -> int:
            with self._mutex:
                number = self.next_handle
                self.next_handle += 1
                self.handles[number] = handle
                if isinstance(handle, _Upload):
                    handle.handle = number
                    self.uploads[handle.path] = handle
            return number

        def init_with_config(self, conn: Any, config: Any) -> None:
            """Ask for 1 MiB requests: with the default 128 KiB a large file costs 8x the round trips."""
            if conn is not None:
                conn.max_readahead = MAX_READ
                conn.max_write = MAX_READ  # libfuse derives the kernel's max_pages (read size too) from it
                conn.want &= ~CAP_READDIRPLUS_AUTO  # every page of a listing carries its attributes

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            return self._attrs(path.strip("/"), fh)

        def _attrs(self, inner: str, fh: int | None = None) -> dict[str, Any]:
            """A path's attributes, for GETATTR and for each entry of a READDIRPLUS; ENOENT if none."""
            if inner in self.uploads and not fh:
                fh = self.uploads[inner].handle
            try:
                meta = cache.stat(inner)
            except UfsError as exc:
                log.error("%s", exc)
                raise fuse_error(errno.EIO) from None
            if meta is not None:
                mtime = int(meta.mtime * 1e9)
                return {"st_mode": file_mode, "st_nlink": 1, "st_size": meta.size, "st_uid": uid, "st_gid": gid,
                        "st_mtime": mtime, "st_atime": mtime, "st_ctime": mtime, "st_blocks": -(-meta.size // 512)}
            upload = self.handles.get(fh) if fh else None
            if not isinstance(upload, _Upload):
                upload = self.uploads.get(inner)
            if isinstance(upload, _Upload):
                if upload.file.closed:
                    size = os.path.getsize(upload.file.name)
                else:
                    size = os.fstat(upload.file.fileno()).st_size
                return {"st_mode": file_mode, "st_nlink": 1, "st_size": size, "st_uid": uid, "st_gid": gid}
            if cache.is_folder(inner) or inner in self.folders:
                return {"st_mode": folder_mode, "st_nlink": 2, "st_uid": uid, "st_gid": gid}
            raise fuse_error(errno.ENOENT)

        def readdir(self, path: str, fh: int) -> list[str]:
            inner = path.strip("/")
            names = cache.listdir(inner)
            if names is None:
                if inner in self.folders:
                    return [".", ".."]
                raise fuse_error(errno.ENOENT)
            made = [
                f.rsplit("/", 1)[-1] for f in self.folders
                if f.rpartition("/")[0] == inner and f.rsplit("/", 1)[-1] not in names
            ]
            return [".", "..", *names, *made]

        def opendir(self, path: str) -> int:
            with self._mutex:
                number = self.next_handle
                self.next_handle += 1
            return number

        def listing(self, path: str, fh: int, offset: int) -> list[tuple[str, dict[str, Any]]]:
            """A folder's entries from ``offset`` on, with attributes: taken when a listing starts
            (offset 0, as a rewinddir) and kept for its handle, so the kernel's next requests, a
            page of entries each, continue the same listing."""
            if offset == 0 or fh not in self.listings:
                inner = path.strip("/")
                entries = []
                for name in self.readdir(path, fh):
                    try:
                        attrs = self._attrs(inner) if name in (".", "..") else self._attrs(
                            f"{inner}/{name}" if inner else name)
                    except fuse_error:
                        continue  # gone since the names were listed
                    entries.append((name, attrs))
                with self._mutex:
                    self.listings[fh] = entries
            return self.listings[fh][offset:]

        def releasedir(self, path: str, fh: int) -> int:
            with self._mutex:
                self.listings.pop(fh, None)
            return 0

        def _reader(self, path: str) -> CachedFile:
            """The pinned reader of a ReadOnly dataset's file, kept while it is among the recently read
            and the file is as listed when it was opened: once the metadata TTL brings a new listing
            with the file changed in the UFS, the kernel drops its pages and reads again, and is
            answered from a reader of the new version (the old one would fail: not the listed size)."""
            meta = cache.stat(path)
            with self._mutex:
                reader = self.readers.get(path)
                if reader is not None and reader.meta == meta:
                    self.readers.move_to_end(path)
                    return reader
            reader = cache.open(path)
            with self._mutex:
                stale = self.readers.pop(path, None)
                self.readers[path] = reader
                while len(self.readers) > PINNED_READERS:
                    _, old = self.readers.popitem(last=False)
                    old.close()
            if stale is not None:
                stale.close()
            return reader

        def open(self, path: str, flags: int) -> int:
            inner = path.strip("/")
            writing = flags & (os.O_WRONLY | os.O_RDWR)
            if writing and read_only:
                raise fuse_error(errno.EROFS)
            if read_only:
                # The kernel then stops sending open/release for this mount (FUSE's no_open) and
                # serves warm files from its page cache without a round trip to Python.
                if cache.stat(inner) is None:
                    raise fuse_error(errno.ENOENT)
                raise fuse_error(errno.ENOSYS)
            try:
                if writing:
                    source = None if flags & os.O_TRUNC else cache.open(inner)
                    return self._keep(_Upload(inner, source))
                return self._keep(cache.open(inner))
            except FileNotFoundError:
                raise fuse_error(errno.ENOENT) from None
            except UfsError as exc:
                log.error("%s", exc)
                raise fuse_error(errno.EIO) from None

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            if read_only:
                raise fuse_error(errno.EROFS)
            try:
                cache.mount_of(path.strip("/"))
            except FileNotFoundError:
                raise fuse_error(errno.EACCES) from None
            return self._keep(_Upload(path.strip("/"), None))

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            handle = self.handles.get(fh) if fh else None
            try:
                if handle is None and read_only:
                    reader = self._reader(path.strip("/"))
                    data = reader.pread(offset, size)
                    if reader._hits > HIT_REPORT_BYTES:
                        reader.report_hits()
                    return data
                if isinstance(handle, CachedFile):
                    return handle.pread(offset, size)
                if isinstance(handle, _Upload):
                    return os.pread(handle.file.fileno(), size, offset)
            except UfsError as exc:
                log.error("%s", exc)
                raise fuse_error(errno.EIO) from None
            raise fuse_error(errno.EBADF)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            handle = self.handles.get(fh)
            if not isinstance(handle, _Upload):
                raise fuse_error(errno.EBADF)
            handle.dirty = True
            return os.pwrite(handle.file.fileno(), data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            if read_only:
                raise fuse_error(errno.EROFS)
            handle = self.handles.get(fh) if fh else None
            if isinstance(handle, _Upload):
                handle.dirty = True
                os.ftruncate(handle.file.fileno(), length)
                return
            upload = _Upload(path.strip("/"), cache.open(path.strip("/")) if length else None)
            os.ftruncate(upload.file.fileno(), length)
            upload.dirty = True
            self._finish(upload)

        def _upload(self, upload: _Upload) -> None:
            """Send the written file to the UFS (on flush: close() returns only once it is there)."""
            if not upload.dirty:
                return
            try:
                upload.file.flush()
                cache.write_file(upload.path, Path(upload.file.name))
                upload.dirty = False
            except (UfsError, PermissionError) as exc:
                log.error("%s", exc)
                raise fuse_error(errno.EIO) from None

        def flush(self, path: str, fh: int) -> int:
            if read_only:
                # Nothing to flush, ever: ENOSYS makes the kernel stop sending FLUSH on every close()
                # (FUSE's no_flush), one round trip to Python less per file a training loop opens.
                raise fuse_error(errno.ENOSYS)
            handle = self.handles.get(fh)
            if isinstance(handle, _Upload):
                self._upload(handle)
            return 0

        def _finish(self, upload: _Upload) -> None:
            try:
                self._upload(upload)
            finally:
                upload.file.close()
                os.unlink(upload.file.name)
                with self._mutex:
                    if self.uploads.get(upload.path) is upload:
                        del self.uploads[upload.path]

        def release(self, path: str, fh: int) -> int:
            with self._mutex:
                handle = self.handles.pop(fh, None)
            if isinstance(handle, CachedFile):
                handle.close()
            elif isinstance(handle, _Upload):
                self._finish(handle)
            return 0

        def unlink(self, path: str) -> None:
            if read_only:
                raise fuse_error(errno.EROFS)
            try:
                cache.remove(path.strip("/"))
            except (UfsError, FileNotFoundError) as exc:
                log.error("%s", exc)
                raise fuse_error(errno.EIO) from None

        def mkdir(self, path: str, mode: int) -> None:
            if read_only:
                raise fuse_error(errno.EROFS)
            self.folders.add(path.strip("/"))

        def rmdir(self, path: str) -> None:
            inner = path.strip("/")
            if cache.listdir(inner):
                raise fuse_error(errno.ENOTEMPTY)
            self.folders.discard(inner)

        def utimens(self, path: str, times: Any = None) -> int:
            return 0  # object stores keep their own times

        def chmod(self, path: str, mode: int) -> int:
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            return 0

        def statfs(self, path: str) -> dict[str, int]:
            stats = cache.stats()
            block = 4096
            total = max(stats.capacity, stats.ufs_total) // block
            return {"f_bsize": block, "f_frsize": block, "f_blocks": total, "f_bfree": 0, "f_bavail": 0,
                    "f_files": stats.file_num, "f_ffree": 0, "f_namemax": 255}

    return DatasetOperations()


def serve(name: str, mountpoint: str, namespace: str = "default") -> None:
    """Mount ``name`` at ``mountpoint`` and serve until unmounted (runs in the foreground)."""
    cache = open_cache(name, namespace)
    cache.namespace()  # list the UFS before mounting: a bad mount fails here, visibly
    ttl = cache.config.metadata_ttl_s
    timeout = 3600.0 if ttl == float("inf") else max(1.0, min(ttl, 3600.0))
    operations = make_operations(cache)
    try:
        _fuse_class()(
            operations, mountpoint, foreground=True, nothreads=False, ro=cache.config.read_only,
            fsname=f"millpond:{name}", subtype="millpond", kernel_cache=True,
            attr_timeout=timeout, entry_timeout=timeout, negative_timeout=min(timeout, 5.0),
            default_permissions=True, allow_other=os.getuid() == 0,
        )
    finally:
        cache.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m millpond.datasets.fuse_mount NAME DIR [NAMESPACE]``: what ``dataset mount`` runs."""
    args = argv if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    name, mountpoint = args[0], args[1]
    namespace = args[2] if len(args) > 2 else "default"
    try:
        serve(name, mountpoint, namespace)
    except Exception as exc:  # noqa: BLE001 - the parent shows this line to the user
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
