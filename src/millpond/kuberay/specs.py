"""A RayCluster's spec read as what runs here: a head and worker groups of local Ray nodes.

Each node of a group is one ``ray start`` on this machine. What it is given follows KubeRay's
pod-to-``ray start`` rules (``ray-operator/controllers/ray/common/pod.go``), the Ray container
being the pod's first container, as KubeRay's:

- Ray's logical resources (``--num-cpus``, ``--memory``, ``--num-gpus``): the container's
  *limits* (its requests where it has no limit), CPUs rounded up to a whole number as KubeRay
  does; ``rayStartParams`` win where they name them (``num-cpus``, ``num-gpus``, ``memory``,
  ``resources``, ``object-store-memory``). Ray's CPUs are logical slots, so a node may declare
  more CPUs than the machine has cores, as a pod's Ray may on a node of its own;
- what the pod *requests* (its requests, else its limits): what KubeRay sums into
  ``status.desiredCPU``/``desiredMemory``/``desiredGPU``, what Kueue admits and what the
  machine's ledger must hold before anything starts;
- the container's plain ``env`` (a ``valueFrom`` is refused: nothing here resolves it).

Refused in one line, nothing stored: a TPU (``google.com/tpu``: GKE's TPU slices), ``minReplicas``
above ``maxReplicas`` (KubeRay's webhook), more nodes than kubelet's max-pods or than this
machine's memory holds at a Ray node's floor, and a node declaring more CPUs than the machine
could run worker processes for (Ray starts a worker per CPU slot). A request larger than the
machine's free CPU or memory is accepted and waits, as KubeRay's pods wait unschedulable.
Replicas outside [min, max] are clamped as KubeRay's controller does.

Nothing here imports Ray: the CLI resolves these kinds often.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from millpond.errors import UserError
from millpond.quantities import Format, Quantity, QuantityError, parse_quantity

GPU = "nvidia.com/gpu"
TPU = "google.com/tpu"
HEAD = "headgroup"  # the head's group name, as KubeRay's ray.io/group label names it
HEAD_MEMORY_FLOOR = 600 * 2**20  # an idle head (GCS, raylet, dashboard) measured ~600 MiB (ARCHITECTURE.md)
WORKER_MEMORY_FLOOR = 256 * 2**20  # a worker node (raylet, agents)
# rayStartParams millpond passes on; the ones naming ports and addresses are millpond's (every cluster
# gets its own free ports on the loopback); the rest are noted and not used.
HONOURED_PARAMS = ("num-cpus", "num-gpus", "memory", "resources", "object-store-memory")
OWN_PARAMS = ("port", "dashboard-host", "dashboard-port", "node-ip-address", "address", "block",
              "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "metrics-export-port",
              "temp-dir", "include-dashboard", "ray-client-server-port", "node-manager-port",
              "object-manager-port", "min-worker-port", "max-worker-port", "redis-password")


@dataclass(frozen=True)
class NodeShape:
    """What one Ray node of a group is: ``ray start``'s resources, and what its pod requests."""

    num_cpus: int
    num_gpus: int
    memory_bytes: int  # Ray's --memory (0: Ray's default, the machine's)
    object_store_bytes: int  # 0: Ray's default
    resources: dict[str, float] = field(default_factory=dict)  # --resources
    request_cpu: Fraction = Fraction(0)  # CPUs the pod requests
    request_memory: int = 0
    request_gpus: int = 0
    memory_format: Format = Format.BINARY_SI  # how its memory was written (desiredMemory prints alike)
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class NodeGroup:
    """The head (``name`` "headgroup") or one worker group, with its replica counts."""

    name: str
    head: bool
    replicas: int  # clamped to [min, max]; 1 for the head
    min_replicas: int
    max_replicas: int
    suspended: bool
    shape: NodeShape


@dataclass(frozen=True)
class ClusterSpec:
    head: NodeGroup
    workers: tuple[NodeGroup, ...]
    suspend: bool
    notes: tuple[str, ...] = ()

    @property
    def groups(self) -> tuple[NodeGroup, ...]:
        return (self.head, *self.workers)

    def desired_workers(self) -> int:
        return sum(0 if group.suspended else group.replicas for group in self.workers)

    def desired(self) -> tuple[Fraction, int, int, Format]:
        """CPUs, memory bytes and GPUs every desired node requests together (KubeRay's desired*)."""
        cpu, memory, gpus = Fraction(0), 0, 0
        for group in self.groups:
            count = 1 if group.head else (0 if group.suspended else group.replicas)
            cpu += group.shape.request_cpu * count
            memory += group.shape.request_memory * count
            gpus += group.shape.request_gpus * count
        return cpu, memory, gpus, self.head.shape.memory_format

    def min_workers(self) -> int:
        return sum(group.min_replicas for group in self.workers)

    def max_workers(self) -> int:
        return sum(group.max_replicas for group in self.workers)


