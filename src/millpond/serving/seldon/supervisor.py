"""``python -m millpond.serving.seldon.supervisor NAMESPACE NAME UID``: the processes behind one SeldonDeployment.

The InferenceService's supervisor (``serving.supervisor``), serving a SeldonDeployment: each predictor is one
revision (named ``NAME-PREDICTOR``), started with its replicas, fetched model and placement exactly as an
InferenceService's revision is, and the traffic is split by the predictors' ``traffic`` percentages (the own
port and the gateway route by them, as they route a canary). A SKLEARN_SERVER unit runs millpond's model
server with Seldon's ``method`` (``predict_proba`` unless the graph's parameters say otherwise) and answers
Seldon's protocol as Seldon's prepackaged server does (``--seldon-unit``). A change of the predictors
restarts them all (Seldon's operator rolls its Deployments; a simplification: no overlap here). The status is
Seldon's (``serving.seldon.status``): Available once every predictor with traffic has a replica that answers.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from millpond.runners.background import now_iso
from millpond.serving import endpoints
from millpond.serving.replicas import Launch, Replica
from millpond.serving.revisions import RevisionRun, status_of
from millpond.serving.seldon import status as seldon_status
from millpond.serving.seldon.graph import SeldonPredictor, predictors_key, read_predictors
from millpond.serving.seldon.kinds import KIND
from millpond.serving.supervisor import Supervisor, serve
from millpond.store.resources import Resource

PROCESS_KIND = "seldon-deployment"  # its kind among the home's background processes (millpond ps)


def revision_of(name: str, predictor: str) -> str:
    """The revision serving one predictor: ``NAME-PREDICTOR`` (Seldon's Deployments are named after both)."""
    return f"{name}-{predictor}"


class SeldonSupervisor(Supervisor):
    """A SeldonDeployment's predictors as revisions with fixed traffic."""

    kind = KIND

    def __init__(self, store: Any, resource: Resource) -> None:
        super().__init__(store, resource)
        self.predictors: list[SeldonPredictor] = []
        self.served_key = ""

    def _adopt(self, resource: Resource) -> None:
        self.predictors = read_predictors(resource.manifest)
        self.served_key = predictors_key(resource.manifest)
        for predictor in self.predictors:
            self._add_predictor(predictor)
        self.latest = self.rolled_out = revision_of(self.name, self.predictors[0].name)

    def _add_predictor(self, predictor: SeldonPredictor) -> None:
        name = revision_of(self.name, predictor.name)
        spec = predictor.spec
        replicas = [Replica(name, index, endpoints.replica_log(self.namespace, self.name, name, index, KIND))
                    for index in range(spec.replicas)]
        revision = RevisionRun(name, predictor.predictor, spec, replicas)
        if spec.unservable is not None:
            revision.failure = (spec.failure_reason or "InvalidPredictorSpec", spec.unservable)
            revision.next_try = float("inf")
        self.revisions[name] = revision

    def _follow(self, resource: Resource) -> None:
        """Changed predictors: every revision retired, the new ones started (no overlap: a simplification)."""
        if predictors_key(resource.manifest) == self.served_key:
            return
        print(f"{now_iso()} the predictors changed: restarting them", flush=True)
        for name in list(self.revisions):
            self._retire(name)
        self._adopt(resource)

    def _served_order(self) -> list[str]:
        """Every predictor's revision, in the predictors' order (each takes its share of the traffic)."""
        return [name for name in (revision_of(self.name, p.name) for p in self.predictors) if name in self.revisions]

    def _route(self) -> None:
        self.percents = {revision_of(self.name, p.name): p.traffic for p in self.predictors}

    def _launch(self, revision: RevisionRun, replica: Replica) -> Launch:
        """The InferenceService's launch; a SKLEARN_SERVER's model server with Seldon's method and answers."""
        launch = super()._launch(revision, replica)
        predictor = next(p for p in self.predictors if revision_of(self.name, p.name) == revision.name)
        if predictor.method is None or revision.spec.server == "command":
            return launch
        return replace(launch, argv=[*launch.argv, "--method", predictor.method,
                                     "--seldon-unit", f"{predictor.unit}={predictor.unit_image}"])

    def _write_status(self) -> None:
        seen = status_of(self.revisions, self.percents, self.latest)
        available = {p.name: len(self.revisions[revision_of(self.name, p.name)].ready_urls)
                     for p in self.predictors if revision_of(self.name, p.name) in self.revisions}
        state = {"True": seldon_status.AVAILABLE, "False": seldon_status.FAILED}.get(seen.ready,
                                                                                   seldon_status.CREATING)
        key = (state, seen.message, tuple(sorted(available.items())))
        if key == self.written_key and self.resource.status == self.written:
            return
        value = seldon_status.status(self.name, state, seen.message, self.predictors,
                                     url=self.url if state == seldon_status.AVAILABLE else None, available=available)
        current = self.store.get(KIND, self.name, self.namespace)
        if current is None or current.uid != self.uid:
            return
        self.store.set_status(KIND, self.name, value, self.namespace)
        self.written_key, self.written = key, value
        self.resource = self.store.get(KIND, self.name, self.namespace) or self.resource

    def _write_stopped(self) -> None:
        why = f"its supervisor was stopped ({self.stop_signal}); nothing serves it now"
        self.store.set_status(KIND, self.name, seldon_status.status(self.name, seldon_status.CREATING, why,
                                                                    self.predictors), self.namespace)

    def write_failed(self, why: str) -> None:
        self.store.set_status(KIND, self.name, seldon_status.status(self.name, seldon_status.FAILED, why,
                                                                    self.predictors), self.namespace)

    def _write_state(self) -> None:
        """Nothing kept across restarts: a predictor's revision is named after it, not numbered."""


def main(argv: list[str] | None = None) -> int:
    return serve(SeldonSupervisor, PROCESS_KIND, argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
