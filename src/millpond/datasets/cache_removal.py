"""Removing every cache of a deleted dataset that a folder keeps: its tiers and its index.

Both the home (``cleanup.dataset_deleted``) and each Ray node holding a copy (``node_loads.clean_here``,
run there as a Ray task) remove their caches the same way; the one function lives here, under both,
so that neither imports the other.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from millpond.datasets.cache.index import CacheIndex


def remove_caches(base: Path, name: str, namespace: str) -> None:
    """Remove every cache of the dataset ``name`` kept under ``base`` (a home, or a node's folder): tiers and index."""
    for state_dir in sorted((base / "datasets" / namespace).glob(f"{name}-*")):
        if state_dir.name.rsplit("-", 1)[0] != name or not (state_dir / "index.db").exists():
            continue
        index = CacheIndex(state_dir)
        try:
            tier_paths = json.loads(index.meta("tier_paths") or "[]")
        finally:
            index.close()
        for tier_path in tier_paths:
            shutil.rmtree(Path(tier_path), ignore_errors=True)
        shutil.rmtree(state_dir, ignore_errors=True)
