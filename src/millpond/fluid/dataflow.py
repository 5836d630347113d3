"""Dataflows: data operations chained lazily, then run in order, as Fluid's SDK does it.

``dataset.migrate(...).process(...).preload(...)`` only records steps (each is checked when
added, so a bad argument fails in the cell that wrote it). ``run(run_id)`` applies them as
DataMigrate/DataProcess/DataLoad objects named ``<run_id>-step<N>``, each with
``spec.runAfter`` naming the step before it, and starts them: each runs once its
predecessor completes, and a failed step fails the ones after it without running them.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from millpond.datasets.operations.runner import failure_reason, start, wait
from millpond.datasets.status import dataset_status, resource_status
from millpond.errors import MillpondError, UserError
from millpond.fluid import constants
from millpond.fluid.models import ExternalStorage, Processor, to_manifest
from millpond.fluid.objects import already_exists, apply, check, not_found
from millpond.store.resources import ResourceStore

logger = logging.getLogger("fluidsdk")

_DIRECTIONS = (constants.DATA_MIGRATE_DIRECTION_FROM, constants.DATA_MIGRATE_DIRECTION_TO)


class DataFlowFailed(MillpondError, RuntimeError):
    """A step of a dataflow run failed; ``step`` is its name, ``status`` its Fluid status."""

    def __init__(self, message: str, kind: str, step: str, status: dict[str, Any]) -> None:
        super().__init__(message)
        self.kind = kind
        self.step = step
        self.status = status


def _targets(target_path: str | list[str] | dict[str, int]) -> list[dict[str, Any]]:
    if isinstance(target_path, str):
        return [{"path": target_path, "replicas": 1}]
    if isinstance(target_path, dict):
        return [{"path": path, "replicas": replicas} for path, replicas in target_path.items()]
    return [{"path": path, "replicas": 1} for path in target_path]


class FluidDataFlow:
    """The steps of a dataflow over one dataset; each method appends a step and returns the flow."""

    def __init__(self, dataset_name: str, dataset_namespace: str = "default") -> None:
        self.dataset_name = dataset_name
        self.dataset_namespace = dataset_namespace
        self.flow_ops: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        steps = ", ".join(op["kind"] for op in self.flow_ops)
        return f"FluidDataFlow(dataset={self.dataset_name!r}, steps=[{steps}])"

    def _dataset(self, **more: Any) -> dict[str, Any]:
        return {"name": self.dataset_name, "namespace": self.dataset_namespace, **more}

    def _append(self, kind: str, spec: dict[str, Any], call: str) -> FluidDataFlow:
        step = {"apiVersion": constants.API_VERSION, "kind": kind,
                "metadata": {"name": f"step{len(self.flow_ops) + 1}", "namespace": self.dataset_namespace},
                "spec": spec}
        check([step], call, log_notes=False)  # logged when run applies it
        self.flow_ops.append(step)
        return self

    def preload(
        self, target_path: str | list[str] | dict[str, int] = "/", load_metadata: bool = False
    ) -> FluidDataFlow:
        """Load paths of the dataset into its cache (a DataLoad); a dict maps path → replicas."""
        spec = {"dataset": self._dataset(), "loadMetadata": load_metadata, "target": _targets(target_path)}
        return self._append(constants.DATA_LOAD_KIND, spec, "preload")

    def migrate(self, path: str, migrate_direction: str,
                external_storage: ExternalStorage | dict[str, Any]) -> FluidDataFlow:
        """Copy between ``path`` of the dataset and an external storage (a DataMigrate).

        ``migrate_direction`` is ``constants.DATA_MIGRATE_DIRECTION_FROM`` (external → dataset)
        or ``DATA_MIGRATE_DIRECTION_TO`` (dataset → external).
        """
        if migrate_direction not in _DIRECTIONS:
            raise ValueError(
                f"migrate_direction must be {' or '.join(map(repr, _DIRECTIONS))}, got {migrate_direction!r}"
            )
        dataset_side = {"dataset": self._dataset(path=path)}
        external_side = {"externalStorage": to_manifest(external_storage)}
        if migrate_direction == constants.DATA_MIGRATE_DIRECTION_FROM:
            spec = {"from": external_side, "to": dataset_side}
        else:
            spec = {"from": dataset_side, "to": external_side}
        return self._append(constants.DATA_MIGRATE_KIND, spec, "migrate")

    def process(self, dataset_mountpath: str, processor: Processor | dict[str, Any],
                sub_path: str | None = None) -> FluidDataFlow:
        """Run ``processor`` with the dataset (or its ``sub_path``) mounted at ``dataset_mountpath`` (a DataProcess)."""
        dataset = self._dataset(mountPath=dataset_mountpath, **({"subPath": sub_path} if sub_path else {}))
        spec = {"dataset": dataset, "processor": to_manifest(processor)}
        return self._append(constants.DATA_PROCESS_KIND, spec, "process")

    def manifests(self, run_id: str) -> list[dict[str, Any]]:
        """The objects ``run(run_id)`` applies: named ``<run_id>-step<N>``, each ``runAfter`` the one before."""
        steps: list[dict[str, Any]] = []
        for step in copy.deepcopy(self.flow_ops):
            metadata = step["metadata"]
            metadata["name"] = f"{run_id}-{metadata['name']}"
            metadata["labels"] = {constants.DATAFLOW_LABEL: run_id}
            if steps:
                before = steps[-1]
                step["spec"]["runAfter"] = {"kind": before["kind"], "name": before["metadata"]["name"],
                                            "namespace": before["metadata"]["namespace"]}
            steps.append(step)
        return steps

    def run(self, run_id: str) -> FlowHandle:
        """Apply the steps (all or none) and start them; the handle waits for them and reports their status."""
        if not self.flow_ops:
            raise ValueError("the dataflow has no steps")
        store = ResourceStore()
        dataset = store.get(constants.DATASET_KIND, self.dataset_name, self.dataset_namespace)
        if dataset is None:
            raise not_found(constants.DATASET_KIND, self.dataset_name, self.dataset_namespace)
        if dataset_status(dataset, store).get("phase") != "Bound":
            raise UserError(f"dataset {self.dataset_name} is not bound")
        steps = self.manifests(run_id)
        for step in steps:
            if store.get(step["kind"], step["metadata"]["name"], self.dataset_namespace) is not None:
                raise already_exists(step["kind"], step["metadata"]["name"], self.dataset_namespace)
        apply(steps, "run", store)
        for step in steps:
            start(step["kind"], step["metadata"]["name"], self.dataset_namespace)
            logger.debug(f'{step["kind"]} "{self.dataset_namespace}/{step["metadata"]["name"]}" created')
        return FlowHandle(run_id, steps)


class FlowHandle:
    """A started dataflow run: its steps' status, and a wait that logs each step as it completes."""

    def __init__(self, run_id: str, flow_steps: list[dict[str, Any]]) -> None:
        self.run_id = run_id
        self.flow_steps = flow_steps

    def __repr__(self) -> str:
        return f"FlowHandle(run_id={self.run_id!r}, steps={len(self.flow_steps)})"

    def get_current_status(self) -> list[dict[str, dict[str, Any]]]:
        """``[{step name: its status}, …]`` in step order (phase, duration, conditions…)."""
        store = ResourceStore()
        statuses = []
        for step in self.flow_steps:
            kind, name, namespace = step["kind"], step["metadata"]["name"], step["metadata"]["namespace"]
            found = store.get(kind, name, namespace)
            if found is None:
                raise not_found(kind, name, namespace)
            statuses.append({name: resource_status(found, store)})
        return statuses

    def wait(self, timeout_for_each_step: float | None = constants.DEFAULT_POLL_TIMEOUT,
             timeout: float | None = None) -> None:
        """Block until every step completed, logging ``<Kind> <name> completed`` for each.

        Raises DataFlowFailed naming the first failed step and why (a failed step always ends
        Failed, whatever went wrong, so this comes as soon as it does); TimeoutError only when a
        step is still running after ``timeout_for_each_step`` or the whole run after ``timeout``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for step in self.flow_steps:
            kind, name, namespace = step["kind"], step["metadata"]["name"], step["metadata"]["namespace"]
            left = None if deadline is None else deadline - time.monotonic()
            limits = [t for t in (timeout_for_each_step, left) if t is not None]
            try:
                status = wait(kind, name, namespace, timeout=max(0.0, min(limits)) if limits else None)
            except TimeoutError as exc:
                raise TimeoutError(f"failed to wait data operation {name}: {exc}") from None
            if status.get("phase") != "Complete":
                why = failure_reason(status, kind, name)
                message = f'failed to wait data operation {name}: {kind} "{namespace}/{name}" failed: {why}'
                raise DataFlowFailed(message, kind, name, status)
            logger.info(f"{kind} {name} completed")
