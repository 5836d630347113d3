"""``python -m millpond.serving.seldon.supervisor NAMESPACE NAME UID``: the processes behind one SeldonDeployment.

The InferenceService's supervisor (``serving.supervisor``), serving a SeldonDeployment: each predictor is one
revision (named ``NAME-PREDICTOR``), started with its replicas, fetched model and placement exactly as an
InferenceService's revision is, and the traffic is split by the predictors' ``traffic`` percentages (the own
port and the gateway route by them, as they route a canary). A SKLEARN_SERVER unit runs millpond's model
server with Seldon's ``method`` (``predict_proba`` unless the graph's parameters say otherwise) and answers
Seldon's protocol as Seldon's prepackaged server does (``--seldon-unit``). A change of the predictors
restarts them all (Seldon's operator rolls its Deployments; a simplification: no overlap here). The status is
Seldon's (``serving.seldon.status``): Available once every predictor with traffic has a replica that answers.

A predictor whose graph the executor walks (``graph.GraphUnit``: more than one unit, or a built-in one) is a
revision running millpond's executor (``serving.seldon.executor``), and each unit of its graph that is no
built-in is a revision of its own, ``NAME-PREDICTOR-UNIT``, started as a one-unit predictor is, with no share of
the traffic (only the executor calls it). Such a predictor is Available once its executor and every one of its
units answer; a unit that fails to start (an unpullable image) fails the deployment, the revision naming it.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from millpond.runners.background import now_iso
from millpond.runners.base import Bind
from millpond.serving import endpoints
from millpond.serving.replicas import Launch, Replica
from millpond.serving.revisions import RevisionRun, status_of
from millpond.serving.seldon import status as seldon_status
from millpond.serving.seldon.graph import EXECUTOR, SeldonPredictor, predictors_key, read_predictors, unit_revision
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
        # each revision's (unit, image, SKLEARN method): what its model server is told (method None: none)
        self.units: dict[str, tuple[str, str, str | None]] = {}
        self.unit_revisions: dict[str, list[str]] = {}  # a predictor's revision: its units' revisions

    def _adopt(self, resource: Resource) -> None:
        self.predictors = read_predictors(resource.manifest)
        self.units, self.unit_revisions = {}, {}
        self.served_key = predictors_key(resource.manifest)
        for predictor in self.predictors:
            self._add_predictor(predictor)
        self.latest = self.rolled_out = revision_of(self.name, self.predictors[0].name)

    def _add_predictor(self, predictor: SeldonPredictor) -> None:
        name = revision_of(self.name, predictor.name)
        self._add_revision(name, predictor.predictor, predictor.spec)
        self.units[name] = (predictor.unit, predictor.unit_image, predictor.method)
        self.unit_revisions[name] = []
        for unit in predictor.graph_units:
            served = unit_revision(self.name, predictor.name, unit.name)
            self._add_revision(served, unit.predictor, unit.spec)
            self.units[served] = (unit.name, unit.image, unit.method)
            self.unit_revisions[name].append(served)

    def _add_revision(self, name: str, predictor: dict[str, Any], spec: Any) -> None:
        replicas = [Replica(name, index, endpoints.replica_log(self.namespace, self.name, name, index, KIND))
                    for index in range(spec.replicas)]
        revision = RevisionRun(name, predictor, spec, replicas)
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
        """Every predictor's revision, in the predictors' order (each takes its share of the traffic), then the
        revisions of their graphs' units (no share: the executor finds them in the endpoints)."""
        order = [revision_of(self.name, p.name) for p in self.predictors]
        order += [unit for name in order for unit in self.unit_revisions.get(name, [])]
        return [name for name in order if name in self.revisions]

    def _route(self) -> None:
        self.percents = {revision_of(self.name, p.name): p.traffic for p in self.predictors}

    def _launch(self, revision: RevisionRun, replica: Replica) -> Launch:
        """The InferenceService's launch; a SKLEARN_SERVER's model server with Seldon's method and answers."""
        launch = super()._launch(revision, replica)
        unit, image, method = self.units[revision.name]
        if image == EXECUTOR:  # it reads the units' replicas in the endpoints: shown read-only in a confinement
            folder = endpoints.folder(self.namespace, self.name, KIND)
            return replace(launch, binds=[*launch.binds, Bind(folder, str(folder), read_only=True)])
        if method is None or revision.spec.server == "command":
            return launch
        return replace(launch, argv=[*launch.argv, "--method", method, "--seldon-unit", f"{unit}={image}"])

    def _write_status(self) -> None:
        # the units of a predictor with traffic must answer too: counted as revisions with traffic
        needed = {unit: 1 for name, percent in self.percents.items() if percent > 0
                  for unit in self.unit_revisions.get(name, [])}
        seen = status_of(self.revisions, {**self.percents, **needed}, self.latest)
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
