"""A RayCluster that may not run yet starts no Ray node and says why: suspended by its spec, waiting for its
Kueue queue, or for room on this machine; what ``get -o json`` prints applies back unchanged."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from millpond.kuberay.node_view import ray_nodes
from millpond.settings import load_settings
from tests.kuberay.conftest import wait_for, write

MANIFEST = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: {name}
  labels: {labels}
spec:
  suspend: {suspend}
  headGroupSpec:
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.52.0
          resources:
            requests: {{cpu: "{cpu}", memory: 256Mi}}
"""


def test_a_cluster_that_may_not_run_yet_starts_nothing_and_says_why(home: Path, cli: Callable[..., Any]) -> None:
    files = [write(home.parent, f"{name}.yaml", MANIFEST.format(name=name, labels=labels, suspend=suspend, cpu=cpu))
             for name, labels, suspend, cpu in (
                 ("held", "{}", "true", "100m"),
                 ("queued", "{kueue.x-k8s.io/queue-name: nowhere}", "false", "100m"),
                 ("too-big", "{}", "false", "64"))]
    for manifest in files:
        applied = cli("apply", "-f", manifest)
        assert applied.code == 0, applied.err
    held = wait_for(cli, "raycluster", "held", lambda s: s.get("state") == "suspended", timeout_s=60)
    assert held["reason"] == "spec.suspend is true"
    assert {c["type"]: c["status"] for c in held["conditions"]}["RayClusterSuspended"] == "True"
    queued = wait_for(cli, "raycluster", "queued", lambda s: "Kueue" in (s.get("reason") or ""), timeout_s=60)
    assert queued["state"] == "suspended" and "queue nowhere" in queued["reason"]
    big = wait_for(cli, "raycluster", "too-big", lambda s: "waits for this machine" in (s.get("reason") or ""),
                   timeout_s=60)
    assert "requests 64 CPUs but this machine has" in big["reason"] and "state" not in big
    time.sleep(1.0)
    for name in ("held", "queued"):
        assert ray_nodes(load_settings(), "default", name) == []
    assert [(node.phase, node.pid) for node in ray_nodes(load_settings(), "default", "too-big")] == [("Pending", None)]

    shown = cli("get", "raycluster", "queued", "-o", "json")
    again = write(home.parent, "again.json", json.dumps(json.loads(shown.out)))
    reapplied = cli("apply", "-f", again)
    assert reapplied.code == 0 and "raycluster.ray.io/queued unchanged" in reapplied.out, reapplied.err
    for name in ("held", "queued", "too-big"):
        assert cli("delete", "raycluster", name).code == 0
    assert "No resources found" in cli("get", "rayclusters").err + cli("get", "rayclusters").out
