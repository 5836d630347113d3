"""A RayJob's entrypoint goes through Ray's job submission API to its cluster: its own (deleted after it when
shutdownAfterJobFinishes) or one it selects; its status says how it ended, its driver log is readable,
and a runtime env that cannot be fetched fails it with the reason instead of leaving it pending."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from textwrap import indent
from typing import Any

from millpond.kuberay.node_view import ray_nodes
from millpond.kuberay.objects import driver_log
from millpond.settings import load_settings
from tests.kuberay.conftest import alive, get, wait_for, write

HEAD = """\
headGroupSpec:
  rayStartParams: {num-cpus: "1"}
  template:
    spec:
      containers:
      - name: ray-head
        image: rayproject/ray:2.52.0
        resources:
          limits: {cpu: "1", memory: 1Gi}
          requests: {cpu: 100m, memory: 256Mi}
"""

MANIFESTS = f"""\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: shared
spec:
{indent(HEAD, "  ")}
---
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: adds
spec:
  clusterSelector:
    ray.io/cluster: shared
  runtimeEnvYAML: |
    env_vars:
      GREETING: hello
  entrypoint: |
    python -c "import os, ray; ray.init(); twice = ray.remote(lambda x: 2 * x);
    print('SUM', sum(ray.get([twice.remote(i) for i in range(4)])), os.environ['GREETING'])"
---
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: fails
spec:
  clusterSelector:
    ray.io/cluster: shared
  entrypoint: python -c "import sys; print('ABOUT TO FAIL'); sys.exit(3)"
---
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: unfetchable
spec:
  clusterSelector:
    ray.io/cluster: shared
  entrypoint: python main.py
  runtimeEnvYAML: |
    working_dir: "http://127.0.0.1:9/code.zip"
---
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: overdue
spec:
  clusterSelector:
    ray.io/cluster: shared
  activeDeadlineSeconds: 3
  entrypoint: python -c "import time; time.sleep(600)"
---
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: own
spec:
  shutdownAfterJobFinishes: true
  ttlSecondsAfterFinished: 0
  entrypoint: python -c "print('ON MY OWN CLUSTER')"
  rayClusterSpec:
{indent(HEAD, "    ")}"""


def _ended(status: dict[str, Any]) -> bool:
    return status.get("jobDeploymentStatus") in ("Complete", "Failed")


def test_jobs_succeed_fail_and_end_their_own_cluster(kuberay_home: Path, cli: Callable[..., Any]) -> None:
    applied = cli("apply", "-f", write(kuberay_home.parent, "jobs.yaml", MANIFESTS))
    assert applied.code == 0, applied.err
    assert "rayjob.ray.io/own created" in applied.out

    unfetchable = wait_for(cli, "rayjob", "unfetchable", _ended)
    assert (unfetchable["jobDeploymentStatus"], unfetchable["reason"]) == ("Failed", "SubmissionFailed")
    assert "working_dir http://127.0.0.1:9/code.zip cannot be fetched from this machine" in unfetchable["message"]

    overdue = wait_for(cli, "rayjob", "overdue", _ended)
    assert (overdue["jobDeploymentStatus"], overdue["reason"]) == ("Failed", "DeadlineExceeded")
    assert "activeDeadlineSeconds (3 s)" in overdue["message"]

    adds = wait_for(cli, "rayjob", "adds", _ended)
    assert (adds["jobStatus"], adds["jobDeploymentStatus"], adds["succeeded"]) == ("SUCCEEDED", "Complete", 1)
    assert adds["rayClusterName"] == "shared" and adds["jobId"].startswith("adds-")
    assert adds["dashboardURL"].startswith("127.0.0.1:") and adds["startTime"] and adds["endTime"]
    log = driver_log(load_settings(), "default", "adds")
    assert log is not None and "SUM 12 hello" in log.read_text()

    fails = wait_for(cli, "rayjob", "fails", _ended)
    assert (fails["jobStatus"], fails["jobDeploymentStatus"], fails["reason"]) == ("FAILED", "Failed", "AppFailed")
    assert "exit code 3" in fails["message"] or "exited with code 3" in fails["message"], fails["message"]
    log = driver_log(load_settings(), "default", "fails")
    assert log is not None and "ABOUT TO FAIL" in log.read_text()

    own = wait_for(cli, "rayjob", "own", lambda s: "shutdownAfterJobFinishes" in (s.get("message") or ""))
    assert (own["jobStatus"], own["jobDeploymentStatus"]) == ("SUCCEEDED", "Complete")
    assert own["rayClusterName"].startswith("own-raycluster-")
    assert cli("get", "raycluster", own["rayClusterName"]).code != 0  # deleted after the job
    table = cli("get", "rayjobs").out.splitlines()
    assert table[0].split()[:5] == ["NAME", "JOB", "STATUS", "DEPLOYMENT", "STATUS"]
    assert [line.split()[:3] for line in table[1:]] == [
        ["adds", "SUCCEEDED", "Complete"], ["fails", "FAILED", "Failed"], ["overdue", "Failed", "shared"],
        ["own", "SUCCEEDED", "Complete"], ["unfetchable", "Failed", "shared"]]

    shared = ray_nodes(load_settings(), "default", "shared")
    assert [node.phase for node in shared] == ["Running"]  # a selected cluster outlives its jobs
    assert get(cli, "raycluster", "shared")["status"]["state"] == "ready"
    assert cli("delete", "raycluster", "shared").code == 0
    assert alive([(node.pid, node.ticks) for node in shared if node.pid]) == []
