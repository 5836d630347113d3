"""A Dataset and its runtime, resolved into what the cache engine needs on this machine.

Fluid binds a runtime to the dataset of the same name; the runtime's ``tieredstore`` says
where the cache lives. Here that becomes a list of tiers (MEM → SSD → HDD), each a folder
with a quota and watermarks, and the dataset's mounts become UFS URIs with their options
and credentials (``encryptOptions`` resolved from millpond secrets, never stored elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millpond.datasets.references import resolve
from millpond.durations import Duration, parse_alluxio_duration, parse_go_duration
from millpond.errors import UserError
from millpond.quantities import parse_bytes
from millpond.settings import Settings, load_settings
from millpond.store.resources import read_manifest
from millpond.store.secrets import ConfigStore

RUNTIME_KINDS = (
    "AlluxioRuntime", "JuiceFSRuntime", "JindoRuntime", "ThinRuntime", "EFCRuntime", "VineyardRuntime", "CacheRuntime",
)
MEDIUM_ORDER = {"MEM": 0, "SSD": 1, "HDD": 2}
DEFAULT_BLOCK_SIZE = 4 << 20
DEFAULT_METADATA_TTL_S = 60.0
DEFAULT_QUOTA = 2 << 30  # a runtime without tieredstore still caches: 2 GiB on disk under the home
TTL_ANNOTATION = "data.millpond.io/metadata-ttl"  # a Go duration: 30s, 5m, 1h30m; negative: never re-list
SYNC_INTERVAL_PROPERTY = "alluxio.user.file.metadata.sync.interval"  # Alluxio's: 60000 (ms), 5min; -1: never


@dataclass(frozen=True)
class Tier:
    """One cache level: where its files go, how much it may hold, when eviction starts and stops."""

    index: int
    medium: str
    path: Path
    quota: int
    high: float
    low: float


@dataclass(frozen=True)
class Mount:
    """One mount of a dataset: a UFS URI shown at ``path`` inside the dataset's namespace."""

    name: str
    uri: str
    path: str  # '' for the dataset root, else 'a/b' (no leading slash)
    options: dict[str, str] = field(repr=False)
    read_only: bool

    def __repr__(self) -> str:  # options may hold resolved credentials
        return f"Mount(name={self.name!r}, uri={self.uri!r}, path={self.path!r}, read_only={self.read_only})"


@dataclass(frozen=True)
class CacheNode:
    """A cluster node serving a dataset from its own cache (Fluid's per-node worker).

    A Ray task runs with ``MILLPOND_NODE_DIR`` (the node's millpond folder) and
    ``MILLPOND_RAY_NODE_ID`` (Ray's id for the node) set: a dataset opened there keeps its
    cache tiers and index under that folder, never in the engine's home.
    """

    node_id: str
    folder: Path

    @property
    def key(self) -> str:
        """A short name for the node in shared tier folders (an explicit tieredstore path is every node's)."""
        return f"node-{self.node_id[:12]}"


# runners.ray_node's NODE_DIR_VAR and NODE_ID_VAR, named here so that opening a dataset (every
# FUSE mount and millpond:// reader starts with it) need not import the cluster runner (~20 ms).
NODE_DIR_VAR, NODE_ID_VAR = "MILLPOND_NODE_DIR", "MILLPOND_RAY_NODE_ID"


def this_node() -> CacheNode | None:
    """The cluster node this process runs on, or None outside cluster mode (the engine's own machine)."""
    folder, node_id = os.environ.get(NODE_DIR_VAR), os.environ.get(NODE_ID_VAR)
    if not folder or not node_id:
        return None
    return CacheNode(node_id=node_id, folder=Path(folder))


def mounts_home() -> Path:
    """Where this machine keeps its dataset mounts (their folders, records and leases): the node's
    folder on a cluster node — a mount is that machine's, whatever home it shares — else the home."""
    node = this_node()
    if node is not None:
        return node.folder
    return load_settings().home