def field_path(parts: list[str | int]) -> str:
    return ".".join(f"[{part}]" if isinstance(part, int) else part for part in parts).replace(".[", "[")


def _quantity(value: object, where: list[str | int]) -> Quantity:
    try:
        return parse_quantity(value, field_path(where))
    except QuantityError as exc:
        raise UserError(str(exc)) from None


def _whole(value: object, where: list[str | int]) -> int:
    amount = _quantity(value, where)
    if amount.amount < 0:
        raise UserError(f"{field_path(where)}: {value!r} is negative")
    return amount.value()


def _params(raw: object, where: list[str | int]) -> dict[str, str]:
    """rayStartParams as strings (the CRD's map of strings; YAML may give numbers)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UserError(f"{field_path(where)}: expected a map of strings")
    return {str(key): str(value) for key, value in raw.items()}


def _resources_param(text: str, where: list[str | int]) -> dict[str, float]:
    """``resources: '"{\\"Custom\\": 1}"'``: KubeRay's docs quote the JSON once more, for the shell."""
    body = text.strip()
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "'\"":
        body = body[1:-1].replace('\\"', '"')
    try:
        parsed = json.loads(body)
    except ValueError:
        raise UserError(f"{field_path(where)}: {text!r} is not a JSON map of resource amounts") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                                                for v in parsed.values()):
        raise UserError(f"{field_path(where)}: {text!r} is not a JSON map of resource amounts")
    return {str(key): float(value) for key, value in parsed.items()}


