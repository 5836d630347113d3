"""A field written ``null`` is a field not written, as the API server prunes nulls before it validates:
an MPIJob container with ``command: null`` (upstream examples have them) applies like one without."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

QUEUE = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: nulls
  labels: null
spec:
  clusterQueue: team
  stopPolicy: null
"""


def test_null_fields_are_pruned_before_the_checks(cli: Callable[..., Any], tmp_path: Path) -> None:
    manifest = tmp_path / "queue.yaml"
    manifest.write_text(QUEUE)
    applied = cli("apply", "-f", str(manifest))
    assert applied.code == 0, applied.err
    shown = cli("get", "localqueue", "nulls", "-o", "json").json()
    assert "stopPolicy" not in shown["spec"] and "labels" not in shown["metadata"]
    again = cli("apply", "-f", str(manifest))
    assert again.code == 0 and "unchanged" in again.out
