"""``arena top job [NAME]`` and ``arena top node [-d]``: GPU use of jobs and of this machine, as Arena prints it.

The figures come from ``training.top`` (the job store and the machine-wide ledger) and the GPUs'
own metrics from ``scheduling.gpu_metrics`` (nvidia-smi; ``N/A`` without it); this module only
lays them out in Arena's columns and summary lines. ``-r/--refresh`` (Arena's "display
continuously") redraws every 2 seconds, as Arena does, until Ctrl-C, which ends it with exit 0:
in a terminal the screen is cleared before each frame, into a pipe each frame is followed by
Arena's dated separator line.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE
from millpond.errors import MillpondError, UserError

if TYPE_CHECKING:
    from millpond.scheduling.gpu_metrics import GpuMetric
    from millpond.store.training import JobRecord, JobStore
    from millpond.training.top import NodeView

SEPARATOR = "-" * 91  # Arena's line above the cluster summary
REFRESH_S = 2.0  # Arena's fixed refresh period


def _refresh(draw: Callable[[], None], separator: str) -> None:
    """Draw, wait, draw again until interrupted. A frame that fails (the job was deleted meanwhile)
    prints its one error line and the loop goes on, as Arena's does."""
    tty = sys.stdout.isatty()
    try:
        while True:
            if tty:
                click.clear()
            try:
                draw()
            except MillpondError as exc:
                click.echo(f"error: {exc}", err=True)
            if not tty:
                click.echo(separator % dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S"))
            sys.stdout.flush()
            time.sleep(REFRESH_S)
    except KeyboardInterrupt:  # Ctrl-C is how a refreshing top is meant to end
        return


def _mib(value: float) -> str:
    return f"{value / (1024 * 1024):.1f}"


def _table(rows: list[list[str]], indent: str = "") -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@click.group("top")
def top_group() -> None:
    """Display GPU usage: of training jobs (top job) or of this machine (top node)."""


@top_group.command("job")
@click.argument("name", required=False, default="")
@click.option("-n", "--namespace", type=NAMESPACE_TYPE, default="default", show_default=True)
@click.option("-A", "--all-namespaces", "--allNamespaces", "all_namespaces", is_flag=True,
              help="Jobs of every namespace.")
@click.option("-r", "--refresh", is_flag=True, help="Display continuously (every 2s, until Ctrl-C); needs NAME.")
@click.option("-i", "--instance", default="", help="Display only this instance of the job.")
@click.option("-o", "--output", type=click.Choice(["", "wide", "json"]), default="",
              help="wide: also CPU and memory allocated and used, GPU memory used; json: all of it as JSON.")
def top_job(name: str, namespace: str, all_namespaces: bool, refresh: bool, instance: str, output: str) -> None:
    """GPUs requested and allocated per job: NAME STATUS TRAINER AGE GPU(Requested) GPU(Allocated) NODE.

    -o wide adds each job's CPU and memory allocated (the ledger) and used (its instances' processes,
    measured over a short sample), and its GPUs' memory used (NVML); -o json prints it all.
    """
    from millpond.store.training import JobStore
    from millpond.training import jobs

    store = JobStore()
    if refresh and not name:
        raise UserError("you must specify the job name when using `-r` flag")
    if instance and not name:
        raise UserError("-i/--instance needs the job's NAME")
    if refresh and output == "json":
        raise UserError("-r/--refresh draws a table: it cannot be used with -o json")
    if output:
        selected = [jobs.get(name, namespace, store)] if name else jobs.list_jobs(
            None if all_namespaces else namespace, store)
        _jobs_measured(store, selected, output, all_namespaces or bool(name))
        return
    if name:
        jobs.get(name, namespace, store)  # a job that does not exist is an error before any frame

        def draw() -> None:
            _one_job(store, jobs.get(name, namespace, store), instance)

        if refresh:
            _refresh(draw, "------------------------------------------- %s "
                           "----------------------------------------------------")
        else:
            draw()
        return
    _all_jobs(store, namespace, all_namespaces)


def _all_jobs(store: JobStore, namespace: str, all_namespaces: bool) -> None:
    from millpond.training import jobs, top

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


def _jobs_measured(store: JobStore, selected: list[JobRecord], output: str, with_namespace: bool) -> None:
    """``-o wide``/``-o json``: Arena's columns, then what each job has allocated and uses."""
    import json

    from millpond.datasets.quantity import format_bytes
    from millpond.training import top

    measured, _node = top.measure(selected, store)
    rows = [(top.job_row(job, store), measured[job.uid]) for job in selected]
    if output == "json":
        allocated, requested = top.totals([row for row, _ in rows])
        click.echo(json.dumps({"jobs": [{
            "name": row.name, "namespace": row.namespace, "status": row.status, "trainer": row.trainer,
            "age": row.age, "node": row.node, "requestGPUs": row.requested, "allocatedGPUs": row.allocated,
            **used.as_json()} for row, used in rows],
            "totalAllocatedGPUs": allocated, "totalRequestedGPUs": requested}, indent=2))
        return

    def gib(value: int | None) -> str:
        return "N/A" if value is None else format_bytes(value)

    header = ["NAME", "STATUS", "TRAINER", "AGE", "GPU(Requested)", "GPU(Allocated)", "NODE",
              "CPU(Allocated)", "CPU(Used)", "MEMORY(Allocated)", "MEMORY(Used)", "GPU_MEMORY(Used)"]
    lines = [["NAMESPACE", *header] if with_namespace else header]
    for row, used in rows:
        cells = [row.name, row.status, row.trainer, row.age, str(row.requested), str(row.allocated), row.node,
                 f"{used.cpu_allocated:g}", f"{used.cpu_used:.2f}", gib(used.memory_allocated),
                 gib(used.memory_used), gib(used.gpu_memory_used)]
        lines.append([row.namespace, *cells] if with_namespace else cells)
    _table(lines)
    allocated, requested = top.totals([row for row, _ in rows])
    click.echo("")
    click.echo(f"Total Allocated/Requested GPUs of Training Jobs: {allocated}/{requested}")


def _one_job(store: JobStore, job: JobRecord, only: str = "") -> None:
    """Arena's ``top job NAME``: the job, its instances with their GPU indices and each GPU's
    duty cycle and memory (one line per GPU), its GPU count."""
    from millpond.scheduling import gpu_metrics
    from millpond.training import views

    instances = store.instances(job.uid)
    if only and only not in {i.name for i in instances}:
        raise UserError(f"the job {job.name} has no instance {only}")
    metrics = gpu_metrics.read()
    info = views.job_info(job, instances)
    for label, value in (("Name", job.name), ("Status", job.status), ("Namespace", job.namespace),
                         ("Priority", info["priority"]), ("Trainer", job.trainer.upper()),
                         ("Duration", info["duration"])):
        click.echo(f"{label + ':':<11}{value}")
    click.echo("\nInstances:")
    rows = [["NAME", "STATUS", "GPU(Request)", "NODE", "GPU(DeviceIndex)", "GPU(DutyCycle)", "GPU_MEMORY(Used/Total)"],
            ["----", "------", "------------", "----", "----------------", "--------------", "----------------------"]]
    shares = views.role_shares(job)
    for instance in instances:
        if only and instance.name != only:
            continue
        share = shares.get(instance.role)
        first = [instance.name, instance.status, views.share_words(*share) if share else str(len(instance.gpus)),
                 views.LOCAL_IP if instance.started_at else "N/A"]
        held = views.instance_metrics(instance, metrics)
        if not held:
            rows.append([*first, ",".join(map(str, instance.gpus)) or "N/A", "N/A", "N/A"])
            continue
        for number, (index, metric) in enumerate(sorted(held.items(), key=lambda item: int(item[0]))):
            lead = first if number == 0 else [""] * len(first)
            rows.append([*lead, index, f"{metric.duty_cycle:.1f}%",
                         f"{_mib(metric.memory_used)}/{_mib(metric.memory_total)}(MiB)"])
    _table(rows, "  ")
    click.echo("\nGPUs:")
    click.echo(f"  Allocated/Requested GPUs of Job: {info['allocatedGPUs']}/{info['requestGPUs']}")


@top_group.command("node")
@click.argument("names", nargs=-1)
@click.option("-d", "--details", is_flag=True, help="Also who holds what on the node, and each GPU's use.")
@click.option("-r", "--refresh", is_flag=True, help="Display continuously (every 2s, until Ctrl-C); with -d.")
@click.option("-s", "--share", is_flag=True, help="GPU sharing: each GPU's memory allocated to shares, in GiB.")
@click.option("--ray", "ray_address", default="", metavar="HOST:PORT",
              help="List the nodes of this Ray cluster (default: $MILLPOND_RAY_ADDRESS).")
@click.option("-o", "--output", type=click.Choice(["", "json"]), default="",
              help="json: the node(s) with CPU, memory and GPUs: capacity, allocated and used.")
def top_node(names: tuple[str, ...], details: bool, refresh: bool, share: bool, ray_address: str,
             output: str) -> None:
    """This machine as one node (or a Ray cluster's nodes): NAME IPADDRESS ROLE STATUS GPU(Total) GPU(Allocated).

    -d adds who holds what, each GPU's use, and the node's CPU and memory: what the ledger may hand
    out, what it has allocated, and what the machine uses (all processes, measured over a short sample);
    -s each GPU's memory allocated to shares.
    """
    import os

    from millpond.errors import NotFoundError
    from millpond.scheduling import gpu_metrics
    from millpond.training import top

    if refresh and output:
        raise UserError("-r/--refresh draws a table: it cannot be used with -o json")
    address = ray_address or os.environ.get("MILLPOND_RAY_ADDRESS", "")
    if address:
        _ray_nodes(address, names, output)
        return

    node = top.node_view()
    unknown = [name for name in names if name not in (node.name, node.ip)]
    if unknown:
        raise NotFoundError(f"no node {unknown[0]}: this machine is the only node ({node.name})")
    if output == "json":
        _node_json(node)
        return
    if refresh and not details:
        raise UserError("-r/--refresh displays the node's details: use it with -d")
    if share and details:
        raise UserError("-s/--share and -d/--details are two views: give one")
    if share:
        _node_shares(node)
        return
    if details:
        if refresh:
            _refresh(lambda: _node_details(top.node_view(), gpu_metrics.read()),
                     "------------------------- %s -------------------------------------")
        else:
            _node_details(node, gpu_metrics.read())
        return
    _table([["NAME", "IPADDRESS", "ROLE", "STATUS", "GPU(Total)", "GPU(Allocated)"],
            [node.name, node.ip, node.role, node.status, str(node.gpu_total), str(node.gpu_allocated)]])
    click.echo(SEPARATOR)
    click.echo("Allocated/Total GPUs In Cluster:")
    click.echo(f"{node.gpu_allocated}/{node.gpu_total} ({node.percent:.1f}%)")


def _gib(value: int) -> str:
    return f"{value / 2**30:g}"


def _node_shares(node: NodeView) -> None:
    """gpushare's view (``kubectl inspect gpushare``, Arena's ``top node -s``): per GPU, GiB allocated/total;
    a GPU held whole counts as all allocated."""
    cells, allocated, total = [], 0, 0
    for gpu in node.gpus:
        used = gpu.memory_total if gpu.whole_by else gpu.memory_shared
        cells.append(f"{_gib(used)}/{_gib(gpu.memory_total)}")
        allocated, total = allocated + used, total + gpu.memory_total
    _table([["NAME", "IPADDRESS", *(f"GPU{gpu.index}(Allocated/Total)" for gpu in node.gpus), "GPU Memory(GiB)"],
            [node.name, node.ip, *cells, f"{_gib(allocated)}/{_gib(total)}"]])
    click.echo(SEPARATOR)
    click.echo("Allocated/Total GPU Memory In Cluster:")
    click.echo(f"{_gib(allocated)}/{_gib(total)} (GiB, {100.0 * allocated / total if total else 0.0:.1f}%)")


def _node_details(node: NodeView, metrics: dict[int, GpuMetric]) -> None:
    click.echo("")
    kind = ("GPUShare" if node.shared else "GPUExclusive") if node.gpu_total else "none"
    for label, value in (("Name", node.name), ("Status", node.status), ("Role", node.role),
                         ("Type", kind), ("Address", node.ip)):
        click.echo(f"{label + ':':<9}{value}")
    click.echo("Instances:")
    rows = [["NAMESPACE", "NAME", "KIND", "STATUS", "GPU(Requested)", "GPU(Allocated)", "HOLDS"],
            ["---------", "----", "----", "------", "--------------", "--------------", "-----"]]
    for holder in node.holders:
        rows.append([holder.namespace or "N/A", holder.name, holder.kind, "Running", str(holder.gpus_requested),
                     ",".join([*(f"gpu{index}" for index in holder.gpus),
                               *(f"gpu{index}(share)" for index in holder.share_gpus)]) or "N/A", holder.holds])
    _table(rows, "  ")
    _node_gpus(node, metrics)
    _node_resources()
    click.echo("GPU Summary:")
    click.echo(f"  Total GPUs:     {node.gpu_total}")
    click.echo(f"  Allocated GPUs: {node.gpu_allocated}")
    click.echo("  Unhealthy GPUs: 0")


def _node_resources() -> None:
    """CPU and memory of the node: what the ledger may hand out, what it handed out, what is used."""
    from millpond.datasets.quantity import format_bytes
    from millpond.store.training import JobStore
    from millpond.training import top

    _jobs, node = top.measure([], JobStore())
    used = node.used
    click.echo("CPU/Memory:")
    _table([["RESOURCE", "CAPACITY", "ALLOCATED", "USED", "MACHINE(Total)"],
            ["--------", "--------", "---------", "----", "--------------"],
            ["cpu", f"{node.cpu_capacity:g}", f"{used.cpu_allocated:g}", f"{used.cpu_used:.2f}", str(node.cpu_cores)],
            ["memory", format_bytes(node.memory_capacity), format_bytes(used.memory_allocated),
             format_bytes(used.memory_used), format_bytes(node.memory_total)]], "  ")


def _node_json(node: NodeView) -> None:
    """``top node -o json``: the node, its holders, and its CPU, memory and GPUs allocated and used."""
    import json

    from millpond.scheduling import gpu_metrics
    from millpond.store.training import JobStore
    from millpond.training import top

    _jobs, measured = top.measure([], JobStore())
    metrics = gpu_metrics.read()
    click.echo(json.dumps({"nodes": [{
        "name": node.name, "ipAddress": node.ip, "role": node.role, "status": node.status,
        "totalGPUs": node.gpu_total, "allocatedGPUs": node.gpu_allocated, **measured.as_json(),
        "gpus": [{"index": index, **(metrics[index].as_arena() if index in metrics else {})}
                 for index in node.gpu_indices],
        "instances": [{"namespace": h.namespace, "name": h.name, "kind": h.kind, "requestGPUs": h.gpus_requested,
                       "gpus": list(h.gpus), "holds": h.holds} for h in node.holders],
    }], "totalGPUs": node.gpu_total, "allocatedGPUs": node.gpu_allocated}, indent=2))


def _node_gpus(node: NodeView, metrics: dict[int, GpuMetric]) -> None:
    """Arena's per-GPU table under metrics: each device's memory and duty cycle, and who holds it."""
    click.echo("GPUs:")
    held = {index: f"{holder.namespace}/{holder.name}" if holder.namespace else holder.name
            for holder in node.holders for index in holder.gpus}
    states = {gpu.index: gpu for gpu in node.gpus}
    rows = [["INDEX", "MEMORY(Total)", "MEMORY(Used)", "DUTY_CYCLE", "SHARED(GiB)", "HELD_BY"],
            ["-----", "-------------", "------------", "----------", "-----------", "-------"]]
    for index in node.gpu_indices:
        metric = metrics.get(index)
        used = (f"{_mib(metric.memory_total)} MiB", f"{_mib(metric.memory_used)} MiB",
                f"{metric.duty_cycle:.1f}%") if metric else ("N/A", "N/A", "N/A")
        state = states.get(index)
        shared = f"{_gib(state.memory_shared)}/{_gib(state.memory_total)}" if state and state.shared_by else "-"
        by = held.get(index) or (", ".join(dict.fromkeys(n.partition(" ")[2] for n in state.shared_by))
                                 if state and state.shared_by else "-")
        rows.append([str(index), *used, shared, by])
    _table(rows, "  ")


def _ray_nodes(address: str, names: tuple[str, ...], output: str = "") -> None:
    """The Ray cluster's live nodes with their CPUs, memory and GPUs, total and allocated."""
    from millpond.datasets.quantity import format_bytes
    from millpond.errors import NotFoundError
    from millpond.training.ray_top import ray_nodes

    nodes = ray_nodes(address)
    unknown = [name for name in names if not any(node.node_id.startswith(name) or node.ip == name for node in nodes)]
    if unknown:
        raise NotFoundError(f"no node {unknown[0]} in the Ray cluster at {address} ({len(nodes)} nodes)")
    shown = [node for node in nodes if not names or any(node.node_id.startswith(n) or node.ip == n for n in names)]
    if output == "json":
        import dataclasses
        import json

        click.echo(json.dumps({"nodes": [{**dataclasses.asdict(node), "name": node.name} for node in shown],
                               "totalGPUs": sum(n.gpus for n in shown),
                               "allocatedGPUs": sum(n.gpus_allocated for n in shown)}, indent=2))
        return
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
