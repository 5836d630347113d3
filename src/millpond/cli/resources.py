"""``millpond apply -f``, ``millpond get`` and ``millpond delete``: manifests as kubectl handles them.

Fluid's kinds (``datasets.kinds``), Kubeflow's training kinds (``training.kinds``, handled
in ``training_resources``), Kueue's queueing kinds (``scheduling.queues.kinds``, handled in
``queue_resources``) and KServe's serving kinds (``serving.kinds``, handled in
``serving_resources``) share these commands: a kind's name (``get``/``delete``) or a
document's ``kind:`` (``apply``) is looked up in the one table of kinds, ``millpond.kinds``,
and goes to its owner's checks; nothing is stored unless every document of the apply passes.

Only click is imported here; the manifest checks and the store load when a command runs,
so ``millpond run`` does not pay for them.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Any

import click

from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE
from millpond.errors import NotFoundError

if TYPE_CHECKING:
    from millpond.kinds import KindTable
    from millpond.store.resources import Resource, ResourceStore

NAMESPACE = click.option("--namespace", "-n", type=NAMESPACE_TYPE, default="default", show_default=True,
                         help="The object's namespace.")


def _status(resource: "Resource", store: "ResourceStore") -> dict[str, Any]:
    """Fluid's status for the object, as the cache engine reports it."""
    from millpond.datasets.status import resource_status

    return resource_status(resource, store)


def _dataset_deleted(name: str, namespace: str) -> None:
    """Let the cache engine drop what it holds for a deleted dataset."""
    from millpond.datasets.cleanup import dataset_deleted

    dataset_deleted(name, namespace)


def _kinds() -> "KindTable":
    """The table of kinds, filled by every owner (importing their kinds modules registers them)."""
    from millpond.datasets import kinds as fluid_kinds  # noqa: F401 - registers Fluid's kinds
    from millpond.kinds import REGISTRY
    from millpond.scheduling.queues import kinds as queue_kinds  # noqa: F401 - registers Kueue's kinds
    from millpond.serving import kinds as serving_kinds  # noqa: F401 - registers KServe's kinds
    from millpond.training import kinds as training_kinds  # noqa: F401 - registers Kubeflow's kinds

    return REGISTRY


@click.command("apply")
@click.option("--filename", "-f", "files", multiple=True, required=True, metavar="FILE",
              help="A manifest file, a folder of them, or - for stdin (repeatable).")
@click.option(
    "--wait", "wait_for", is_flag=True, help="Wait for the data operations applied to end, showing their progress."
)
def apply_command(files: tuple[str, ...], wait_for: bool) -> None:
    """Create or update objects from manifests: all of them, or none.

    Fluid's kinds (data.fluid.io/v1alpha1), Kubeflow's training jobs (kubeflow.org/v1 PyTorchJob,
    MPIJob, TFJob; trainer.kubeflow.org/v1alpha1 TrainJob), training runtimes and Kueue's queueing
    objects (kueue.x-k8s.io ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass,
    Cohort; v1beta2 or v1beta1) and KServe's serving.kserve.io InferenceService (v1beta1),
    ServingRuntime and ClusterServingRuntime (v1alpha1). Data operations and jobs start at once,
    in the background (a data operation after the step its runAfter names).
    """
    from millpond.cli import queue_resources as queues
    from millpond.cli import serving_resources as serving
    from millpond.cli import training_resources as training
    from millpond.datasets.kinds import KINDS
    from millpond.datasets.manifests import check_documents, missing_dataset_notes, read_documents
    from millpond.errors import UserError
    from millpond.scheduling.queues.manifests import is_queue_document
    from millpond.serving.manifests import is_serving_document
    from millpond.settings import load_settings
    from millpond.store import config_documents as core
    from millpond.store.resources import ResourceStore
    from millpond.store.secrets import ConfigStore

    settings = load_settings()
    documents = read_documents(list(files))
    if not documents:
        raise UserError(f"{', '.join(files)}: no manifests found (every document is empty)")
    store = ResourceStore(settings)
    kinds = _kinds()

    def is_training(doc: Any) -> bool:
        entry = kinds.named(doc.get("kind")) if isinstance(doc, dict) else None
        return entry is not None and entry.owner == "training"

    configs, core_notes = core.check([d for d in documents if core.is_core_document(d[2])])
    secrets = core.WithPlanned(ConfigStore(settings.home), configs)  # a Dataset may name the batch's Secret
    queue_manifests = queues.check([d for d in documents if is_queue_document(d[2])], store)
    serving_manifests = serving.check([d for d in documents if is_serving_document(d[2])])
    manifests = check_documents([d for d in documents if not is_training(d[2]) and not is_queue_document(d[2])
                                 and not is_serving_document(d[2]) and not core.is_core_document(d[2])], secrets)
    jobs, job_actions = training.check([d for d in documents if is_training(d[2])], store)
    for line in core.apply(configs, ConfigStore(settings.home)):  # first: the batch's objects may read them
        print(line)
    queues.apply(queue_manifests, store)  # first: a job of this batch may name one of its queues
    notes = core_notes + [note for manifest in manifests for note in manifest.notes]
    notes += missing_dataset_notes(manifests, lambda name, ns: store.get("Dataset", name, ns) is not None)
    started = []
    for resource, action in store.apply([manifest.body for manifest in manifests]):
        print(f"{KINDS[resource.kind].resource}/{resource.name} {action}")
        if KINDS[resource.kind].category == "operation" and action != "unchanged":
            started.append(resource)
    training.apply(jobs, job_actions, store)
    serving.apply(serving_manifests, store, settings.volumes_dir)
    for note in notes:
        print(f"info: {note}", file=sys.stderr)
    if started:
        from millpond.cli.operations import start_and_follow

        start_and_follow(started, wait_for)


