"""``millpond queue create|list|get|delete``: Kueue's common case without writing YAML.

``create`` writes the very objects a manifest would (``millpond apply -f``), through the same
checks: a ResourceFlavor ``default-flavor`` when none exists, a ClusterQueue NAME holding the
quota (one resource group of the resources given, admitting every namespace), and a LocalQueue
NAME in the project's namespace pointing at it. Seed 003's per-user quota in a project is a
ClusterQueue per user in the project's cohort (``--cohort PROJECT``); the project's total is the
cohort's own quota (a v1beta2 Cohort applied with ``resourceGroups``) or the sum of its queues.

``list`` and ``get`` show each ClusterQueue's quota and what is in use of it (the workload table
of the metadata database: admitted and evicted-not-yet-stopped workloads, by the flavors they
were assigned), the LocalQueues that reach it, and ``get`` the workloads holding quota and the
pending ones in queue order, each with the reason the last admission cycle gave (``queues.views``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE
from millpond.cli.resources import print_value
from millpond.errors import ConflictError, NotFoundError, UserError

if TYPE_CHECKING:
    from millpond.settings import Settings
    from millpond.store.resources import ResourceStore

API_VERSION = "kueue.x-k8s.io/v1beta2"
DEFAULT_FLAVOR = "default-flavor"
_OUTPUT = click.option("--output", "-o", type=click.Choice(["table", "json", "yaml"]), default="table",
                       show_default=True, help="A table, or the queues as JSON or YAML.")


@click.group("queue")
def queue_group() -> None:
    """Kueue queues and quotas: create a ClusterQueue with its LocalQueue, list and show them, delete them."""


def _manifest(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def _store() -> "ResourceStore":
    from millpond.scheduling.queues import kinds  # noqa: F401 - the table holds Kueue's kinds
    from millpond.store.resources import ResourceStore

    return ResourceStore()


@queue_group.command("create")
@click.argument("name")
@click.option("--cpu", help="CPU quota (cores: 8, 500m).")
@click.option("--memory", help="Memory quota (32Gi).")
@click.option("--gpus", help="GPU quota (nvidia.com/gpu: 4).")
@click.option("--gpu-memory", help="Shared-GPU memory quota in GiB (aliyun.com/gpu-mem: arena's --gpumemory).")
@click.option("--cohort", help="The cohort (project) whose queues lend each other unused quota.")
@click.option("--namespace", "-n", type=NAMESPACE_TYPE, default="default", show_default=True,
              help="Where the LocalQueue NAME is made: the project whose jobs use it.")
# Policies are checked as a manifest's are (the CRD's enums), so a wrong one is the same one line.
@click.option("--strategy", default="BestEffortFIFO", show_default=True,
              help="BestEffortFIFO, or StrictFIFO: the head blocks the queue while it does not fit.")
@click.option("--preemption", default="Never", show_default=True,
              help="withinClusterQueue: whom a workload may preempt in its queue "
                   "(Never, LowerPriority, LowerOrNewerEqualPriority).")
@click.option("--reclaim", default="Never", show_default=True,
              help="reclaimWithinCohort: whom it may preempt in the cohort to take back its lent quota "
                   "(Never, LowerPriority, Any).")
@click.option("--borrowing-limit", help="How much more than its quota it may borrow, per resource "
                                       "(cpu=4,memory=8Gi); needs --cohort.")
def create_command(name: str, cpu: str | None, memory: str | None, gpus: str | None, gpu_memory: str | None,
                   cohort: str | None, namespace: str, strategy: str, preemption: str, reclaim: str,
                   borrowing_limit: str | None) -> None:
    """Create ClusterQueue NAME with a quota and LocalQueue NAME in --namespace pointing at it."""
    from millpond.cli.resources import apply_documents
    from millpond.scheduling.queues.model import CPU, GPU, GPU_MEMORY, MEMORY

    given = ((CPU, cpu), (MEMORY, memory), (GPU, gpus), (GPU_MEMORY, gpu_memory))
    quotas = {key: value for key, value in given if value is not None}
    if not quotas:
        raise UserError("queue create: give a quota: --cpu, --memory, --gpus and/or --gpu-memory")
    limits = _limits(borrowing_limit, quotas)
    store = _store()
    from millpond.scheduling.queues.objects import STORE_NAMESPACE_OF_CLUSTER as CLUSTER

    for kind, key in (("ClusterQueue", CLUSTER), ("LocalQueue", namespace)):
        if store.get(kind, name, key) is not None:
            raise ConflictError(f'{kind} "{name}" already exists'
                                f'{f" in namespace {namespace}" if kind == "LocalQueue" else ""} '
                                "(change it with millpond apply -f, or delete it first)")
    resources = [{"name": key, "nominalQuota": value, **({"borrowingLimit": limits[key]} if key in limits else {})}
                 for key, value in quotas.items()]
    spec: dict[str, Any] = {
        "namespaceSelector": {}, "queueingStrategy": strategy,
        "preemption": {"withinClusterQueue": preemption, "reclaimWithinCohort": reclaim},
        "resourceGroups": [{"coveredResources": list(quotas), "flavors": [{"name": DEFAULT_FLAVOR,
                                                                           "resources": resources}]}],
    }
    if cohort:
        spec["cohortName"] = cohort
    documents = [_manifest("ClusterQueue", name, spec), _manifest("LocalQueue", name, {"clusterQueue": name},
                                                                  namespace)]
    if store.get("ResourceFlavor", DEFAULT_FLAVOR, CLUSTER) is None:
        documents.insert(0, _manifest("ResourceFlavor", DEFAULT_FLAVOR, {}))
    apply_documents([("queue create", n, doc) for n, doc in enumerate(documents, 1)])


_FLAG_NAMES = {"gpus": "nvidia.com/gpu", "gpu": "nvidia.com/gpu", "gpu-memory": "aliyun.com/gpu-mem"}


def _limits(text: str | None, quotas: dict[str, str]) -> dict[str, str]:
    """``cpu=4,memory=8Gi`` as {resource: limit}, each resource one the queue has a quota of."""
    limits: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = _FLAG_NAMES.get(key.strip(), key.strip())
        if not sep or key not in quotas:
            raise UserError(f"--borrowing-limit: {part.strip()!r}: use RESOURCE=AMOUNT for a resource given a quota "
                            f"({', '.join(quotas)})")
        limits[key] = value.strip()
    return limits


_TOTAL_COLUMNS = (("CPU", "cpu"), ("MEMORY", "memory"), ("GPUS", "nvidia.com/gpu"),
                  ("GPU MEMORY", "aliyun.com/gpu-mem"))


def _settings() -> "Settings":
    from millpond.scheduling.queues import kinds  # noqa: F401 - the table holds Kueue's kinds
    from millpond.settings import load_settings

    return load_settings()


@queue_group.command("list")
@_OUTPUT
def list_command(output: str) -> None:
    """Every ClusterQueue: cohort, strategy, LocalQueues, quota used of nominal, admitted and pending workloads."""
    from millpond.cli.resource_tables import format_table
    from millpond.scheduling.queues.views import current, queue_views

    views = queue_views(*current(_settings()))
    if output != "table":
        print_value({"queues": views}, output)
        return
    if not views:
        print("No queues found.", file=sys.stderr)
        return
    headers = ("NAME", "COHORT", "STRATEGY", "LOCAL QUEUES", *(title for title, _ in _TOTAL_COLUMNS),
               "ADMITTED", "PENDING")
    rows = [[view["name"], view["cohort"] or "-", view["queueingStrategy"], ",".join(view["localQueues"]) or "-",
             *(_used_of(view["totals"].get(key)) for _, key in _TOTAL_COLUMNS),
             str(view["admittedWorkloads"]), str(view["pendingWorkloads"])] for view in views]
    sys.stdout.write(format_table(headers, rows))


def _used_of(total: dict[str, str] | None) -> str:
    return f"{total['used']}/{total['nominal']}" if total else "-"


@queue_group.command("get")
@click.argument("name")
@_OUTPUT
def get_command(name: str, output: str) -> None:
    """ClusterQueue NAME: quota and usage per flavor and resource, policies, LocalQueues, who holds quota,
    and the pending workloads in order, each with why it waits."""
    from millpond.cli.resource_tables import format_table
    from millpond.scheduling.queues.views import current, queue_view

    objects, workloads = current(_settings())
    queue = objects.cluster_queues.get(name)
    if queue is None:
        raise NotFoundError(f'clusterqueues.kueue.x-k8s.io "{name}" not found')
    view = queue_view(queue, objects, workloads)
    if output != "table":
        print_value(view, output)
        return
    lines = [f"Name:            {view['name']}", f"Cohort:          {view['cohort'] or '-'}",
             f"Strategy:        {view['queueingStrategy']}",
             f"Preemption:      withinClusterQueue={view['preemption']['withinClusterQueue']} "
             f"reclaimWithinCohort={view['preemption']['reclaimWithinCohort']}",
             f"Stop policy:     {view['stopPolicy']}", f"Local queues:    {', '.join(view['localQueues']) or '-'}",
             "Quota:"]
    lines += _indented(format_table(("FLAVOR", "RESOURCE", "NOMINAL", "USED", "BORROWING LIMIT", "LENDING LIMIT"),
                                    [[row["flavor"], row["resource"], row["nominalQuota"], row["used"],
                                      row.get("borrowingLimit", "-"), row.get("lendingLimit", "-")]
                                     for row in view["quota"]]))
    lines.append(f"Admitted workloads: {view['admittedWorkloads']}")
    if view["admitted"]:
        lines += _indented(format_table(("WORKLOAD", "STATE", "REQUESTS", "FLAVORS"), [
            [w["workload"], w["state"], _pairs(w["requests"]), _pairs(w["flavors"])] for w in view["admitted"]]))
    lines.append(f"Pending workloads: {view['pendingWorkloads']}")
    if view["pending"]:
        lines += _indented(format_table(("POSITION", "WORKLOAD", "PRIORITY", "REQUESTS", "REASON"), [
            ["-" if w["position"] is None else str(w["position"]), w["workload"], str(w["priority"]),
             _pairs(w["requests"]), w["reason"] or "-"] for w in view["pending"]]))
    sys.stdout.write("\n".join(lines) + "\n")


def _indented(table: str) -> list[str]:
    return [f"  {line}" for line in table.splitlines()]


def _pairs(values: dict[str, Any]) -> str:
    return ",".join(f"{key}={value}" for key, value in values.items()) or "-"


@queue_group.command("delete")
@click.argument("name")
def delete_command(name: str) -> None:
    """Delete ClusterQueue NAME and the LocalQueues pointing at it (flavors stay: other queues may use them)."""
    from millpond.scheduling.queues.objects import STORE_NAMESPACE_OF_CLUSTER, stored_objects

    store = _store()
    stored = stored_objects(store)
    if name not in stored.cluster_queues:
        raise NotFoundError(f'clusterqueues.kueue.x-k8s.io "{name}" not found')
    for (namespace, local), queue in sorted(stored.local_queues.items()):
        if queue.cluster_queue == name and store.delete("LocalQueue", local, namespace):
            print(f'localqueue.kueue.x-k8s.io "{local}" deleted (namespace {namespace})')
    store.delete("ClusterQueue", name, STORE_NAMESPACE_OF_CLUSTER)
    print(f'clusterqueue.kueue.x-k8s.io "{name}" deleted')
