"""``millpond apply -f``, ``millpond get`` and ``millpond delete``: manifests as kubectl handles them.

Every kind is reached through the one registry of kinds (``millpond.kinds.REGISTRY``): a kind's
name (``get``/``delete``) is resolved there and its family's handler is called; an apply's
documents are checked by the handler that claims each (``REGISTRY.plan``), family by family, and
nothing is stored unless every document of the apply passes. Kubernetes' built-in kinds (``millpond.core``:
Secrets, ConfigMaps, Namespaces…) are applied before every family but Kueue's queues; a Dataset of the
same batch may name one of its Secrets (``store.config_documents.batch_lookup``).

Only click is imported here; the registry, the checks and the store load when a command runs,
so ``millpond run`` does not pay for them.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE

if TYPE_CHECKING:
    from millpond.kind_handler import Applied, Document

NAMESPACE = click.option("--namespace", "-n", type=NAMESPACE_TYPE, default="default", show_default=True,
                         help="The object's namespace.")


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
    Cohort; v1beta2 or v1beta1), KServe's serving.kserve.io InferenceService (v1beta1),
    ServingRuntime and ClusterServingRuntime (v1alpha1) and Kubernetes' batch/v1 Job. Data operations
    and jobs start at once, in the background (a data operation after the step its runAfter names).
    """
    from millpond.datasets.manifests import read_documents
    from millpond.errors import UserError

    documents = read_documents(list(files))
    if not documents:
        raise UserError(f"{', '.join(files)}: no manifests found (every document is empty)")
    started = apply_documents(documents)
    if wait_for and started:
        from millpond.cli.operations import follow

        follow(started)


def apply_documents(documents: list[Document]) -> list[Applied]:
    """Check every document, then store them all, printing kubectl's lines (``info:`` notes on stderr);
    what started running (data operations, jobs) is returned."""
    from millpond.datasets.schema_check import check_schema_file
    from millpond.kind_handler import ApplyBatch, KindContext
    from millpond.kinds import REGISTRY
    from millpond.settings import load_settings
    from millpond.store import config_documents as core
    from millpond.store.secrets import ConfigStore

    settings = load_settings()
    secrets = core.batch_lookup(documents, ConfigStore(settings.home))  # a Dataset may name the batch's Secret
    batch = ApplyBatch(KindContext(settings), check_schema_file, secrets)
    plans = REGISTRY.plan(documents, batch)
    notes: list[str] = []
    started: list[Applied] = []
    for plan in plans:  # queues first (a job may name one), then the core kinds (Secrets a Dataset reads)
        outcome = plan.apply(batch)
        for applied in outcome.applied:
            print(applied.message)
        started += [applied for applied in outcome.applied if applied.started]
        notes += [note.grouped() for note in outcome.notes]
    for note in notes:
        print(f"info: {note}", file=sys.stderr)
    return started


@click.command("get")
@click.argument("kind", metavar="KIND")
@click.argument("name", required=False)
@NAMESPACE
@click.option("--all-namespaces", "-A", is_flag=True, help="Objects of every namespace.")
@click.option("--output", "-o", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True,
              help="A table, or the whole objects as JSON or YAML.")
@click.option("--selector", "-l", default=None, metavar="SELECTOR",
              help="Only objects whose labels match (a=b, a!=b, a in (x,y), a notin (x), a, !a; comma-separated).")
def get_command(kind: str, name: str | None, namespace: str, all_namespaces: bool, output: str,
                selector: str | None) -> None:
    """Show objects of KIND (dataset, dataload, pytorchjob, trainjob, clusterqueue, localqueue, isvc, pod, …),
    or NAME."""
    from dataclasses import replace

    from millpond.errors import UserError
    from millpond.kind_handler import KindContext
    from millpond.kinds import REGISTRY
    from millpond.label_selectors import parse
    from millpond.manifest_envelope import as_list
    from millpond.settings import load_settings
    from millpond.tables import format_table

    entry = REGISTRY.resolve(kind)
    handler, context = REGISTRY.handler(entry), KindContext(load_settings())
    wanted = parse(selector) if selector is not None else None
    if wanted is not None and name is not None:
        raise UserError("name cannot be provided when a selector is specified")
    if output in ("json", "yaml"):
        if name is not None:
            print_value(handler.get(entry, name, namespace, context), output)
        else:
            items = handler.list_objects(entry, namespace, all_namespaces, context)
            if wanted is not None:
                items = [item for item in items if wanted.matches((item.get("metadata") or {}).get("labels"))]
            print_value(as_list(items), output)
        return
    table = handler.table(entry, name, namespace, all_namespaces, context)
    if wanted is not None:  # the rows of the objects that match: NAME is the first column after NAMESPACE
        matched = [item["metadata"] for item in handler.list_objects(entry, namespace, all_namespaces, context)
                   if wanted.matches(item["metadata"].get("labels"))]
        if table.headers[:1] == ("NAMESPACE",):
            keys = {(str(metadata.get("namespace") or ""), str(metadata["name"])) for metadata in matched}
            rows = [row for row in table.rows if (row[0], row[1]) in keys]
        else:
            names = {str(metadata["name"]) for metadata in matched}
            rows = [row for row in table.rows if row[0] in names]
        table = replace(table, rows=rows)
    if not table.rows:
        where = "any namespace" if all_namespaces else f"{namespace} namespace"
        print(f"No resources found in {where}.", file=sys.stderr)
        return
    sys.stdout.write(format_table(table.headers, table.rows))


def print_value(value: Any, output: str) -> None:
    """An object (or a List) as ``-o json`` or ``-o yaml`` prints it."""
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
    from millpond.kind_handler import KindContext
    from millpond.kinds import REGISTRY
    from millpond.settings import load_settings

    entry = REGISTRY.resolve(kind)
    REGISTRY.handler(entry).delete(entry, name, namespace, KindContext(load_settings()))
    print(f'{entry.resource} "{name}" deleted')
