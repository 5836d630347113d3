"""Secrets and config maps of a millpond home: what kfp-kubernetes reads from a cluster.

A pipeline that uses ``kubernetes.use_secret_as_env`` (or a config map) needs the named
object to exist; here each one is a JSON file under ``home/secrets/`` or
``home/configmaps/``. Secrets are 0600 files in a 0700 folder and every write is atomic
(a temporary file renamed into place), so a reader never sees half a secret. Names and
keys follow Kubernetes' rules, so a pipeline that works here works on a cluster.
Values never appear in a message this module raises.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Literal

from millpond.errors import NotFoundError, UserError
from millpond.manifest_envelope import check_name

Kind = Literal["secret", "configmap"]
KINDS: tuple[Kind, ...] = ("secret", "configmap")

_FOLDERS = {"secret": "secrets", "configmap": "configmaps"}
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


class MissingConfig(NotFoundError, KeyError):
    """The named secret or config map does not exist (the message names only kind and name)."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"{kind} {name!r} not found")
        self.kind = kind
        self.name = name

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


class ConfigStore:
    """Secrets and config maps kept as JSON files in a millpond home."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)

    def folder(self, kind: str) -> Path:
        _check_kind(kind)
        return self.home / _FOLDERS[kind]

    def _path(self, kind: str, name: str) -> Path:
        check_name(kind, name)
        return self.folder(kind) / f"{name}.json"

    def create(self, kind: str, name: str, data: dict[str, str], replace: bool = False) -> None:
        """Store ``data`` under ``name``; an existing one is an error unless ``replace``."""
        path = self._path(kind, name)
        for key, value in data.items():
            check_key(kind, key)
            if not isinstance(value, str):
                raise UserError(f"{kind} {name!r} key {key!r}: the value must be a string")
        folder = self._ensure_folder(kind)
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

    def get(self, kind: str, name: str) -> dict[str, str]:
        """The key/value pairs of one object; MissingConfig when there is none by that name."""
        path = self._path(kind, name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MissingConfig(kind, name) from None
        try:
            data = json.loads(text)["data"]
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{kind} {name!r} is damaged ({path}); create it again with --replace") from None
        return {str(k): str(v) for k, v in data.items()}

    def list(self, kind: str) -> list[tuple[str, list[str]]]:
        """Every object of ``kind`` as (name, its keys), by name; never the values."""
        folder = self.folder(kind)
        if not folder.is_dir():
            return []
        found: list[tuple[str, list[str]]] = []
        for path in sorted(folder.glob("*.json")):
            if path.name.startswith("."):
                continue
            try:
                found.append((path.stem, sorted(self.get(kind, path.stem))))
            except (MissingConfig, UserError):
                continue  # removed meanwhile, or not one of ours
        return found

    def delete(self, kind: str, name: str) -> None:
        """Remove one object; MissingConfig when there is none by that name."""
        path = self._path(kind, name)
        try:
            path.unlink()
        except FileNotFoundError:
            raise MissingConfig(kind, name) from None

    def _ensure_folder(self, kind: str) -> Path:
        folder = self.folder(kind)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700 if kind == "secret" else 0o777)
        if kind == "secret":
            os.chmod(folder, 0o700)
        return folder
