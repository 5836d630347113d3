"""``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``: objects as the rows kubectl prints.

The cells are each family's printer columns (a CRD's ``additionalPrinterColumns``, kubectl's own
printers for the built-in kinds), the same ``millpond get`` prints; each row carries the object's
metadata (``PartialObjectMetadata``) or the whole object, as ``includeObject`` asks. kubectl adds the
NAMESPACE column itself with ``-A``, so the family's table is asked with every namespace and that
column is read off into each row's metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from millpond.kind_handler import Table

_NAME_DESCRIPTION = ("Name must be unique within a namespace. Is required when creating resources, although some "
                     "resources may allow a client to request the generation of an appropriate name automatically.")


def wants_table(accept: str) -> bool:
    return "as=table" in accept.replace(" ", "").lower()


def _column(header: str) -> dict[str, Any]:
    title = " ".join(word.capitalize() for word in header.split())
    column: dict[str, Any] = {"name": title, "type": "string", "format": "", "description": "", "priority": 0}
    if header == "NAME":
        column.update(format="name", description=_NAME_DESCRIPTION)
    elif header == "AGE":
        column["type"] = "date"
    return column


def table(source: Table, objects: Sequence[dict[str, Any]], include: str, resource_version: str,
          cluster_scoped: bool) -> dict[str, Any]:
    """The Table of ``objects`` (already selected) with the cells of the family's ``source`` table."""
    headers = list(source.headers)
    namespaced_rows = headers[:1] == ["NAMESPACE"]
    if namespaced_rows:
        headers = headers[1:]
    cells: dict[tuple[str, str], list[str]] = {}
    for source_row in source.rows:
        namespace, rest = (source_row[0], source_row[1:]) if namespaced_rows else ("", source_row)
        if rest:
            cells[("" if cluster_scoped else namespace, rest[0])] = rest
    rows = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        key = ("" if cluster_scoped else str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        found = cells.get(key)
        row: dict[str, Any] = {"cells": found if found else [key[1], *["<unknown>"] * (len(headers) - 1)]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": [_column(header) for header in headers], "rows": rows}
