"""The files a DataMigrate has copied and verified, so that a resumed one copies only the rest.

When a DataMigrate's process dies mid-copy, ``liveness`` resumes it in a new process, which
skips the files an earlier one finished. A file counts as finished when

- this journal holds it: a line appended only once the target reported the size (and, where
  it reports one, the MD5: S3's ETag) of the bytes sent, which ``transfer`` checks on every write;
- the source lists it now with the size it had then (changed since: copied again);
- the target still reports that size, and that MD5 where it reports one (removed or changed
  there since: copied again).

A file the process was writing when it died is not in the journal and is copied again (a
PUT is all or nothing; a dataset file is rewritten whole). The journal belongs to one object
(its uid) and one run of it: ``start`` forgets it, a migrate that completes removes it.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from millpond.datasets.ufs import UfsEntry
from millpond.settings import load_settings
from millpond.store.resources import Resource

_MD5 = re.compile(r"^[0-9a-f]{32}$")  # an ETag that is the object's MD5 (a single-part upload's)


class Target(Protocol):
    def stat(self, relative: str) -> UfsEntry | None: ...


@dataclass(frozen=True)
class Copy:
    """One file copied and verified: where it went at the target, its size and MD5."""

    target: str
    size: int
    md5: str


def journal_path(resource: Resource) -> Path:
    return load_settings().home / "operations" / (
        f"{resource.namespace}_{resource.kind}_{resource.name}.{resource.uid}.copied"
    )


def forget(resource: Resource) -> None:
    """A fresh run copies everything again (``start``); only a resumed one uses what is recorded."""
    journal_path(resource).unlink(missing_ok=True)


class CopiedFiles:
    """The journal of one DataMigrate: appended to by its copying threads, read when it resumes."""

    def __init__(self, resource: Resource) -> None:
        self.path = journal_path(resource)
        self._lock = threading.Lock()

    def finished(self, files: list[tuple[str, int]], target: Target) -> dict[str, int]:
        """Of the source's ``files`` (relative path, size), those an earlier process finished: path → size."""
        sizes = dict(files)
        found = {}
        for relative, copy in self._read().items():
            if sizes.get(relative) != copy.size:
                continue
            entry = target.stat(copy.target)
            if entry is not None and entry.size == copy.size and (not _MD5.match(entry.etag) or entry.etag == copy.md5):
                found[relative] = copy.size
        return found

    def add(self, relative: str, placed: str, data: bytes) -> None:
        """Record a file written and verified at the target (one line, appended and flushed at once)."""
        line = json.dumps({"source": relative, "target": placed, "size": len(data),
                           "md5": hashlib.md5(data).hexdigest()}) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as journal:
                journal.write(line)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def _read(self) -> dict[str, Copy]:
        try:
            lines = self.path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return {}
        copies = {}
        for line in lines:
            try:
                record = json.loads(line)
                copies[str(record["source"])] = Copy(str(record["target"]), int(record["size"]), str(record["md5"]))
            except (ValueError, KeyError, TypeError):
                continue  # the line a kill cut short
        return copies
