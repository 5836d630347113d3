"""What deleting a Dataset leaves behind is removed: its cache files in every tier, its index, its mounts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from millpond.settings import load_settings


def dataset_deleted(name: str, namespace: str = "default") -> None:
    """Unmount the dataset's FUSE mounts and remove its cache and index (the UFS is untouched)."""
    from millpond.datasets.cache.index import CacheIndex
    from millpond.datasets.mounts import unmount_dataset

    settings = load_settings()
    unmount_dataset(name, namespace)
    for state_dir in sorted((settings.home / "datasets" / namespace).glob(f"{name}-*")):
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
