"""What JobSet's controller decides from its spec and its Jobs, as pure functions (``pkg/controllers``).

Every input is passed in (the JobSet's spec, its restarts, each child Job's replicatedJob, index, restart
attempt and status), so each rule is tested without a process:

- ``rjob_statuses``: ``status.replicatedJobsStatus``: per replicatedJob its Jobs ``ready`` (pods running or
  succeeded reach ``min(parallelism, completions)``), ``succeeded``, ``failed``, ``active``, ``suspended``;
- ``decide``: the JobSet's end or restart: a failed Job (of the current attempt) → the failure policy
  (none: Failed ``FailedJobs``; the first rule, in order, whose ``targetReplicatedJobs`` and
  ``onJobFailureReasons`` match a failed Job, else the default action ``RestartJobSet``; a restart once
  ``maxRestarts`` restarts counted is Failed ``ReachedMaxRestarts``); else enough succeeded Jobs for the
  success policy (``All``: every Job of the targets, all replicatedJobs when none; ``Any``: one) → Completed
  ``AllJobsCompleted``;
- ``startable``: the replicatedJobs whose Jobs may be made now: all of them under ``AnyOrder``; under
  ``InOrder`` each once every earlier one is ready; one with ``dependsOn`` once each dependency's Jobs are
  all ``Complete`` (succeeded) or all ``Ready`` (ready, succeeded or failed), as upstream counts them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAIL_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
RESTART_ACTION = ("RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action")
IGNORE_ACTION = ("RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
                 "applying RestartJobSetAndIgnoreMaxRestarts failure policy action")
COMPLETED = ("AllJobsCompleted", "jobset completed successfully")


@dataclass(frozen=True)
class ChildJob:
    """One Job of the JobSet as its controller sees it."""

    name: str
    rjob: str
    index: int
    attempt: int  # the JobSet's restarts when it was made
    status: dict[str, Any]
    parallelism: int = 1
    completions: int | None = 1
    suspended: bool = False

    def has(self, kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True" for c in self.status.get("conditions") or ())

    @property
    def failed(self) -> bool:
        return self.has("Failed")

    @property
    def succeeded(self) -> bool:
        return self.has("Complete")

    @property
    def ready(self) -> bool:
        pods = self.parallelism if self.completions is None else min(self.parallelism, self.completions)
        return int(self.status.get("succeeded") or 0) + int(self.status.get("ready") or 0) >= pods

    def failure(self) -> tuple[str, str, str]:
        """(reason, message, time) of its Failed condition."""
        found: dict[str, Any] = next((c for c in self.status.get("conditions") or () if c.get("type") == "Failed"), {})
        return str(found.get("reason") or ""), str(found.get("message") or ""), str(found.get("lastTransitionTime"))


@dataclass(frozen=True)
class Decision:
    """What to do now: ``Completed``/``Failed`` (the JobSet ends), ``Restart`` (its Jobs recreated), or None."""

    outcome: str | None = None
    reason: str = ""
    message: str = ""
    counts: bool = True  # a restart that counts towards maxRestarts


def rjob_statuses(spec: dict[str, Any], children: Sequence[ChildJob]) -> list[dict[str, Any]]:
    """``status.replicatedJobsStatus``: one entry per replicatedJob, in the spec's order."""
    out = []
    for rjob in spec["replicatedJobs"]:
        mine = [child for child in children if child.rjob == rjob["name"]]
        active = [child for child in mine if not child.failed and not child.succeeded]
        out.append({"name": rjob["name"], "ready": sum(1 for child in active if child.ready),
                    "succeeded": sum(1 for child in mine if child.succeeded),
                    "failed": sum(1 for child in mine if child.failed),
                    "active": sum(1 for child in active if int(child.status.get("active") or 0) > 0),
                    "suspended": sum(1 for child in active if child.suspended)})
    return out


def _rule_applies(rule: dict[str, Any], child: ChildJob) -> bool:
    reason, message, _ = child.failure()
    reasons = rule.get("onJobFailureReasons") or []
    patterns = rule.get("onJobFailureMessagePatterns") or []
    targets = rule.get("targetReplicatedJobs") or []
    return ((not reasons or reason in reasons) and (not patterns or any(re.search(p, message) for p in patterns))
            and (not targets or child.rjob in targets))


def decide(spec: dict[str, Any], restarts_counted: int, children: Sequence[ChildJob]) -> Decision:
    """The JobSet's end or restart due now (see the module's docstring)."""
    failed = sorted((child for child in children if child.failed), key=lambda child: child.failure()[2])
    if failed:
        policy = spec.get("failurePolicy")
        if policy is None:
            return Decision("Failed", FAILED_JOBS[0], f"{FAILED_JOBS[1]} (first failed job: {failed[0].name})")
        action, job = "RestartJobSet", failed[0]
        for rule in policy.get("rules") or ():
            matched = [child for child in failed if _rule_applies(rule, child)]
            if matched:
                action, job = rule["action"], matched[0]
                break
        first = f" (first failed job: {job.name})"
        if action == "FailJobSet":
            return Decision("Failed", FAIL_ACTION[0], FAIL_ACTION[1] + first)
        if action == "RestartJobSetAndIgnoreMaxRestarts":
            return Decision("Restart", IGNORE_ACTION[0], IGNORE_ACTION[1] + first, counts=False)
        if restarts_counted >= int(policy.get("maxRestarts") or 0):
            return Decision("Failed", MAX_RESTARTS[0], MAX_RESTARTS[1] + first)
        return Decision("Restart", RESTART_ACTION[0], RESTART_ACTION[1] + first)
    success = spec["successPolicy"]
    targets = success.get("targetReplicatedJobs") or [rjob["name"] for rjob in spec["replicatedJobs"]]
    done = sum(1 for child in children if child.succeeded and child.rjob in targets)
    wanted = 1 if success.get("operator") == "Any" else \
        sum(int(rjob["replicas"]) for rjob in spec["replicatedJobs"] if rjob["name"] in targets)
    if done >= wanted:
        return Decision("Completed", *COMPLETED)
    return Decision()


def startable(spec: dict[str, Any], statuses: Sequence[dict[str, Any]]) -> list[str]:
    """The replicatedJobs whose Jobs may exist now (see the module's docstring)."""
    by_name = {status["name"]: status for status in statuses}
    replicas = {rjob["name"]: int(rjob["replicas"]) for rjob in spec["replicatedJobs"]}
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    out: list[str] = []
    for rjob in spec["replicatedJobs"]:
        ok = True
        for dependency in rjob.get("dependsOn") or ():
            status = by_name[dependency["name"]]
            if dependency["status"] == "Complete":
                ok = ok and status["succeeded"] >= replicas[dependency["name"]]
            else:
                ok = ok and status["ready"] + status["succeeded"] + status["failed"] >= replicas[dependency["name"]]
        if not ok:
            if in_order:
                break
            continue
        out.append(rjob["name"])
        status = by_name[rjob["name"]]
        if in_order and status["ready"] + status["succeeded"] < replicas[rjob["name"]]:
            break  # the next waits until every Job of this one is ready
    return out
