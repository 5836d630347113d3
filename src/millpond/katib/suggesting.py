"""An Experiment's Suggestion object and the new assignments it hands out, recorded before any Trial is made.

Katib's experiment controller raises ``Suggestion.spec.requests`` and its suggestion controller answers in
``status.suggestions`` (a name and parameter assignments each); the experiment controller then makes a Trial
per suggestion that has none. millpond does both in the Experiment's supervisor, in that order and through
the store: the suggestion library's reply (``katib.suggestions.api.get_suggestions``) and its carried state
(``status.algorithmSettings``) are written into the Suggestion first, in one write, and Trials are created
from the recorded suggestions by name. A supervisor killed between the two finds suggestions without Trials
and creates exactly those: no assignment is lost, none is asked for twice, no Trial runs twice.

Trial names are Katib's: the experiment's name and 8 random lower-case letters and digits.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from millpond.katib.kinds import API_VERSION, EXPERIMENT_LABEL, SUGGESTION
from millpond.katib.status import is_true, marked, now_iso, with_condition
from millpond.katib.suggestions.api import get_suggestions
from millpond.katib.suggestions.records import Assignment, SuggestionRequest, TrialResult
from millpond.katib.webhook import ExperimentSpec
from millpond.store.resources import Resource, ResourceStore

_ALPHABET = string.ascii_lowercase + string.digits
END_REACHED = "SuggestionEndReached"


@dataclass(frozen=True)
class Recorded:
    """One suggestion of ``status.suggestions``: the Trial it names, its assignments and labels."""

    name: str
    assignments: tuple[Assignment, ...]
    labels: Mapping[str, str]


def trial_name(experiment: str) -> str:
    return f"{experiment}-{''.join(secrets.choice(_ALPHABET) for _ in range(8))}"


def ensure(store: ResourceStore, namespace: str, experiment: str, spec: ExperimentSpec,
           raw_spec: Mapping[str, Any]) -> Resource:
    """The Experiment's Suggestion (named after it), created when missing."""
    found = store.get(SUGGESTION.kind, experiment, namespace)
    if found is not None:
        return found
    body = {"apiVersion": API_VERSION, "kind": SUGGESTION.kind,
            "metadata": {"name": experiment, "namespace": namespace, "labels": {EXPERIMENT_LABEL: experiment}},
            "spec": {"algorithm": raw_spec.get("algorithm"), "requests": 0, "resumePolicy": spec.resume_policy,
                     **({"earlyStopping": raw_spec["earlyStopping"]} if raw_spec.get("earlyStopping") else {})}}
    created = store.create(body)
    if created is not None:
        status = marked({"startTime": now_iso(), "suggestionCount": 0}, "Created", "SuggestionCreated",
                        "Suggestion is created")
        status = marked(status, "Running", "SuggestionRunning", "Suggestion is running")
        store.set_status(SUGGESTION.kind, experiment, status, namespace)
    found = store.get(SUGGESTION.kind, experiment, namespace)
    assert found is not None  # noqa: S101 - just created (or by a racing supervisor)
    return found


def recorded(suggestion: Resource) -> list[Recorded]:
    out = []
    for one in suggestion.status.get("suggestions") or []:
        assignments = tuple(Assignment(str(item["name"]), str(item["value"]))
                            for item in one.get("parameterAssignments") or [])
        out.append(Recorded(str(one["name"]), assignments, dict(one.get("labels") or {})))
    return out


def exhausted(suggestion: Resource) -> bool:
    """The algorithm said its search space is used up (not: the Suggestion ended with its Experiment)."""
    return any(
        one.get("type") == "Succeeded" and one.get("status") == "True" and one.get("reason") == END_REACHED
        for one in suggestion.status.get("conditions") or [])


def finish(store: ResourceStore, suggestion: Resource, namespace: str, resume_policy: str) -> None:
    """The Experiment finished: its Suggestion too, as Katib's ``cleanupSuggestionResources`` marks it
    (resumePolicy Never or FromVolume; a LongRunning one keeps running, ready for a raised maxTrialCount)."""
    if resume_policy not in ("Never", "FromVolume") or is_true(suggestion.status, "Succeeded"):
        return
    message = ("Suggestion is succeeded, can't be restarted" if resume_policy == "Never" else
               "Suggestion is succeeded, suggestion volume is not deleted, can be restarted")
    status = with_condition(suggestion.status, "Running", "False", "Suggestion is succeeded",
                            "Suggestion is not running")
    status = with_condition(status, "Succeeded", "True", "Experiment is succeeded", message)
    store.set_status(SUGGESTION.kind, suggestion.name, status, namespace)
    suggestion.status = status


def restart(store: ResourceStore, suggestion: Resource, namespace: str) -> None:
    """A restarted Experiment's Suggestion runs again (Katib's ``MarkSuggestionStatusRunning``: Succeeded
    removed), unless its algorithm had used up the space."""
    if exhausted(suggestion) or not is_true(suggestion.status, "Succeeded"):
        return
    conditions = [one for one in suggestion.status.get("conditions") or [] if one.get("type") != "Succeeded"]
    status = with_condition({**suggestion.status, "conditions": conditions}, "Running", "True",
                            "Suggestion is running", "Suggestion is running")
    store.set_status(SUGGESTION.kind, suggestion.name, status, namespace)
    suggestion.status = status


def request_more(store: ResourceStore, suggestion: Resource, namespace: str, experiment: str,
                 spec: ExperimentSpec, trials: Sequence[TrialResult], count: int) -> bool:
    """Ask the algorithm for ``count`` more assignments and record them (and its state) in the Suggestion;
    False when the search space is used up (nothing new recorded)."""
    state = tuple((str(one["name"]), str(one["value"])) for one in suggestion.status.get("algorithmSettings") or [])
    reply = get_suggestions(SuggestionRequest(f"{namespace}/{experiment}", spec.parameters, spec.objective,
                                              spec.algorithm, tuple(trials), count, state))
    known = list(suggestion.status.get("suggestions") or [])
    taken = {str(one["name"]) for one in known}
    for one in reply.suggestions:
        name = one.trial_name if one.trial_name and one.trial_name not in taken else trial_name(experiment)
        while name in taken:
            name = trial_name(experiment)
        taken.add(name)
        known.append({"name": name, "parameterAssignments": [{"name": a.name, "value": a.value}
                                                               for a in one.assignments],
                      **({"labels": dict(one.labels)} if one.labels else {})})
    status = {**suggestion.status, "suggestions": known, "suggestionCount": len(known),
              "algorithmSettings": [{"name": key, "value": value} for key, value in reply.state]}
    if reply.exhausted:
        status = marked(status, "Succeeded", END_REACHED, "Suggestion service has reached the end")
    store.set_status(SUGGESTION.kind, experiment, status, namespace)
    manifest = dict(suggestion.manifest)
    manifest["spec"] = {**manifest.get("spec", {}), "requests": len(known)}
    store.apply([manifest])
    return bool(reply.suggestions)
