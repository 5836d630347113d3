"""What cannot run here is refused at apply in one error line, with nothing stored and nothing started; what
is read from a RayCluster's spec follows KubeRay's pod-to-``ray start`` rules. (No Ray process starts here.)"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from millpond.errors import UserError
from millpond.kuberay.specs import capacity_refusal, cluster_spec

CLUSTER = """\
apiVersion: ray.io/v1
kind: {kind}
metadata:
  name: bad
spec:
  headGroupSpec:
    rayStartParams: {head_params}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.52.0
          resources:
            limits: {{cpu: "1", memory: 1Gi}}
  workerGroupSpecs:
  - groupName: workers
    replicas: {replicas}
    minReplicas: {least}
    maxReplicas: {most}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.52.0
          resources:
            limits: {{cpu: "1", memory: 1Gi{extra}}}
"""


def _cluster(kind: str = "RayCluster", head_params: str = "{}", replicas: int = 1, least: int = 1,
             most: int = 5, extra: str = "") -> str:
    return CLUSTER.format(kind=kind, head_params=head_params, replicas=replicas, least=least, most=most, extra=extra)


@pytest.mark.parametrize(("text", "says"), [
    (_cluster(extra=', google.com/tpu: "4"'), "google.com/tpu: a TPU (GKE's TPU slices) cannot exist on this machine"),
    (_cluster(replicas=100000, least=0, most=100000), "replicas 100000: this machine holds at most"),
    (_cluster(head_params='{num-cpus: "100000000"}'), "declares 100000000 CPUs to Ray"),
    (_cluster(replicas=2, least=7), "spec.workerGroupSpecs[0].minReplicas: 7 is more than maxReplicas 5"),
    (_cluster(kind="RayService"), "RayService: Ray Serve applications"),
    ("apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: bad}\nspec:\n  entrypoint: python x.py\n"
     "  shutdownAfterJobFinishes: true\n  clusterSelector: {ray.io/cluster: other}\n",
     "spec.shutdownAfterJobFinishes: not with a clusterSelector"),
    ("apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: bad}\nspec:\n  entrypoint: python x.py\n"
     "  submissionMode: InteractiveMode\n  clusterSelector: {ray.io/cluster: other}\n",
     "spec.submissionMode: 'InteractiveMode'"),
    ("apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: bad}\nspec:\n  clusterSelector: {ray.io/cluster: x}\n",
     "spec.entrypoint: required field is missing"),
])
def test_what_cannot_run_here_is_refused_in_one_line_with_nothing_stored_or_started(
        home: Path, cli: Callable[..., Any], text: str, says: str) -> None:
    manifest = home.parent / "bad.yaml"
    manifest.write_text(text)
    result = cli("apply", "-f", manifest)
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.err
    assert "No resources found" in cli("get", "rayclusters").err + cli("get", "rayclusters").out
    assert "No resources found" in cli("get", "rayjobs").err + cli("get", "rayjobs").out
    assert not (home / "processes").exists() or not list((home / "processes").iterdir())


def test_a_cluster_spec_is_read_as_kuberay_turns_pods_into_ray_start() -> None:
    spec = {
        "headGroupSpec": {"rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"}, "template": {"spec": {
            "containers": [{"name": "ray-head", "resources": {"limits": {"cpu": "2", "memory": "4Gi"},
                                                             "requests": {"cpu": "500m", "memory": "2Gi"}}}]}}},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 9, "minReplicas": 1, "maxReplicas": 3,
                              "rayStartParams": {"resources": '"{\\"Custom\\": 2}"'}, "template": {"spec": {
                                  "containers": [{"name": "w", "resources": {"limits": {
                                      "cpu": "1500m", "memory": "1G", "nvidia.com/gpu": 1}}}]}}}],
    }
    cluster = cluster_spec(spec, ["spec"])
    head, worker = cluster.head.shape, cluster.workers[0]
    assert (head.num_cpus, head.memory_bytes, head.request_cpu, head.request_memory) == (0, 4 * 2**30,
                                                                                     Fraction(1, 2), 2 * 2**30)
    assert worker.replicas == 3  # clamped to maxReplicas, as KubeRay's controller does
    assert (worker.shape.num_cpus, worker.shape.num_gpus, worker.shape.resources) == (2, 1, {"Custom": 2.0})
    cpu, memory, gpus, _ = cluster.desired()
    assert (cpu, memory, gpus) == (Fraction(1, 2) + 3 * Fraction(3, 2), 2 * 2**30 + 3 * 10**9, 3)
    assert any("dashboard-host" in note for note in cluster.notes)
    assert capacity_refusal(cluster, 64 * 2**30, 110, 1000) is None
    assert "this machine has 1.0 GiB" in (capacity_refusal(cluster, 2**30, 110, 1000) or "")
    with pytest.raises(UserError, match="is not a JSON map"):
        cluster_spec({**spec, "headGroupSpec": {**spec["headGroupSpec"], "rayStartParams": {"resources": "{x"}}},
                     ["spec"])


def test_naming_the_kinds_imports_no_ray() -> None:
    """The CLI resolves kind names often: the table and the handler load without Ray (only supervisors use it)."""
    code = ("import sys, millpond.kuberay.kinds, millpond.kuberay.handler, millpond.kuberay.node_view; "
            "from millpond.kinds import REGISTRY; REGISTRY.resolve('rayclusters'); "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
