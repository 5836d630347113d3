"""Server-side apply (``kubectl apply --server-side``: PATCH ``application/apply-patch+yaml``), with field
managers and conflicts as the API server reports them.

Each manager owns the fields it last applied (``managedFields``, ``fieldsType: FieldsV1``: a tree of
``f:NAME`` keys). An apply sets every field its configuration names; a field another manager owns
with a different value is a conflict (409, one cause per field, ``conflict with "MANAGER" using
VERSION: .spec.x``) unless ``force=true``, which takes it over. Fields the manager applied before
and no longer names are removed when nobody else owns them. Writes that are not applies (a PUT, a
merge patch, ``kubectl edit``) make their ``fieldManager`` (or the client's name) the owner of the
fields they changed, operation ``Update``.

Simplified: lists are atomic (a list is one field, owned whole, as ``x-kubernetes-list-type:
atomic``); the API server merges lists of ``map`` type by key.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Iterator
from typing import Any

from millpond.server.kube.status import KubeError

Path = tuple[str, ...]
# Who owns what of the object's own bookkeeping: never a field a manager can conflict on.
_UNOWNED = {("metadata", "resourceVersion"), ("metadata", "generation"), ("metadata", "uid"),
            ("metadata", "creationTimestamp"), ("metadata", "managedFields"), ("status",), ("apiVersion",), ("kind",),
            ("metadata", "name"), ("metadata", "namespace")}


def leaves(value: Any, prefix: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every owned field of a configuration: a map's keys recursively, a list or scalar as one field."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, (*prefix, str(key)))
    elif prefix and not any(prefix[:len(skip)] == skip for skip in _UNOWNED):
        yield prefix, value


def _get(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


_MISSING = object()


def _set(obj: dict[str, Any], path: Path, value: Any) -> None:
    for part in path[:-1]:
        nxt = obj.get(part)
        if not isinstance(nxt, dict):
            nxt = obj[part] = {}
        obj = nxt
    obj[path[-1]] = copy.deepcopy(value)


def _remove(obj: dict[str, Any], path: Path) -> None:
    parents: list[tuple[dict[str, Any], str]] = []
    for part in path[:-1]:
        nxt = obj.get(part)
        if not isinstance(nxt, dict):
            return
        parents.append((obj, part))
        obj = nxt
    obj.pop(path[-1], None)
    for parent, part in reversed(parents):  # an emptied map goes too
        if parent[part] == {}:
            parent.pop(part)


def fields_v1(paths: list[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return tree


def _paths(tree: dict[str, Any], prefix: Path = ()) -> list[Path]:
    found: list[Path] = []
    for key, sub in tree.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        found.extend(_paths(sub, path) if sub else [path])
    return found


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _owned(managed: list[dict[str, Any]]) -> list[tuple[str, str, set[Path]]]:
    return [(str(entry.get("manager", "")), str(entry.get("operation", "")),
             set(_paths(entry.get("fieldsV1") or {}))) for entry in managed]


def apply(live: dict[str, Any] | None, config: dict[str, Any], managed: list[dict[str, Any]], manager: str,
          force: bool, api_version: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The object after ``manager`` applies ``config`` to ``live`` (None: it is created), and the managers then."""
    applied = dict(leaves(config))
    result = copy.deepcopy(live) if live is not None else {}
    owners = _owned(managed)
    conflicts: list[tuple[str, Path]] = []
    for who, operation, paths in owners:
        if who == manager and operation == "Apply":
            continue
        for path in paths & set(applied):
            current = _get(result, path)
            if current is not _MISSING and current != applied[path]:
                conflicts.append((who, path))
    if conflicts and not force:
        causes = [{"reason": "FieldManagerConflict", "message": f'conflict with "{who}"',
                   "field": "." + ".".join(path)} for who, path in conflicts]
        listed = "\n".join(f'- conflict with "{who}": .{".".join(path)}' for who, path in conflicts)
        raise KubeError(409, f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: "
                             f"{listed}", "Conflict", {"causes": causes})
    mine_before = next((paths for who, op, paths in owners if who == manager and op == "Apply"), set())
    others = set().union(*(paths for who, op, paths in owners if not (who == manager and op == "Apply")))
    for path in mine_before - set(applied) - others:
        _remove(result, path)
    for path, value in applied.items():
        _set(result, path, value)
    for key in ("apiVersion", "kind"):
        result[key] = config.get(key, result.get(key))
    taken = set(applied)
    entries: list[dict[str, Any]] = []
    for entry, (who, operation, paths) in zip(managed, owners, strict=True):
        if who == manager and operation == "Apply":
            continue  # this manager's apply is the new entry below
        left = sorted(paths - taken) if force else sorted(paths)
        if left:
            entries.append({**entry, "fieldsV1": fields_v1(left)})
    entries.append(_entry(manager, "Apply", sorted(taken), api_version))
    return result, entries


def updated(before: dict[str, Any] | None, after: dict[str, Any], managed: list[dict[str, Any]], manager: str,
            api_version: str) -> list[dict[str, Any]]:
    """The managers after a write that is not an apply: ``manager`` owns the fields it changed (Update)."""
    was = dict(leaves(before or {}))
    changed = {path for path, value in leaves(after) if was.get(path, _MISSING) != value}
    if not changed:
        return managed
    entries: list[dict[str, Any]] = []
    mine: set[Path] = set(changed)
    for entry, (who, operation, paths) in zip(managed, _owned(managed), strict=True):
        if who == manager and operation == "Update":
            mine |= paths
            continue
        left = sorted(paths - changed)
        if left:
            entries.append({**entry, "fieldsV1": fields_v1(left)})
    entries.append(_entry(manager, "Update", sorted(mine), api_version))
    return entries


def _entry(manager: str, operation: str, paths: list[Path], api_version: str) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "apiVersion": api_version, "time": _now(),
            "fieldsType": "FieldsV1", "fieldsV1": fields_v1(paths)}
