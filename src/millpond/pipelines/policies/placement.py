"""Where the task runs: its demand for a runner placing it on another machine (a Ray node), and
in cluster mode the node already caching the datasets it mounts, preferred."""

from __future__ import annotations

from dataclasses import replace

from millpond.datasets.placement import preferred_node_of
from millpond.pipelines.cluster import demand
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    request = launch.the_request()
    request.demand = demand(launch.resources)
    datasets = launch.platform.datasets if launch.platform is not None else []
    if run.settings.ray_address and datasets:
        preferred = preferred_node_of([(name, "default") for name in datasets], run.settings)
        request.demand = replace(request.demand, prefer_node=preferred)
    return PROCEED
