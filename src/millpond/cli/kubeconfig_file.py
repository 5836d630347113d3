"""A kubeconfig's ``millpond`` entries: built, merged into the user's file, and written whole.

A kubeconfig (``clientcmd/api/v1``) holds named ``clusters`` (a server and the CA to trust),
``users`` (credentials), ``contexts`` (a cluster, a user and a namespace) and a
``current-context``. ``millpond kubeconfig`` adds one of each, all three under the context's
name, and follows kubectl's own rules for where (``kubectl config --help``):

- ``$KUBECONFIG`` is a list of files (``:``-separated). An entry is modified in the file that
  already defines it, created in the first file of the list that exists, or, when none exists,
  in the last one. Simplified: the file that defines the *context* decides for all three entries.
- Without ``$KUBECONFIG``: ``~/.kube/config``, created (with its folder) when missing.

Entries of other names are kept as they are, unknown fields included (comments are not: kubectl
drops them too). ``current-context`` changes only when asked (``use``) or when the file had none,
so writing a millpond context never switches a user away from the cluster they work on.

The file is written whole through a temporary file beside it and a rename, mode 0600 (it holds a
token): a failure leaves the old file as it was, never half of a new one.
"""

from __future__ import annotations

import base64
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millpond.documents import dump_yaml, load_yaml_documents
from millpond.errors import UserError

ENTRY_LISTS = ("clusters", "users", "contexts")


@dataclass(frozen=True)
class KubeconfigEntry:
    """What ``millpond kubeconfig`` writes: the ``server`` URL, the CA a client trusts (PEM bytes, or None:
    plain HTTP, or a certificate the system already trusts), the bearer ``token`` (None: the server has
    none), the default ``namespace``, and the ``name`` of the cluster, user and context."""

    name: str
    server: str
    certificate_authority: bytes | None
    token: str | None
    namespace: str = "default"

    def cluster(self) -> dict[str, Any]:
        cluster: dict[str, Any] = {"server": self.server}
        if self.certificate_authority is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.certificate_authority).decode("ascii")
        return {"name": self.name, "cluster": cluster}

    def user(self) -> dict[str, Any]:
        return {"name": self.name, "user": {"token": self.token} if self.token else {}}

    def context(self) -> dict[str, Any]:
        return {"name": self.name, "context": {"cluster": self.name, "user": self.name, "namespace": self.namespace}}


def standalone(entry: KubeconfigEntry) -> dict[str, Any]:
    """A kubeconfig holding only ``entry``, its context current (what ``--print`` shows)."""
    return merged({}, entry, use=True)


def merged(existing: dict[str, Any], entry: KubeconfigEntry, use: bool) -> dict[str, Any]:
    """``existing`` with ``entry``'s cluster, user and context put in (replacing those of its name, in place;
    others kept in order); ``current-context`` set when ``use`` or when ``existing`` had none."""
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "preferences": {}, **existing}
    for key, item in zip(ENTRY_LISTS, (entry.cluster(), entry.user(), entry.context()), strict=True):
        entries = list(document.get(key) or [])
        places = [i for i, old in enumerate(entries) if isinstance(old, dict) and old.get("name") == entry.name]
        if places:
            entries[places[0]] = item
            entries = [old for i, old in enumerate(entries) if i not in places[1:]]
        else:
            entries.append(item)
        document[key] = entries
    if use or not document.get("current-context"):
        document["current-context"] = entry.name
    return document


def target_file(explicit: Path | None, context: str) -> Path:
    """The file to write: ``explicit`` (``--file``), else kubectl's choice in ``$KUBECONFIG``, else ~/.kube/config."""
    if explicit is not None:
        return explicit.expanduser()
    chain = [Path(part).expanduser() for part in os.environ.get("KUBECONFIG", "").split(os.pathsep) if part]
    if not chain:
        return Path.home() / ".kube" / "config"
    for path in chain:
        if _defines_context(path, context):
            return path
    return next((path for path in chain if path.exists()), chain[-1])


def read(path: Path) -> dict[str, Any]:
    """The kubeconfig at ``path`` ({} when missing or empty); one that cannot be read or is no kubeconfig is a
    UserError (and nothing is written over it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # not there (yet): ``write`` says whether it can be
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    documents = [doc for doc in load_yaml_documents(text, str(path)) if doc is not None]
    if not documents:
        return {}
    document = documents[0]
    if len(documents) > 1 or not isinstance(document, dict):
        raise UserError(f"{path}: not a kubeconfig (expected one YAML mapping with clusters, users and contexts)")
    for key in ENTRY_LISTS:
        if not isinstance(document.get(key) or [], list):
            raise UserError(f"{path}: not a kubeconfig ({key} is not a list)")
    return document


def write(path: Path, document: dict[str, Any]) -> Path:
    """Write ``document`` to ``path`` whole (through a temporary file beside it, then a rename), mode 0600;
    a symbolic link is followed, so the file it names is replaced. Returns the file written."""
    target = Path(os.path.realpath(path))
    temporary = target.with_name(f".{target.name}.millpond-{os.getpid()}.tmp")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary.unlink(missing_ok=True)
        with os.fdopen(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "w",
                       encoding="utf-8") as handle:
            handle.write(dump_yaml(document))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    return target


def _defines_context(path: Path, context: str) -> bool:
    try:
        document = read(path)
    except UserError:
        return False
    return any(isinstance(item, dict) and item.get("name") == context for item in document.get("contexts") or [])
