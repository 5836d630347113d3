"""``arena top job [NAME]`` and ``arena top node [-d]``: GPU use of jobs and of this machine, as Arena prints it.

The figures come from ``training.top`` (the job store and the machine-wide ledger); this module
only lays them out in Arena's columns and summary lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from millpond.store.training import JobRecord, JobStore
    from millpond.training.top import NodeView

SEPARATOR = "-" * 91  # Arena's line above the cluster summary


def _table(rows: list[list[str]], indent: str = "") -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@click.group("top")
def top_group() -> None:
    """Display GPU usage: of training jobs (top job) or of this machine (top node)."""


@top_group.command("job")
@click.argument("name", required=False, default="")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-A", "--allNamespaces", "all_namespaces", is_flag=True, help="Jobs of every namespace.")
def top_job(name: str, namespace: str, all_namespaces: bool) -> None:
    """GPUs requested and allocated per job: NAME STATUS TRAINER AGE GPU(Requested) GPU(Allocated) NODE."""
    from millpond.store.training import JobStore
    from millpond.training import jobs, top

    store = JobStore()
    if name:
        _one_job(store, jobs.get(name, namespace, store))
        return
    rows = [top.job_row(job, store) for job in jobs.list_jobs(None if all_namespaces else namespace, store)]
    header = ["NAME", "STATUS", "TRAINER", "AGE", "GPU(Requested)", "GPU(Allocated)", "NODE"]
    lines = [["NAMESPACE", *header] if all_namespaces else header]
    for row in rows:
        cells = [row.name, row.status, row.trainer, row.age, str(row.requested), str(row.allocated), row.node]
        lines.append([row.namespace, *cells] if all_namespaces else cells)
    _table(lines)
    allocated, requested = top.totals(rows)
    click.echo("")
    click.echo(f"Total Allocated/Requested GPUs of Training Jobs: {allocated}/{requested}")


def _one_job(store: JobStore, job: JobRecord) -> None:
    """Arena's ``top job NAME``: the job, its instances with their GPU indices, its GPU count."""
    from millpond.training import views

    info = views.job_info(job, store.instances(job.uid))
    for label, value in (("Name", job.name), ("Status", job.status), ("Namespace", job.namespace),
                         ("Priority", info["priority"]), ("Trainer", job.trainer.upper()),
                         ("Duration", info["duration"])):
        click.echo(f"{label + ':':<11}{value}")
    click.echo("\nInstances:")
    rows = [["NAME", "STATUS", "GPU(Request)", "NODE", "GPU(DeviceIndex)"],
            ["----", "------", "------------", "----", "----------------"]]
    for instance in store.instances(job.uid):
        rows.append([instance.name, instance.status, str(len(instance.gpus)),
                     views.LOCAL_IP if instance.started_at else "N/A",
                     ",".join(map(str, instance.gpus)) or "N/A"])
    _table(rows, "  ")
    click.echo("\nGPUs:")
    click.echo(f"  Allocated/Requested GPUs of Job: {info['allocatedGPUs']}/{info['requestGPUs']}")


@top_group.command("node")
@click.argument("names", nargs=-1)
@click.option("-d", "--details", is_flag=True, help="Also who holds what on the node.")
@click.option("--ray", "ray_address", default="", metavar="HOST:PORT",
              help="List the nodes of this Ray cluster (default: $MILLPOND_RAY_ADDRESS).")
def top_node(names: tuple[str, ...], details: bool, ray_address: str) -> None:
    """This machine as one node (or a Ray cluster's nodes): NAME IPADDRESS ROLE STATUS GPU(Total) GPU(Allocated)."""
    import os

    from millpond.errors import NotFoundError
    from millpond.training import top

    address = ray_address or os.environ.get("MILLPOND_RAY_ADDRESS", "")
    if address:
        _ray_nodes(address, names)
        return

    node = top.node_view()
    unknown = [name for name in names if name not in (node.name, node.ip)]
    if unknown:
        raise NotFoundError(f"no node {unknown[0]}: this machine is the only node ({node.name})")
    if details:
        _node_details(node)
        return
    _table([["NAME", "IPADDRESS", "ROLE", "STATUS", "GPU(Total)", "GPU(Allocated)"],
            [node.name, node.ip, node.role, node.status, str(node.gpu_total), str(node.gpu_allocated)]])
    click.echo(SEPARATOR)
    click.echo("Allocated/Total GPUs In Cluster:")
    click.echo(f"{node.gpu_allocated}/{node.gpu_total} ({node.percent:.1f}%)")


def _node_details(node: NodeView) -> None:
    click.echo("")
    for label, value in (("Name", node.name), ("Status", node.status), ("Role", node.role),
                         ("Type", "GPUExclusive" if node.gpu_total else "none"), ("Address", node.ip)):
        click.echo(f"{label + ':':<9}{value}")
    click.echo("Instances:")
    rows = [["NAMESPACE", "NAME", "KIND", "STATUS", "GPU(Requested)", "GPU(Allocated)", "HOLDS"],
            ["---------", "----", "----", "------", "--------------", "--------------", "-----"]]
    for holder in node.holders:
        rows.append([holder.namespace or "N/A", holder.name, holder.kind, "Running", str(holder.gpus_requested),
                     ",".join(f"gpu{index}" for index in holder.gpus) or "N/A", holder.holds])
    _table(rows, "  ")
    click.echo("GPU Summary:")
    click.echo(f"  Total GPUs:     {node.gpu_total}")
    click.echo(f"  Allocated GPUs: {node.gpu_allocated}")
    click.echo("  Unhealthy GPUs: 0")


def _ray_nodes(address: str, names: tuple[str, ...]) -> None:
    """The Ray cluster's live nodes with their CPUs, memory and GPUs, total and allocated."""
    from millpond.datasets.quantity import format_bytes
    from millpond.errors import NotFoundError
    from millpond.training.ray_top import ray_nodes

    nodes = ray_nodes(address)
    unknown = [name for name in names if not any(node.node_id.startswith(name) or node.ip == name for node in nodes)]
    if unknown:
        raise NotFoundError(f"no node {unknown[0]} in the Ray cluster at {address} ({len(nodes)} nodes)")
    shown = [node for node in nodes if not names or any(node.node_id.startswith(n) or node.ip == n for n in names)]
    rows = [["NAME", "IPADDRESS", "ROLE", "STATUS", "CPU(Total)", "CPU(Allocated)", "MEMORY(Total)",
             "MEMORY(Allocated)", "GPU(Total)", "GPU(Allocated)"]]
    for node in shown:
        rows.append([node.name, node.ip, node.role, "Ready", f"{node.cpus:g}", f"{node.cpus_allocated:g}",
                     format_bytes(int(node.memory)), format_bytes(int(node.memory_allocated)),
                     f"{node.gpus:g}", f"{node.gpus_allocated:g}"])
    _table(rows)
    gpus, allocated = sum(n.gpus for n in shown), sum(n.gpus_allocated for n in shown)
    click.echo(SEPARATOR)
    click.echo("Allocated/Total GPUs In Cluster:")
    click.echo(f"{allocated:g}/{gpus:g} ({100.0 * allocated / gpus if gpus else 0.0:.1f}%)")