def _env(container: dict[str, Any], where: list[str | int]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for index, item in enumerate(container.get("env") or ()):
        if not isinstance(item, dict) or not item.get("name"):
            raise UserError(f"{field_path([*where, 'env', index, 'name'])}: required field is missing")
        if item.get("valueFrom") is not None:
            raise UserError(f"{field_path([*where, 'env', index, 'valueFrom'])}: a value from a Secret, ConfigMap "
                            "or the pod's fields cannot exist here; give the value")
        pairs.append((str(item["name"]), str(item.get("value", ""))))
    return tuple(pairs)


def _shape(group: dict[str, Any], where: list[str | int], notes: list[str]) -> NodeShape:
    """One group's node: its pod's first container's resources, then its rayStartParams."""
    pod = _map(_map(group.get("template")).get("spec"))
    containers = pod.get("containers") if isinstance(pod.get("containers"), list) else []
    if not containers or not isinstance(containers[0], dict):
        raise UserError(f"{field_path([*where, 'template', 'spec', 'containers'])}: the Ray container is missing")
    container_at: list[str | int] = [*where, "template", "spec", "containers", 0]
    container: dict[str, Any] = containers[0]
    spec = _map(container.get("resources"))
    limits, requests = _map(spec.get("limits")), _map(spec.get("requests"))
    for index, other in enumerate(containers):
        for key in ("limits", "requests"):
            if TPU in _map(_map(_map(other).get("resources")).get(key)):
                path = field_path([*where, "template", "spec", "containers", index, "resources", key, TPU])
                raise UserError(f"{path}: a TPU (GKE's TPU slices) cannot exist on this machine; "
                                "run the Ray workers on CPUs or GPUs")
    at = [*container_at, "resources"]
    given = {**requests, **limits}  # ray start's resources: the limits, else the requests
    asked = {**limits, **requests}  # the pod's requests: what KubeRay sums and the scheduler counts
    params = _params(group.get("rayStartParams"), [*where, "rayStartParams"])
    cpus = _quantity(given["cpu"], [*at, "limits", "cpu"]).value() if "cpu" in given else 0
    memory = _quantity(given["memory"], [*at, "limits", "memory"]).bytes if "memory" in given else 0
    gpus = _whole(given[GPU], [*at, "limits", GPU]) if GPU in given else 0
    request_cpu = _quantity(asked["cpu"], [*at, "requests", "cpu"]).amount if "cpu" in asked else Fraction(0)
    memory_quantity = _quantity(asked["memory"], [*at, "requests", "memory"]) if "memory" in asked else None
    request_gpus = _whole(asked[GPU], [*at, "requests", GPU]) if GPU in asked else 0
    custom: dict[str, float] = {}
    object_store = 0
    for key, value in params.items():
        here: list[str | int] = [*where, "rayStartParams", key]
        if key == "num-cpus":
            cpus = _whole(value, here)
        elif key == "num-gpus":
            gpus = _whole(value, here)
        elif key == "memory":
            memory = _whole(value, here)
        elif key == "object-store-memory":
            object_store = _whole(value, here)
        elif key == "resources":
            custom = _resources_param(value, here)
        elif key in OWN_PARAMS:
            notes.append(f"rayStartParams.{key} is millpond's: every cluster listens on the loopback, on free ports")
        else:
            notes.append(f"rayStartParams.{key} is not passed to ray start here")
    for name in custom:
        if name.upper() in ("CPU", "GPU", "MEMORY") or name == "object_store_memory":
            raise UserError(f"{field_path([*where, 'rayStartParams', 'resources'])}: {name} is given by "
                            "num-cpus, num-gpus or memory, not as a custom resource")
    return NodeShape(
        num_cpus=cpus, num_gpus=gpus, memory_bytes=memory, object_store_bytes=object_store, resources=custom,
        request_cpu=request_cpu, request_memory=memory_quantity.bytes if memory_quantity else 0,
        request_gpus=request_gpus,
        memory_format=memory_quantity.format if memory_quantity else Format.BINARY_SI,
        env=_env(container, container_at),
    )


def _map(value: object) -> dict[str, Any]:
    """``value`` when it is a map, else an empty one (the schema said what each field may be)."""
    return value if isinstance(value, dict) else {}


def _count(group: dict[str, Any], key: str, default: int, where: list[str | int]) -> int:
    value = group.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{field_path([*where, key])}: {value!r} must be a whole number, at least 0")
    return value


def cluster_spec(spec: object, where: list[str | int]) -> ClusterSpec:
    """The cluster ``spec`` (a RayCluster's spec, a RayJob's rayClusterSpec) describes; UserError (one line
    naming the field) for what cannot run here."""
    if not isinstance(spec, dict) or not isinstance(spec.get("headGroupSpec"), dict):
        raise UserError(f"{field_path([*where, 'headGroupSpec'])}: required field is missing")
    notes: list[str] = []
    if spec.get("gcsFaultToleranceOptions") is not None:
        notes.append("gcsFaultToleranceOptions: GCS fault tolerance (an external Redis) is not used here: "
                     "a head that dies fails the cluster")
    if spec.get("enableInTreeAutoscaling"):
        notes.append("enableInTreeAutoscaling: the Ray autoscaler is not run here: each group runs its replicas")
    head = NodeGroup(HEAD, True, 1, 1, 1, False, _shape(spec["headGroupSpec"], [*where, "headGroupSpec"], notes))
    workers = []
    names = set()
    for index, raw in enumerate(spec.get("workerGroupSpecs") or ()):
        at: list[str | int] = [*where, "workerGroupSpecs", index]
        if not isinstance(raw, dict) or not raw.get("groupName"):
            raise UserError(f"{field_path([*at, 'groupName'])}: required field is missing")
        name = str(raw["groupName"])
        if name in names:
            raise UserError(f"{field_path([*at, 'groupName'])}: {name!r} names two worker groups")
        names.add(name)
        hosts = _count(raw, "numOfHosts", 1, at)
        least = _count(raw, "minReplicas", 0, at)
        most = _count(raw, "maxReplicas", 2**31 - 1, at)
        if least > most:
            raise UserError(f"{field_path([*at, 'minReplicas'])}: {least} is more than maxReplicas {most}")
        replicas = min(max(_count(raw, "replicas", least, at), least), most) * hosts
        workers.append(NodeGroup(name, False, replicas, least * hosts, most * hosts, bool(raw.get("suspend")),
                                 _shape(raw, at, notes)))
    return ClusterSpec(head, tuple(workers), bool(spec.get("suspend")), tuple(dict.fromkeys(notes)))


def capacity_refusal(cluster: ClusterSpec, memory_bytes: int, max_pods: int, max_processes: int) -> str | None:
    """Why this machine (``memory_bytes``, kubelet's ``max_pods``, ``max_processes`` at once) can never hold
    the cluster's nodes, whatever it waits for, in one line; or None."""
    for group in cluster.workers:
        for key, count in (("replicas", group.replicas), ("maxReplicas", group.max_replicas)):
            if key == "maxReplicas" and count >= 2**31 - 1:
                continue
            if count + 1 > max_pods:
                return (f"worker group {group.name}: {key} {count}: this machine holds at most {max_pods} Ray nodes "
                        "(kubelet's max-pods; MILLPOND_MAX_PODS changes it)")
    floor = HEAD_MEMORY_FLOOR + cluster.desired_workers() * WORKER_MEMORY_FLOOR
    if floor > memory_bytes:
        return (f"{cluster.desired_workers()} worker nodes and the head need at least {floor / 2**30:.1f} GiB "
                f"(each Ray node's processes) and this machine has {memory_bytes / 2**30:.1f} GiB")
    for group in cluster.groups:
        if group.shape.num_cpus > max_processes:
            return (f"{'the head' if group.head else 'worker group ' + group.name} declares "
                    f"{group.shape.num_cpus} CPUs to Ray, which starts a worker process per CPU, and this machine "
                    f"can run at most {max_processes} processes at once")
    return None
