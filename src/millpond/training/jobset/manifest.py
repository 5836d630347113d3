"""A JobSet document checked as the API server, JobSet's webhook and Kueue's check it, and what is kept of it.

In order, each a one-line UserError naming the file, the JobSet and the field: the envelope (``apiVersion:
jobset.x-k8s.io/v1alpha2``, metadata); the webhook's defaults (``pkg/webhooks/jobset_webhook.go``: an
unnamed failure-policy rule named ``failurePolicyRuleN``, N its index; successPolicy ``All``; startupPolicy
``AnyOrder``; each Job ``Indexed`` with pods ``restartPolicy: OnFailure``; ``network.enableDNSHostnames`` and
``publishNotReadyAddresses`` true; a volume claim policy's ``whenDeleted: Delete``), then the JSON Schema
derived from JobSet's CRD (``schemas/jobset.v1alpha2.json``: wrong types, unknown fields, negative
``replicas``); then the webhook's validation: unique replicatedJob names, ``dependsOn`` naming an earlier
replicatedJob (never on the first), success and failure-policy targets that exist, rule names unique and
of JobSet's form, the coordinator's job and pod within range, the generated Job names DNS labels. Each
replicatedJob's Job (``jobs.child``) is then checked as a ``batch/v1`` Job applied alone would be
(``training.batch.manifest``), its errors led by ``spec.replicatedJobs[i].template``.

Refused because one machine cannot do them: the ``alpha.jobset.sigs.k8s.io/exclusive-topology`` annotation
(one Job per topology domain: node pools, racks), a TPU (``google.com/tpu``, refused by the pod template's
resources), Kueue's required topology (by the batch Job's check), more pods at once than the machine holds.
Not built, refused naming the field: ``managedBy`` (MultiKueue), the RestartJob actions and in-place restart
(feature gates off upstream by default). ``ttlSecondsAfterFinished`` is kept, not acted on.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millpond.datasets.fields import show
from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import ManifestBody, check_metadata
from millpond.names import label_problem
from millpond.scheduling import pod_room
from millpond.scheduling.queues.model import QUEUE_LABEL
from millpond.scheduling.queues.submission import check_queue_name
from millpond.training.batch.manifest import check_body
from millpond.training.jobset import jobs
from millpond.training.jobset.kinds import API_VERSION, KIND, SCHEMA

EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
ACTIONS = ("FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts")
GATED_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")  # behind the RestartJob feature gate upstream


@dataclass
class JobSetManifest(ManifestBody):
    """One checked JobSet: the body kept (with the webhook's defaults) and its notes."""

    body: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def queue(self) -> str:
        return str((self.body["metadata"].get("labels") or {}).get(QUEUE_LABEL) or "")


def check_document(doc: Any, source: str, number: int, validate: SchemaCheck) -> JobSetManifest:
    """One JobSet document checked and defaulted; UserError names the file, document, JobSet and field."""
    where = f"{source}: document {number}"
    doc = plain_value(doc, where)
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    label = f"{KIND} {metadata.get('name', '')}".strip()
    try:
        try:
            return _check(doc, validate)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def defaulted(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with JobSet's mutating webhook's defaults (and the CRD's) filled in."""
    spec = copy.deepcopy(spec)
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rjob in spec.get("replicatedJobs") or ():
        if not isinstance(rjob, dict):
            continue
        rjob.setdefault("replicas", 1)
        job = ((rjob.get("template") or {}).get("spec") or {})
        if isinstance(job, dict):
            job.setdefault("completionMode", "Indexed")
            pod = (job.get("template") or {}).get("spec")
            if isinstance(pod, dict) and not pod.get("restartPolicy"):
                pod["restartPolicy"] = "OnFailure"
    network = spec.setdefault("network", {})
    if isinstance(network, dict):
        network.setdefault("enableDNSHostnames", True)
        network.setdefault("publishNotReadyAddresses", True)
    policy = spec.get("failurePolicy")
    if isinstance(policy, dict):
        policy.setdefault("maxRestarts", 0)
        policy.setdefault("restartStrategy", "Recreate")
        for index, rule in enumerate(policy.get("rules") or ()):
            if isinstance(rule, dict) and not rule.get("name"):
                rule["name"] = f"failurePolicyRule{index}"
    for claims in spec.get("volumeClaimPolicies") or ():
        if isinstance(claims, dict):
            claims.setdefault("retentionPolicy", {"whenDeleted": "Delete"})
    return spec


def covered(_schema: Path, _doc: dict[str, Any]) -> None:
    """A JobSet's Job needs no schema check of its own: the JobSet's schema covered its template."""


def _check(doc: dict[str, Any], validate: SchemaCheck) -> JobSetManifest:
    if doc.get("apiVersion") != API_VERSION:
        raise UserError(f"apiVersion {doc.get('apiVersion')!r} is not supported (millpond reads {API_VERSION})")
    kept = check_metadata(KIND, doc.get("metadata"), namespaced=True)
    annotations = kept.get("annotations") or {}
    if EXCLUSIVE in annotations:
        raise UserError(f"metadata.annotations[{EXCLUSIVE}]: exclusive placement puts each Job on its own "
                        f"{annotations[EXCLUSIVE]} topology domain; this machine is one node")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise UserError("spec: required field is missing")
    spec = defaulted(spec)
    validate(SCHEMA, {**doc, "metadata": kept, "spec": spec})
    check_queue_name(str((kept.get("labels") or {}).get(QUEUE_LABEL) or ""), f"metadata.labels[{QUEUE_LABEL}]")
    if spec.get("managedBy") is not None:
        raise UserError("spec.managedBy: not supported by this millpond (MultiKueue dispatches JobSets to other "
                        "clusters; millpond runs them here)")
    names = _check_replicated(kept["name"], spec)
    _check_policies(spec, names)
    body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": kept, "spec": spec}
    notes: list[str] = []
    total = 0
    for index, rjob in enumerate(spec["replicatedJobs"]):
        child = jobs.child(body, "", rjob, 0, 0)
        try:
            checked = check_body(child, covered)
        except UserError as exc:
            text = str(exc)
            raise UserError(f"spec.replicatedJobs[{index}].template.{text}" if text.startswith("spec.")
                            else f"spec.replicatedJobs[{index}] ({rjob['name']}): {text}") from None
        notes.extend(note for note in checked.notes if note not in notes)
        total += checked.settings.pods_wanted * int(rjob["replicas"])
    too_many = pod_room.too_many(total, total, what="pods")
    if too_many:
        raise UserError(f"spec.replicatedJobs: {total} pods at once can never run here: {too_many}")
    return JobSetManifest(body, notes)


def _check_replicated(name: str, spec: dict[str, Any]) -> list[str]:
    """The webhook's checks of the replicatedJobs: names unique, dependsOn on earlier ones, Job names DNS labels."""
    names: list[str] = []
    for index, rjob in enumerate(spec["replicatedJobs"]):
        here = f"spec.replicatedJobs[{index}]"
        if rjob["name"] in names:
            raise UserError(f"{here}.name: Duplicate value: {show(rjob['name'])}")
        if index == 0 and rjob.get("dependsOn"):
            raise UserError(f"{here}.dependsOn: DependsOn can't be set for the first ReplicatedJob")
        for item in rjob.get("dependsOn") or ():
            if item["name"] not in names:
                raise UserError(f"{here}.dependsOn: replicatedJob: {rjob['name']} cannot depend on replicatedJob: "
                                f"{item['name']} (only on one listed before it)")
        names.append(rjob["name"])
        longest = jobs.job_name(name, rjob["name"], max(0, int(rjob["replicas"]) - 1))
        problem = label_problem(longest)
        if problem:
            raise UserError(f"{here}.name: Invalid value: {show(longest)}: the Job names it makes must be DNS "
                            f"labels: {problem}")
    return names


def _check_policies(spec: dict[str, Any], names: list[str]) -> None:
    """The webhook's checks of successPolicy, failurePolicy and coordinator."""
    for target in spec["successPolicy"].get("targetReplicatedJobs") or ():
        if target not in names:
            raise UserError(f"spec.successPolicy.targetReplicatedJobs: invalid replicatedJob name {show(target)} "
                            "does not appear in .spec.replicatedJobs")
    policy = spec.get("failurePolicy") or {}
    if policy.get("restartStrategy", "Recreate") == "InPlaceRestart":
        raise UserError("spec.failurePolicy.restartStrategy: InPlaceRestart restart strategy cannot be set when "
                        "InPlaceRestart feature gate is disabled")
    seen: dict[str, int] = {}
    for index, rule in enumerate(policy.get("rules") or ()):
        here = f"spec.failurePolicy.rules[{index}]"
        if rule["action"] in GATED_ACTIONS:
            raise UserError(f"{here}.action: {rule['action']} is not allowed when the RestartJob feature gate is "
                            "disabled (as upstream's default)")
        if not RULE_NAME.match(rule["name"]) or len(rule["name"]) > 128:
            raise UserError(f"{here}.name: invalid failure policy rule name {show(rule['name'])}: it must start with "
                            "a letter, then letters, digits or '_,:', ending with a letter, digit or '_'")
        if rule["name"] in seen:
            raise UserError(f"{here}.name: rule names are not unique, rules with indices [{seen[rule['name']]} "
                            f"{index}] all have the same name {show(rule['name'])}")
        seen[rule["name"]] = index
        for target in rule.get("targetReplicatedJobs") or ():
            if target not in names:
                raise UserError(f"{here}.targetReplicatedJobs: invalid replicatedJob name {show(target)} in failure "
                                "policy does not appear in .spec.replicatedJobs")
    coordinator = spec.get("coordinator")
    if coordinator:
        rjob = next((r for r in spec["replicatedJobs"] if r["name"] == coordinator["replicatedJob"]), None)
        if rjob is None:
            raise UserError(f"spec.coordinator.replicatedJob: coordinator replicatedJob "
                            f"{show(coordinator['replicatedJob'])} does not exist")
        if not 0 <= int(coordinator.get("jobIndex") or 0) < int(rjob["replicas"]):
            raise UserError(f"spec.coordinator.jobIndex: coordinator job index {coordinator.get('jobIndex')} is "
                            f"invalid for replicatedJob {rjob['name']}")
        job = rjob["template"].get("spec") or {}
        completions = job.get("completions")
        if job.get("completionMode") != "Indexed" or completions is None:
            raise UserError("spec.coordinator: job for coordinator pod must be indexed completion mode, and "
                            "completions number must be set")
        if not 0 <= int(coordinator.get("podIndex") or 0) < int(completions):
            raise UserError(f"spec.coordinator.podIndex: coordinator pod index {coordinator.get('podIndex')} is "
                            f"invalid for replicatedJob {rjob['name']} job index {coordinator.get('jobIndex') or 0}")
