"""Calls to the artifact API of a test server, and a pipeline compiled to a file."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

from kfp import compiler

from tests.server_support import Served, call

API = "/apis/v2beta1"
ROOT = Path(__file__).resolve().parents[2]


def get(server: Served, path: str) -> tuple[int, Any]:
    return call(server.url, "GET", API + path)


def ok(server: Served, path: str) -> dict[str, Any]:
    status, body = get(server, path)
    assert status == 200, body
    return body


def links(server: Served, type: str | None = None, **ids: list[str]) -> list[dict[str, Any]]:  # noqa: A002
    """Every artifact-task link of these ``task_ids``/``run_ids``/``artifact_ids`` (one page of 1000)."""
    query = [(key, value) for key, values in ids.items() for value in values] + [("page_size", "1000")]
    if type:
        query.append(("type", type))
    body = ok(server, f"/artifact_tasks?{urllib.parse.urlencode(query)}")
    assert body["next_page_token"] == "" and body["total_size"] == len(body["artifact_tasks"])
    return body["artifact_tasks"]


def filtered(*predicates: dict[str, Any]) -> str:
    return urllib.parse.quote(json.dumps({"predicates": list(predicates)}))


def compiled(pipeline: Any, folder: Path) -> Path:
    package = folder / f"{pipeline.name}.yaml"
    compiler.Compiler().compile(pipeline, str(package))
    return package