@click.command("get")
@click.argument("kind", metavar="KIND")
@click.argument("name", required=False)
@NAMESPACE
@click.option("--all-namespaces", "-A", is_flag=True, help="Objects of every namespace.")
@click.option("--output", "-o", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True,
              help="A table, or the whole objects as JSON or YAML.")
def get_command(kind: str, name: str | None, namespace: str, all_namespaces: bool, output: str) -> None:
    """Show objects of KIND (dataset, dataload, pytorchjob, trainjob, clusterqueue, localqueue, isvc, …), or NAME."""
    from millpond.cli.resource_tables import COLUMNS, format_table, row
    from millpond.store.resources import ResourceStore

    entry = _kinds().resolve(kind)
    if entry.owner in ("training", "scheduling.queues", "serving"):
        _get_owned(entry.owner, entry.kind, name, namespace, all_namespaces, output)
        return
    from millpond.datasets.kinds import KINDS

    info = KINDS[entry.kind]
    store = ResourceStore()
    if name is not None:
        found = store.get(info.kind, name, namespace)
        if found is None:
            raise NotFoundError(entry.not_found(name, namespace))
        resources = [found]
    else:
        resources = store.list(info.kind, None if all_namespaces else namespace)
    statuses = [_status(resource, store) for resource in resources]
    if output in ("json", "yaml"):
        objects = [r.as_object(s) for r, s in zip(resources, statuses, strict=True)]
        value = objects[0] if name is not None else {"apiVersion": "v1", "kind": "List", "items": objects}
        _print_value(value, output)
        return
    if not resources:
        where = "any namespace" if all_namespaces else f"{namespace} namespace"
        print(f"No resources found in {where}.", file=sys.stderr)
        return
    now = dt.datetime.now(dt.timezone.utc)
    headers = COLUMNS[info.category]
    rows = [row(r, s, now) for r, s in zip(resources, statuses, strict=True)]
    if all_namespaces:
        headers = ("NAMESPACE", *headers)
        rows = [[r.namespace, *cells] for r, cells in zip(resources, rows, strict=True)]
    sys.stdout.write(format_table(headers, rows))


def _get_owned(owner: str, kind: str, name: str | None, namespace: str, all_namespaces: bool, output: str) -> None:
    """``get`` of a training, Kueue or KServe kind: its owner's module finds and lays out the objects."""
    from millpond.cli.resource_tables import format_table

    if owner == "training":
        from millpond.cli import training_resources
        from millpond.training.kinds import KINDS

        found = training_resources.get(KINDS[kind], name, namespace, all_namespaces, output)
    elif owner == "serving":
        from millpond.cli import serving_resources
        from millpond.serving.kinds import KINDS as SERVING_KINDS

        found = serving_resources.get(SERVING_KINDS[kind], name, namespace, all_namespaces, output)
    else:
        from millpond.cli import queue_resources
        from millpond.scheduling.queues.kinds import KINDS as QUEUE_KINDS

        found = queue_resources.get(QUEUE_KINDS[kind], name, namespace, all_namespaces, output)
    if found is None:
        where = "any namespace" if all_namespaces else f"{namespace} namespace"
        print(f"No resources found in {where}.", file=sys.stderr)
    elif found[2] is not None:
        _print_value(found[2], output)
    else:
        sys.stdout.write(format_table(tuple(found[0]), found[1]))


def _print_value(value: Any, output: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(value, indent=2) + "\n")
    else:
        from millpond.documents import dump_yaml

        sys.stdout.write(dump_yaml(value))


@click.command("delete")
@click.argument("kind", metavar="KIND")
@click.argument("name")
@NAMESPACE
def delete_command(kind: str, name: str, namespace: str) -> None:
    """Delete the object NAME of KIND (a dataset's cache goes with it; a running job is stopped)."""
    from millpond.store.resources import ResourceStore

    entry = _kinds().resolve(kind)
    if entry.owner == "training":
        from millpond.cli import training_resources
        from millpond.training.kinds import KINDS

        training_resources.delete(KINDS[entry.kind], name, namespace)
        return
    if entry.owner == "scheduling.queues":
        from millpond.cli import queue_resources
        from millpond.scheduling.queues.kinds import KINDS as QUEUE_KINDS

        queue_resources.delete(QUEUE_KINDS[entry.kind], name, namespace)
        return
    if entry.owner == "serving":
        from millpond.cli import serving_resources
        from millpond.serving.kinds import KINDS as SERVING_KINDS

        serving_resources.delete(SERVING_KINDS[entry.kind], name, namespace)
        return
    if not ResourceStore().delete(entry.kind, name, namespace):
        raise NotFoundError(entry.not_found(name, namespace))
    if entry.kind == "Dataset":
        _dataset_deleted(name, namespace)
    print(f'{entry.resource} "{name}" deleted')
