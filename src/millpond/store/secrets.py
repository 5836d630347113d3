"""Secrets and config maps of a millpond home: what kfp-kubernetes reads from a cluster.

A pipeline that uses ``kubernetes.use_secret_as_env`` (or a config map) needs the named
object to exist; here each one is a JSON file ``home/secrets/NAMESPACE/NAME.json`` (or
``home/configmaps/NAMESPACE/NAME.json``): as in Kubernetes, a Secret is an object of one namespace,
and whoever names one (a run, a job, a DataProcess, an InferenceService) finds it in its own
namespace (``in_namespace``). Secrets are 0600 files in 0700 folders and every write is atomic
(a temporary file renamed into place), so a reader never sees half a secret. Names and
keys follow Kubernetes' rules, so a pipeline that works here works on a cluster.
Values never appear in a message this module raises.

A home made before namespaces kept ``home/secrets/NAME.json``: those files move to the ``default``
namespace on first use (``_migrate``), one hard link then one unlink per file, so a process killed
in the middle leaves each secret in its old place or its new one (or both, the same inode), and the
next use finishes the move. Single-user mode keeps today's behaviour for a reader of another namespace
(a run of experiment "My exp" is in namespace ``my-exp``): a name it does not find in its namespace is
looked up in ``default``, where ``millpond secret create`` without ``-n`` puts it. Multi-user mode
never falls back: a run of ``team-a`` naming ``team-b``'s Secret fails with ``secret "x" not found``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Literal

from millpond.errors import NotFoundError, UserError
from millpond.manifest_envelope import check_name
from millpond.settings import multi_user_setting

Kind = Literal["secret", "configmap"]
KINDS: tuple[Kind, ...] = ("secret", "configmap")

DEFAULT_NAMESPACE = "default"  # where ``millpond secret create`` without ``-n`` puts one, and an old home's
_FOLDERS = {"secret": "secrets", "configmap": "configmaps"}
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


class MissingConfig(NotFoundError, KeyError):
    """The named secret or config map does not exist (the message names only kind, name and namespace).

    In ``default`` the words are millpond's as ever (``secret 'x' not found``); in another namespace the
    kubelet's (``secret "x" not found``) with the namespace it was looked up in."""

    def __init__(self, kind: str, name: str, namespace: str = DEFAULT_NAMESPACE) -> None:
        super().__init__(f"{kind} {name!r} not found" if namespace == DEFAULT_NAMESPACE
                         else f'{kind} "{name}" not found in namespace "{namespace}"')
        self.kind = kind
        self.name = name
        self.namespace = namespace

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def check_key(kind: str, key: str) -> None:
    """Keys become file names in a volume: letters, digits, '-', '_' and '.', not '.' or '..'."""
    if not key or len(key) > 253 or not _CONFIG_KEY.fullmatch(key) or key in (".", "..") or key.startswith(".."):
        raise UserError(
            f"invalid {kind} key {key!r}: use letters, digits, '-', '_' and '.' "
            "(not '.', '..' or a leading '..'; at most 253 characters)"
        )


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (expected one of {', '.join(KINDS)})")


Listing = list[tuple[str, str, list[str]]]  # (namespace, name, keys) of each object, never a value


