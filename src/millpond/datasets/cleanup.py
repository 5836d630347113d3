"""What deleting a Dataset leaves behind is removed: its data operations, its cache files in every
tier, its index, its mounts."""

from __future__ import annotations

import sys

from millpond.datasets.cache_removal import remove_caches
from millpond.datasets.kinds import KINDS, owner_dataset
from millpond.datasets.mounts import unmount_dataset
from millpond.datasets.node_loads import clean_on_nodes
from millpond.datasets.operations.lifeline import wait_until_idle
from millpond.settings import Settings, load_settings
from millpond.store.node_caches import NodeCacheStore
from millpond.store.resources import Resource, ResourceStore

STOP_TIMEOUT_S = 30.0  # a working operation ends within about a second of its deletion; this says it hangs


def dataset_deleted(name: str, namespace: str = "default") -> None:
    """Delete the dataset's operations, unmount its FUSE mounts, remove its cache and index (not its UFS).

    In cluster mode the caches the nodes hold go too: each live node removes its own (a Ray
    task on it); a node that is gone keeps its files, named on stderr.
    """
    settings = load_settings()
    delete_operations(settings, name, namespace)
    unmount_dataset(name, namespace)
    store = NodeCacheStore(settings)
    nodes = [state.node_id for state in store.nodes_of(name, namespace)]
    if nodes and settings.ray_address:
        for problem in clean_on_nodes(settings.ray_address, nodes, name, namespace):
            print(f"warning: {problem}", file=sys.stderr)
    store.forget(name, namespace)
    remove_caches(settings.home, name, namespace)


def delete_operations(settings: Settings, name: str, namespace: str) -> list[Resource]:
    """Delete the data operations the dataset owns, as Fluid's owner references do; the deleted.

    Their processes notice within about a second and end (a scheduled one sleeping, a working
    one with the scripts it started); this waits for the working ones, so nothing writes into
    the cache removed next. One still working after ``STOP_TIMEOUT_S`` is named on stderr.
    """
    store = ResourceStore(settings)
    owned = [
        resource
        for kind, info in KINDS.items() if info.category == "operation"
        for resource in store.list(kind)
        if owner_dataset(kind, resource.spec, resource.namespace) == (name, namespace)
    ]
    deleted = [resource for resource in owned if store.delete(resource.kind, resource.name, resource.namespace)]
    for resource in deleted:
        if not wait_until_idle(settings, resource.kind, resource.name, resource.namespace, STOP_TIMEOUT_S):
            print(f"warning: {resource.kind} {resource.name} was deleted but its process is still working "
                  f"after {STOP_TIMEOUT_S:.0f}s", file=sys.stderr)
    return deleted