@dataclass(frozen=True)
class DatasetConfig:
    """Everything the engine needs to serve one dataset."""

    name: str
    namespace: str
    uid: str
    runtime_kind: str | None
    mounts: tuple[Mount, ...]
    tiers: tuple[Tier, ...]
    read_only: bool
    metadata_ttl_s: float
    state_dir: Path  # index and locks
    block_size: int = DEFAULT_BLOCK_SIZE
    node: CacheNode | None = None  # cluster mode: the node whose cache this is (its tiers and index are there)
    replicas: int | None = None  # the runtime's ``replicas``: how many nodes may hold a cache (None: every node)

    @property
    def capacity(self) -> int:
        return sum(tier.quota for tier in self.tiers)

    def fingerprint(self) -> str:
        """Changes when the mounts change: the index's UFS metadata is then stale."""
        text = json.dumps([[m.uri, m.path] for m in self.mounts], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def mount_path(mount: dict[str, Any]) -> str:
    """Where a mount appears in the dataset: its ``path``, else ``/<name>`` (Fluid's default; JuiceFS: the root)."""
    if not mount.get("path") and str(mount.get("mountPoint", "")).startswith("juicefs://"):
        return ""  # a JuiceFS runtime shows its file system (or the subfolder named) at the dataset's root
    path = mount.get("path") or "/" + str(mount.get("name") or "")
    return posixpath.normpath("/" + path).strip("/")


def _ratio(value: Any, default: float) -> float:
    return float(value) if value not in (None, "") else default


def tiers_of(
    runtime: dict[str, Any] | None, dataset_dir: str, settings: Settings, node: CacheNode | None = None
) -> tuple[Tier, ...]:
    """The runtime's tieredstore levels, fastest first; a single disk tier when it has none.

    On a cluster node, what would be under the home is under the node's folder, and an
    explicit path gets the node's key (each machine has its own ``/dev/shm``; local nodes
    sharing one machine must not share files).
    """
    base = node.folder if node is not None else settings.home
    if node is not None:
        dataset_dir = f"{node.key}/{dataset_dir}"
    levels = ((runtime or {}).get("spec") or {}).get("tieredstore", {}).get("levels") or []
    tiers: list[Tier] = []
    for level in sorted(levels, key=lambda lv: MEDIUM_ORDER.get(str(lv.get("mediumtype", "SSD")), 1)):
        medium = str(level.get("mediumtype") or "SSD")
        paths = [p for p in str(level.get("path") or ("/dev/shm" if medium == "MEM" else "")).split(",") if p]
        if not paths:
            paths = [str(base / "cache" / medium.lower())]
        quotas = [q for q in str(level.get("quotaList") or "").split(",") if q]
        total = parse_bytes(level["quota"], "quota") if level.get("quota") not in (None, "") else DEFAULT_QUOTA
        for position, path in enumerate(paths):
            quota = parse_bytes(quotas[position], "quotaList item") if position < len(quotas) else total // len(paths)
            tiers.append(
                Tier(
                    index=len(tiers), medium=medium, path=Path(path) / "millpond" / dataset_dir, quota=quota,
                    high=_ratio(level.get("high"), 0.95), low=_ratio(level.get("low"), 0.7),
                )
            )
    if not tiers:
        tiers.append(Tier(0, "SSD", base / "cache" / "ssd" / dataset_dir, DEFAULT_QUOTA, 0.95, 0.7))
    return tuple(tiers)


def ttl_seconds(duration: Duration) -> float:
    """A metadata TTL in seconds: a negative one means never re-list (∞), as Alluxio's ``-1``."""
    return float("inf") if duration.nanoseconds < 0 else duration.seconds


def annotation_ttl(annotations: dict[str, Any]) -> Duration | None:
    """The ``data.millpond.io/metadata-ttl`` annotation (a Go duration), if set; DurationError names it."""
    text = annotations.get(TTL_ANNOTATION)
    return None if text is None else parse_go_duration(text, f"metadata.annotations[{TTL_ANNOTATION}]:")


def property_ttl(properties: dict[str, Any]) -> Duration | None:
    """The runtime property ``alluxio.user.file.metadata.sync.interval`` (Alluxio's notation), if set."""
    text = properties.get(SYNC_INTERVAL_PROPERTY)
    return None if text is None else parse_alluxio_duration(text, f"spec.properties[{SYNC_INTERVAL_PROPERTY}]:")


def metadata_ttl(dataset: dict[str, Any], runtime: dict[str, Any] | None) -> float:
    """How long listed UFS metadata is trusted before a read looks again (∞ for a negative TTL).

    The dataset's annotation wins over the runtime's property; 60 s when neither is set.
    """
    duration = annotation_ttl((dataset.get("metadata") or {}).get("annotations") or {})
    if duration is None:
        duration = property_ttl(((runtime or {}).get("spec") or {}).get("properties") or {})
    return DEFAULT_METADATA_TTL_S if duration is None else ttl_seconds(duration)


def resolve_options(mount: dict[str, Any], shared: dict[str, Any], secrets: Any, where: str) -> dict[str, str]:
    """A mount's options with ``encryptOptions`` filled in from millpond secrets."""
    options = {str(k): str(v) for k, v in (shared.get("sharedOptions") or {}).items()}
    options.update({str(k): str(v) for k, v in (mount.get("options") or {}).items()})
    encrypt_options = [*(shared.get("sharedEncryptOptions") or []), *(mount.get("encryptOptions") or [])]
    for position, item in enumerate(encrypt_options):
        ref = ((item.get("valueFrom") or {}).get("secretKeyRef")) or {}
        secret_name, key = ref.get("name"), ref.get("key")
        try:
            values = secrets.get("secret", str(secret_name))
        except KeyError:
            raise UserError(
                f"{where}.encryptOptions[{position}]: secret {secret_name!r} not found "
                f"(millpond secret create {secret_name} ...)"
            ) from None
        if key not in values:
            raise UserError(f"{where}.encryptOptions[{position}]: secret {secret_name!r} has no key {key!r}")
        options[str(item.get("name"))] = values[key]
    return options


def build_config(
    dataset: dict[str, Any], runtime: dict[str, Any] | None, uid: str, settings: Settings | None = None
) -> DatasetConfig:
    """Resolve manifests (as applied) into a DatasetConfig; UserError names what cannot be resolved."""
    settings = settings or load_settings()
    meta = dataset.get("metadata") or {}
    name, namespace = str(meta["name"]), str(meta.get("namespace") or "default")
    spec = dataset.get("spec") or {}
    secrets = ConfigStore(settings.home).in_namespace(namespace)  # its secretKeyRefs name its namespace's
    modes = spec.get("accessModes") or ["ReadOnlyMany"]
    read_only = not any(mode in ("ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod") for mode in modes)
    mounts = []
    for position, raw in enumerate(spec.get("mounts") or []):
        where = f"Dataset {name}: spec.mounts[{position}]"
        mounts.append(
            Mount(
                name=str(raw.get("name") or f"mount{position}"),
                uri=str(raw["mountPoint"]),
                path=mount_path(raw),
                options=resolve_options(raw, spec, secrets, where),
                read_only=read_only or bool(raw.get("readOnly")),
            )
        )
    dataset_dir = f"{namespace}/{name}-{uid[:8]}"
    node = this_node()
    replicas = ((runtime or {}).get("spec") or {}).get("replicas")
    return DatasetConfig(
        name=name, namespace=namespace, uid=uid,
        runtime_kind=(runtime or {}).get("kind"),
        mounts=tuple(mounts),
        tiers=tiers_of(runtime, dataset_dir, settings, node),
        read_only=read_only,
        metadata_ttl_s=metadata_ttl(dataset, runtime),
        state_dir=(node.folder if node is not None else settings.home) / "datasets" / dataset_dir,
        node=node,
        replicas=replicas if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > 0 else None,
    )


def bound_runtime(store: Any, name: str, namespace: str = "default") -> Any | None:
    """The runtime resource of the same name as the dataset (Fluid's binding rule), if any."""
    for kind in RUNTIME_KINDS:
        found = store.get(kind, name, namespace)
        if found is not None:
            return found
    return None


def load_config(name: str, namespace: str = "default", settings: Settings | None = None) -> DatasetConfig:
    """The applied dataset ``name`` and its bound runtime; UserError when there is no such dataset. A reference
    (``dataset://``) is the dataset it names (``references``)."""
    settings = settings or load_settings()
    name, namespace = resolve(name, namespace, settings)
    dataset = read_manifest(settings, "Dataset", name, namespace)
    if dataset is None:
        raise UserError(f"dataset {name!r} not found (millpond apply -f DATASET.yaml first)")
    runtime = None
    for kind in RUNTIME_KINDS:
        found = read_manifest(settings, kind, name, namespace)
        if found is not None:
            runtime = found[1]
            break
    return build_config(dataset[1], runtime, dataset[0], settings)
