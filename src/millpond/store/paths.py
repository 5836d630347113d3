"""Contained joins: build a path (or URI) under a root from names that came from outside.

Task keys, pipeline names, PVC names and artifact names come from pipeline content, which
anyone who can submit a run controls. A name is not a path: joined naively, ``../../x`` or
``/etc`` leaves the root, and millpond would write there (or ``move_into_place`` would delete
what it finds there). Validation refuses such names before a run; these functions are the
second line of defence, so no caller can be tricked into leaving its root, now or later.

The check is lexical: every segment must be a plain name (not empty, not ``.`` or ``..``, no
NUL, no backslash) and the result must lie strictly below the root. Symbolic links a user
placed inside a root on purpose (a volume linked in by hand) are trusted and not resolved.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath

from millpond.errors import UserError

# Most filesystems refuse longer file names (ext4, xfs, tmpfs, overlayfs: 255 bytes).
MAX_SEGMENT_BYTES = 255


class UnsafePath(UserError):
    """A name would build a path outside its root (or one no filesystem can hold)."""


def check_segment(segment: str, what: str) -> None:
    """``segment`` may be used as one file or folder name, or raise UnsafePath naming ``what``."""
    problem = segment_problem(segment)
    if problem:
        raise UnsafePath(f"{what} {segment!r}: {problem}")


def segment_problem(segment: str) -> str | None:
    """Why ``segment`` cannot be one file name below a root, or None when it can."""
    if not segment:
        return "an empty name"
    if "\x00" in segment:
        return "contains a NUL byte"
    if "/" in segment or "\\" in segment:
        return "contains a path separator"
    if segment in (".", ".."):
        return "is not a name but a relative path"
    if len(segment.encode("utf-8", errors="surrogatepass")) > MAX_SEGMENT_BYTES:
        return f"longer than {MAX_SEGMENT_BYTES} bytes"
    return None


def _segments(relative: str, what: str) -> list[str]:
    """The segments of a relative path such as a task path (``for-loop-2/iteration-0/train``).

    Empty segments (``a//b``, a trailing ``/``) are dropped, as the filesystem would; nothing else is.
    """
    if relative.startswith("/"):
        raise UnsafePath(f"{what} {relative!r}: an absolute path, expected a name")
    segments = [segment for segment in relative.split("/") if segment] or [""]
    for segment in segments:
        problem = segment_problem(segment)
        if problem:
            inside = "" if segment == relative else f" (segment {segment!r})"
            raise UnsafePath(f"{what} {relative!r}{inside}: {problem}")
    return segments


def contained_path(root: Path | str, *relatives: str, what: str = "name") -> Path:
    """``root/relative/...``, refused unless every part is a plain relative name below ``root``.

    Each ``relative`` may hold several ``/``-separated segments (a task path); ``what`` names
    the field in the error (``task``, ``pipeline name``, ``PVC name``).
    """
    base = Path(os.path.normpath(os.fspath(root)))
    segments = [segment for relative in relatives for segment in _segments(relative, what)]
    joined = base.joinpath(*segments)
    normal = Path(os.path.normpath(joined))
    if normal == base or base not in normal.parents:
        raise UnsafePath(f"{what} {'/'.join(relatives)!r}: leaves {base}")
    return joined


def contained_uri(root: str, *relatives: str, what: str = "name") -> str:
    """``root/relative/...`` for a local path or a remote URI (s3://bucket/prefix), with the same checks."""
    segments = [segment for relative in relatives for segment in _segments(relative, what)]
    joined = "/".join([root.rstrip("/"), *segments])
    if "://" not in root:
        contained_path(root, *segments, what=what)  # the lexical check on a real path as well
    else:
        tail = PurePosixPath(joined.split("://", 1)[1])
        if ".." in tail.parts:
            raise UnsafePath(f"{what} {'/'.join(relatives)!r}: leaves {root}")
    return joined


def task_log_file(logs_dir: Path | str, run_id: str, task_path: str) -> Path:
    """``<logs>/<run id>/<task path with '.' for '/'>.log``.

    A name too long for a filesystem is shortened with a digest.
    """
    check_segment(run_id, "run id")
    segments = _segments(task_path, "task")
    name = ".".join(segments) + ".log"
    if len(name.encode("utf-8", errors="surrogatepass")) > MAX_SEGMENT_BYTES:
        digest = hashlib.sha256(task_path.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]
        head = name.encode("utf-8", errors="surrogatepass")[:180].decode("utf-8", errors="ignore")
        name = f"{head}-{digest}.log"
    return contained_path(logs_dir, run_id, name, what="task")
