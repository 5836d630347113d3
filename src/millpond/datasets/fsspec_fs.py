"""``millpond://DATASET/path``: datasets as an fsspec filesystem, so pandas, PyTorch and others read them.

Registered as an fsspec entry point (``fsspec.specs``), so ``fsspec.open("millpond://mnist/x.gz")``
and ``pd.read_csv("millpond://census/adult.csv")`` work once millpond is installed. Reads are
served by the dataset's cache (filled from the UFS on a miss); writes to a ReadWrite dataset
go through to the UFS when the file is closed.
"""

from __future__ import annotations

import datetime
import errno
import io
import os
import tempfile
from pathlib import Path
from typing import Any

from fsspec.spec import AbstractFileSystem

from millpond.datasets.cache.engine import DatasetCache, open_cache


class MillpondFileSystem(AbstractFileSystem):
    """Every applied dataset of this MILLPOND_HOME, by name: ``millpond://NAME/path``."""

    protocol = "millpond"
    root_marker = ""

    def __init__(self, namespace: str = "default", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.namespace = namespace
        self._caches: dict[str, DatasetCache] = {}
        self._home = os.environ.get("MILLPOND_HOME", "")

    # -- paths ----------------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: str | list[str]) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        if path.startswith("millpond://"):
            path = path[len("millpond://"):]
        return path.strip("/")

    def _split(self, path: str) -> tuple[DatasetCache, str]:
        path = self._strip_protocol(path)
        name, _, inner = path.partition("/")
        if not name:
            raise FileNotFoundError(errno.ENOENT, "millpond:// paths start with a dataset name", path)
        home = os.environ.get("MILLPOND_HOME", "")
        if home != self._home:  # fsspec reuses instances; a different home means different datasets
            self._caches, self._home = {}, home
        cache = self._caches.get(name)
        if cache is None or cache._closed:
            cache = self._caches[name] = open_cache(name, self.namespace)
        return cache, inner  # the cache normalizes (and refuses paths that climb out)

    # -- metadata -------------------------------------------------------------------------------

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        cache, inner = self._split(path)
        name = self._strip_protocol(path)
        meta = cache.stat(inner)
        if meta is not None:
            return {"name": name, "size": meta.size, "type": "file", "mtime": meta.mtime, "version": meta.version}
        if cache.is_folder(inner):
            return {"name": name, "size": 0, "type": "directory"}
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        cache, inner = self._split(path)
        base = self._strip_protocol(path)
        names = cache.listdir(inner)
        if names is None:
            if cache.stat(inner) is not None:
                entries = [self.info(path)]
                return entries if detail else [entries[0]["name"]]
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        entries = [self.info(f"{base}/{name}") for name in names]
        return entries if detail else [entry["name"] for entry in entries]

    def ukey(self, path: str) -> str:
        return self.info(path).get("version", "")

    def modified(self, path: str) -> Any:
        return datetime.datetime.fromtimestamp(self.info(path).get("mtime", 0), tz=datetime.timezone.utc)

    # -- reading and writing --------------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Any = None,
        autocommit: bool = True,
        cache_options: Any = None,
        **kwargs: Any,
    ) -> Any:
        cache, inner = self._split(path)
        if "r" in mode:
            return cache.open(inner)
        if "a" in mode or "+" in mode:
            raise NotImplementedError(f"millpond:// files open for reading or writing, not {mode!r}")
        return _WriteThrough(cache, inner)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        cache, inner = self._split(path)
        with cache.open(inner) as reader:
            if start is None and end is None:
                return reader.read()
            size = reader.size
            first = 0 if start is None else (start if start >= 0 else max(0, size + start))
            last = size if end is None else (end if end >= 0 else max(0, size + end))
            return reader.pread(first, max(0, last - first))

    def rm_file(self, path: str) -> None:
        cache, inner = self._split(path)
        cache.remove(inner)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Folders exist by the files in them (as in object storage): nothing to do."""

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """See mkdir."""

    def local_path(self, path: str) -> str | None:
        """The plain local file holding ``path`` when it is completely cached, its bytes checked, else None."""
        cache, inner = self._split(path)
        found = cache.verified_path(inner)
        return str(found) if found else None


class _WriteThrough(io.RawIOBase):
    """A file being written: kept in a temporary file, uploaded to the UFS on close."""

    def __init__(self, cache: DatasetCache, path: str) -> None:
        super().__init__()
        cache.mount_of(path)  # fail now, not at close, for a path outside every mount
        self.cache = cache
        self.path = path
        self._file = tempfile.NamedTemporaryFile(prefix="millpond-write-", delete=False)

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._file.write(data)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._file.close()
            self.cache.write_file(self.path, Path(self._file.name))
        finally:
            os.unlink(self._file.name)
            super().close()

    def discard(self) -> None:
        """Abandon the write (an exception inside ``with``): the UFS is not touched."""
        self._file.close()
        os.unlink(self._file.name)
        io.RawIOBase.close(self)

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is not None:
            self.discard()
        else:
            self.close()
