"""The ``batch/v1`` Jobs of a JobSet, built as JobSet's controller builds them (``constructJob``).

Each replicatedJob makes ``replicas`` Jobs named ``JOBSET-RJOB-INDEX``, its template's Job spec copied,
the Job and its pod template labelled and annotated with JobSet's keys: ``jobset.sigs.k8s.io/jobset-name``,
``jobset-uid``, ``replicatedjob-name``, ``replicatedjob-replicas``, ``global-replicas``, ``job-index``,
``job-global-index``, ``job-key`` (the SHA-1 of ``NAMESPACE/JOB``), ``restart-attempt`` (the JobSet's
``status.restarts`` when the Job was made), ``group-name``/``group-replicas``/``job-group-index`` and, with
``spec.coordinator``, ``jobset.sigs.k8s.io/coordinator`` = ``JOBSET-RJOB-JOB-POD.SUBDOMAIN``. With
``network.enableDNSHostnames`` the pod template's ``subdomain`` is the network's subdomain (default: the
JobSet's name), which the batch Job's pods resolve (``training.batch.dns``). A suspended JobSet makes its
Jobs suspended. The Job's ``metadata.ownerReferences`` are not kept (millpond's Jobs keep labels and
annotations only): the ``jobset-name``/``jobset-uid`` labels tie a Job to its JobSet.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from millpond.training.batch.kinds import API_VERSION as JOB_API_VERSION

PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
JOBSET_UID = PREFIX + "jobset-uid"
RJOB_NAME = PREFIX + "replicatedjob-name"
RJOB_REPLICAS = PREFIX + "replicatedjob-replicas"
GLOBAL_REPLICAS = PREFIX + "global-replicas"
JOB_INDEX = PREFIX + "job-index"
JOB_GLOBAL_INDEX = PREFIX + "job-global-index"
JOB_KEY = PREFIX + "job-key"
RESTART_ATTEMPT = PREFIX + "restart-attempt"
GROUP_NAME = PREFIX + "group-name"
GROUP_REPLICAS = PREFIX + "group-replicas"
JOB_GROUP_INDEX = PREFIX + "job-group-index"
COORDINATOR = PREFIX + "coordinator"
DEFAULT_GROUP = "default"


def job_name(jobset: str, rjob: str, index: int) -> str:
    return f"{jobset}-{rjob}-{index}"


def subdomain(body: dict[str, Any]) -> str:
    """The pods' subdomain: ``network.subdomain``, else the JobSet's name."""
    return str((body["spec"].get("network") or {}).get("subdomain") or body["metadata"]["name"])


def dns_hostnames(body: dict[str, Any]) -> bool:
    return bool((body["spec"].get("network") or {}).get("enableDNSHostnames", True))


def coordinator_endpoint(body: dict[str, Any]) -> str:
    """``JOBSET-RJOB-JOB-POD.SUBDOMAIN``: the coordinator pod's stable name."""
    found = body["spec"]["coordinator"]
    pod = f"{job_name(body['metadata']['name'], found['replicatedJob'], int(found.get('jobIndex') or 0))}-" \
          f"{int(found.get('podIndex') or 0)}"
    return f"{pod}.{subdomain(body)}"


def _group(rjob: dict[str, Any]) -> str:
    return str(rjob.get("groupName") or DEFAULT_GROUP)


def keys(body: dict[str, Any], uid: str, rjob: dict[str, Any], index: int, restarts: int) -> dict[str, str]:
    """The labels (and, the same, annotations) JobSet puts on Job ``index`` of ``rjob`` and its pods."""
    rjobs = body["spec"]["replicatedJobs"]
    name = job_name(body["metadata"]["name"], rjob["name"], index)
    namespace = str(body["metadata"].get("namespace") or "default")
    before = 0
    for other in rjobs:
        if other["name"] == rjob["name"]:
            break
        before += int(other["replicas"])
    in_group = [other for other in rjobs if _group(other) == _group(rjob)]
    group_before = 0
    for other in in_group:
        if other["name"] == rjob["name"]:
            break
        group_before += int(other["replicas"])
    found = {
        JOBSET_NAME: body["metadata"]["name"], JOBSET_UID: uid, RJOB_NAME: rjob["name"],
        RESTART_ATTEMPT: str(restarts), RJOB_REPLICAS: str(rjob["replicas"]),
        GLOBAL_REPLICAS: str(sum(int(other["replicas"]) for other in rjobs)), JOB_INDEX: str(index),
        JOB_KEY: hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest(),  # noqa: S324 - JobSet's key, not security
        JOB_GLOBAL_INDEX: str(before + index), GROUP_NAME: _group(rjob),
        GROUP_REPLICAS: str(sum(int(other["replicas"]) for other in in_group)),
        JOB_GROUP_INDEX: str(group_before + index),
    }
    if body["spec"].get("coordinator"):
        found[COORDINATOR] = coordinator_endpoint(body)
    return found


def claim_volumes(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod volumes of ``spec.volumeClaimPolicies``: each template's claim, named ``TEMPLATE-JOBSET``."""
    return [{"name": template["metadata"]["name"],
             "persistentVolumeClaim": {"claimName": f"{template['metadata']['name']}-{body['metadata']['name']}"}}
            for policy in body["spec"].get("volumeClaimPolicies") or () for template in policy.get("templates") or ()]


def child(body: dict[str, Any], uid: str, rjob: dict[str, Any], index: int, restarts: int,
          suspend: bool = False) -> dict[str, Any]:
    """The Job manifest of Job ``index`` of ``rjob`` of JobSet ``body`` (uid ``uid``, after ``restarts``)."""
    template = copy.deepcopy(rjob.get("template") or {})
    spec = dict(template.get("spec") or {})
    metadata = template.get("metadata") or {}
    tags = keys(body, uid, rjob, index, restarts)
    pod = dict(spec.get("template") or {})
    pod_metadata = dict(pod.get("metadata") or {})
    pod_metadata["labels"] = {**(pod_metadata.get("labels") or {}), **tags}
    pod_metadata["annotations"] = {**(pod_metadata.get("annotations") or {}), **tags}
    pod_spec = dict(pod.get("spec") or {})
    if dns_hostnames(body):
        pod_spec["subdomain"] = subdomain(body)
    claims = claim_volumes(body)
    if claims:
        have = {volume.get("name") for volume in pod_spec.get("volumes") or ()}
        pod_spec["volumes"] = [*(pod_spec.get("volumes") or ()), *(v for v in claims if v["name"] not in have)]
    spec["template"] = {**pod, "metadata": pod_metadata, "spec": pod_spec}
    if suspend:
        spec["suspend"] = True
    return {"apiVersion": JOB_API_VERSION, "kind": "Job",
            "metadata": {"name": job_name(body["metadata"]["name"], rjob["name"], index),
                         "namespace": str(body["metadata"].get("namespace") or "default"),
                         "labels": {**(metadata.get("labels") or {}), **tags},
                         "annotations": {**(metadata.get("annotations") or {}), **tags}},
            "spec": spec}
