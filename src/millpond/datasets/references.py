"""Fluid's dataset references: a Dataset whose one mount point is ``dataset://NAMESPACE/NAME`` is that dataset.

Fluid shares a dataset (and its cache) across namespaces only this way (its ThinRuntime controller binds the
referencing Dataset to the referenced one's runtime): namespace B applies a Dataset of its own naming A's, and
B's pods mount it by its own name. Here a reference is followed where a dataset is configured or mounted
(``config.load_config``, ``shared_mounts.use``): B's processes see A's dataset through A's one shared mount.
One hop only, as Fluid: a reference to a reference is refused.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from millpond.datasets.mount_points import REFERENCE_SCHEME
from millpond.errors import UserError
from millpond.settings import Settings
from millpond.store.resources import read_manifest


def referenced(manifest: dict[str, Any]) -> tuple[str, str] | None:
    """(name, namespace) of the dataset a Dataset manifest references, or None when it names its own storage."""
    mounts = (manifest.get("spec") or {}).get("mounts") or []
    if len(mounts) != 1 or not isinstance(mounts[0], dict):
        return None
    point = urlsplit(str(mounts[0].get("mountPoint") or ""))
    if point.scheme.lower() != REFERENCE_SCHEME:
        return None
    return point.path.strip("/"), point.netloc


def resolve(name: str, namespace: str, settings: Settings) -> tuple[str, str]:
    """The dataset that ``namespace/name`` is: itself, or the one it references (which must exist and be no
    reference itself)."""
    found = read_manifest(settings, "Dataset", name, namespace)
    target = referenced(found[1]) if found is not None else None
    if target is None:
        return name, namespace
    other = read_manifest(settings, "Dataset", target[0], target[1])
    if other is None:
        raise UserError(f"dataset {namespace}/{name} references dataset {target[1]}/{target[0]}, which does not exist")
    if referenced(other[1]) is not None:
        raise UserError(f"dataset {namespace}/{name} references {target[1]}/{target[0]}, itself a reference: "
                        "a reference names a dataset with storage of its own")
    return target