class ConfigStore:
    """Secrets and config maps kept as JSON files in a millpond home, one folder per namespace.

    A store resolves names in its ``namespace`` (``default`` unless made by ``in_namespace``); every
    method takes an explicit ``namespace`` too, for the APIs that name one."""

    def __init__(self, home: Path, namespace: str = DEFAULT_NAMESPACE, fallback: str | None = None) -> None:
        self.home = Path(home)
        self.namespace = namespace
        self.fallback = fallback  # where a name missing from ``namespace`` is looked up (single-user mode)

    def in_namespace(self, namespace: str, multi_user: bool | None = None) -> ConfigStore:
        """The store as a reader of ``namespace`` sees it: its own namespace's objects; in single-user mode
        (``multi_user`` None: MILLPOND_MULTI_USER) also ``default``'s, by a name its namespace lacks."""
        check_name("namespace", namespace)
        shared = not (multi_user_setting() if multi_user is None else multi_user)
        view = copy.copy(self)  # a subclass's state (a batch's planned Secrets) comes along
        view.namespace = namespace
        view.fallback = DEFAULT_NAMESPACE if shared and namespace != DEFAULT_NAMESPACE else None
        return view

    def root(self, kind: str) -> Path:
        """The folder of every namespace's objects of ``kind``."""
        _check_kind(kind)
        return self.home / _FOLDERS[kind]

    def folder(self, kind: str, namespace: str | None = None) -> Path:
        namespace = namespace or self.namespace
        check_name("namespace", namespace)
        return self.root(kind) / namespace

    def _path(self, kind: str, name: str, namespace: str | None) -> Path:
        check_name(kind, name)
        self._migrate(kind)
        return self.folder(kind, namespace) / f"{name}.json"

    def create(self, kind: str, name: str, data: dict[str, str], replace: bool = False,
               namespace: str | None = None) -> None:
        """Store ``data`` under ``name``; an existing one is an error unless ``replace``."""
        path = self._path(kind, name, namespace)
        for key, value in data.items():
            check_key(kind, key)
            if not isinstance(value, str):
                raise UserError(f"{kind} {name!r} key {key!r}: the value must be a string")
        folder = self._ensure_folder(kind, path.parent)
        mode = 0o600 if kind == "secret" else 0o644
        fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"kind": kind, "name": name, "data": dict(sorted(data.items()))}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, mode)
            if replace:
                os.replace(temp, path)
            else:
                try:
                    os.link(temp, path)  # atomic create-if-absent
                except FileExistsError:
                    raise UserError(f"{kind} {name!r} already exists (use --replace to overwrite it)") from None
        finally:
            if os.path.lexists(temp):
                os.unlink(temp)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, str]:
        """The key/value pairs of one object; MissingConfig when there is none by that name.

        Without ``namespace``: in the store's, then (single-user mode) in its fallback."""
        try:
            return self._read(kind, name, namespace or self.namespace)
        except MissingConfig:
            if namespace is not None or not self.fallback:
                raise
            try:
                return self._read(kind, name, self.fallback)
            except MissingConfig:
                pass
            raise MissingConfig(kind, name, self.namespace) from None

    def _read(self, kind: str, name: str, namespace: str) -> dict[str, str]:
        path = self._path(kind, name, namespace)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MissingConfig(kind, name, namespace) from None
        try:
            data = json.loads(text)["data"]
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{kind} {name!r} is damaged ({path}); create it again with --replace") from None
        return {str(k): str(v) for k, v in data.items()}

    def list(self, kind: str, namespace: str | None = None) -> list[tuple[str, list[str]]]:
        """Every object of ``kind`` in a namespace (the store's) as (name, its keys), by name; never the values."""
        namespace = namespace or self.namespace
        return [(name, keys) for _ns, name, keys in self.everywhere(kind, namespace)]

    def everywhere(self, kind: str, namespace: str | None = None) -> Listing:
        """(namespace, name, keys) of every object of ``kind`` (of one namespace when given), in that order."""
        self._migrate(kind)
        root = self.root(kind)
        if not root.is_dir():
            return []
        found: Listing = []
        folders = [root / namespace] if namespace else sorted(p for p in root.iterdir() if p.is_dir())
        for folder in folders:
            if not folder.is_dir() or folder.name.startswith("."):
                continue
            for path in sorted(folder.glob("*.json")):
                if path.name.startswith("."):
                    continue
                try:
                    found.append((folder.name, path.stem, sorted(self._read(kind, path.stem, folder.name))))
                except (MissingConfig, UserError):
                    continue  # removed meanwhile, or not one of ours
        return found

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Remove one object; MissingConfig when there is none by that name."""
        namespace = namespace or self.namespace
        path = self._path(kind, name, namespace)
        try:
            path.unlink()
        except FileNotFoundError:
            raise MissingConfig(kind, name, namespace) from None

    def _migrate(self, kind: str) -> None:
        """Move an old home's ``secrets/NAME.json`` into ``secrets/default/``: idempotent and crash-safe
        (a hard link, then the old name's unlink: every secret has a name at every moment)."""
        root = self.root(kind)
        try:
            old = [p for p in root.glob("*.json") if not p.name.startswith(".") and p.is_file()]
        except OSError:
            return
        if not old:
            return
        target = self._ensure_folder(kind, root / DEFAULT_NAMESPACE)
        for path in old:
            try:
                os.link(path, target / path.name)
            except FileExistsError:
                pass  # moved before, killed before the unlink: the same file
            except FileNotFoundError:
                continue  # another process moved it meanwhile
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def _ensure_folder(self, kind: str, folder: Path) -> Path:
        secret = kind == "secret"
        for made in (folder.parent, folder):
            made.mkdir(parents=True, exist_ok=True, mode=0o700 if secret else 0o777)
            if secret:
                os.chmod(made, 0o700)
        return folder
