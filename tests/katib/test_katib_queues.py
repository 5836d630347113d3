"""Trials are workloads: their Jobs go through Kueue and the namespace's ResourceQuota as any Job does.

With parallelTrialCount 3 and room for one trial at a time (a ClusterQueue of 1 CPU behind the trial Job's
``kueue.x-k8s.io/queue-name``, or a ResourceQuota of ``requests.cpu: 1``), the three trials are created at
once but their processes never overlap: the others' Jobs wait suspended with Kueue's reason (or their pods
Pending with the quota's ``exceeded quota`` line), then run, and the Experiment completes. A waiting trial
is Running, as Katib counts it: its job exists and has reached neither the success nor the failure
condition (Katib's ``GetDeployedJobStatus`` defaults to running).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from millpond.store.resources import ResourceStore
from millpond.training.batch.pods import Phase, job_pods
from tests.katib.test_experiments import apply, condition, experiment, shown, until_done
from tests.queues_support import apply_objects, queues

# Each trial records its name and its process's start and end, then prints its loss (a shifted quadratic).
TIMED = ("import os,sys,time; start=time.time(); x=float(sys.argv[1]); time.sleep(0.4); "
         "open(os.environ['RUNS'],'a').write(f'{sys.argv[2]} {start} {time.time()}\\n'); print(f'loss={(x-2)**2:.6f}')")


def one_cpu_trials(name: str, runs: Path, labels: dict[str, str] | None = None) -> dict[str, Any]:
    doc = experiment(name, runs=runs, script=TIMED, max_trials=3, parallel=3)
    trial_spec = doc["spec"]["trialTemplate"]["trialSpec"]
    trial_spec["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    if labels:
        trial_spec["metadata"] = {"labels": labels}
    return doc


def never_overlapped(runs: Path) -> list[str]:
    """The trials that ran, in order; asserting that none started before the one before it had ended."""
    spans = sorted((float(start), float(end), trial) for trial, start, end in
                   (line.split() for line in runs.read_text().splitlines()))
    for before, after in zip(spans, spans[1:], strict=False):
        assert after[0] >= before[1], f"{after[2]} started while {before[2]} ran"
    return [trial for _, _, trial in spans]


def jobs(cli: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(cli("get", "jobs", "-o", "json").out)["items"]
    return items


def test_trials_queued_by_kueue_run_one_at_a_time_the_others_suspended(cli: Any, tmp_path: Path) -> None:
    apply_objects(*queues(("trials", 0, {}), cpu="1"))
    runs = tmp_path / "runs"
    doc = one_cpu_trials("queued", runs, {"kueue.x-k8s.io/queue-name": "trials"})
    doc["spec"]["trialTemplate"]["retain"] = True  # the Jobs kept, to read how Kueue admitted each
    assert apply(cli, tmp_path, doc).code == 0
    held: dict[str, Any] = {}
    counted: list[tuple[int, int]] = []

    def watch(found: dict[str, Any]) -> None:
        status = found.get("status") or {}
        counted.append((int(status.get("trialsRunning") or 0), int(status.get("trialsPending") or 0)))
        for job in jobs(cli):
            suspended = next((one for one in job["status"].get("conditions") or []
                              if one["type"] == "Suspended" and one["status"] == "True"), None)
            if suspended is not None and job["spec"].get("suspend") is True:
                held.setdefault(job["metadata"]["name"], (suspended, cli("describe", "job",
                                                                         job["metadata"]["name"]).out))
        running = [pod for one in job_pods() for pod in one.pods if pod.phase == Phase.RUNNING]
        assert len(running) <= 1, f"Kueue admits one trial at a time: {[pod.name for pod in running]}"

    done = until_done(cli, "queued", watch=watch, timeout=120)
    succeeded = condition(done, "Succeeded")
    assert succeeded is not None and succeeded["reason"] == "ExperimentMaxTrialsReached"
    assert (done["status"]["trials"], done["status"]["trialsSucceeded"]) == (3, 3)
    assert len(never_overlapped(runs)) == 3
    assert held, "no trial's Job was seen held back by its queue"
    for suspended, described in held.values():
        assert suspended["reason"] == "JobSuspended"
        assert "Pending" in described and "cpu" in described  # Kueue's reason: the quota the running one holds
    assert max(running + pending for running, pending in counted) <= 3
    assert any(running == 3 for running, _ in counted)  # a held trial counts as Running, as Katib counts it


def test_trials_past_the_namespaces_quota_wait_with_its_reason(cli: Any, tmp_path: Path) -> None:
    ResourceStore().apply([{"apiVersion": "v1", "kind": "ResourceQuota",
                            "metadata": {"name": "trial-quota", "namespace": "default"},
                            "spec": {"hard": {"requests.cpu": "1"}}}])
    runs = tmp_path / "runs"
    assert apply(cli, tmp_path, one_cpu_trials("quota", runs)).code == 0
    waited: list[str] = []

    def watch(_: dict[str, Any]) -> None:
        pods = [pod for one in job_pods() for pod in one.pods]
        waited.extend(pod.message for pod in pods if pod.reason == "Unschedulable")
        assert sum(1 for pod in pods if pod.phase == Phase.RUNNING) <= 1, "the quota holds one trial's cpu"

    done = until_done(cli, "quota", watch=watch, timeout=120)
    succeeded = condition(done, "Succeeded")
    assert succeeded is not None and succeeded["reason"] == "ExperimentMaxTrialsReached", done["status"]
    assert done["status"]["trialsSucceeded"] == 3
    assert len(never_overlapped(runs)) == 3
    assert waited, "no trial's pod was seen waiting for the quota"
    assert all("exceeded quota: trial-quota, requested: requests.cpu=1, used: requests.cpu=1" in message
               for message in waited), waited[:3]  # kube-scheduler's words around kube-apiserver's
    assert shown(cli, "experiment", "quota")["status"]["trials"] == 3
