"""Arena's submit flags, parsed into a ``JobSpec``: the one place that knows what each flag means.

``arena submit pytorch|mpi|tf`` (which take the same common flags, tf adding its replicas') and
``TrainingClient.submit`` build their spec here. The command's words are joined with spaces
and run with ``sh -c``, as Arena does. Every malformed value is a UserError naming the flag.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from millpond.durations import parse_go_duration
from millpond.errors import UserError
from millpond.names import check_object_name
from millpond.quantities import parse_bytes, parse_quantity
from millpond.scheduling.ledger import GpuShare, Request
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL
from millpond.scheduling.queues.submission import check_queue_name
from millpond.training.pod_template import PULL_POLICIES
from millpond.training.spec import (
    CleanTaskPolicy,
    ContainerImage,
    DataBinding,
    HostBinding,
    JobSpec,
    ReplicaSpec,
    Trainer,
)


@dataclass(frozen=True)
class CommonArgs:
    """The flags every ``arena submit`` trainer takes, as typed (strings, lists of strings)."""

    name: str
    command: tuple[str, ...]
    namespace: str = "default"
    image: str = ""
    image_pull_policy: str = ""  # Arena's --image-pull-policy: Always, IfNotPresent or Never ("" = Kubernetes' default)
    image_pull_secrets: tuple[str, ...] = ()  # Arena's --image-pull-secret: Secrets of the job's namespace
    gpus: int = 0
    gpumemory: int = 0  # GiB of one GPU's memory per instance (Arena's gpushare --gpumemory)
    gpucore: int = 0  # percent of that GPU's compute (Arena's --gpucore), with --gpumemory
    workers: int = 1
    retry: int = 0
    working_dir: str = ""
    env: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    data_dirs: tuple[str, ...] = ()
    annotations: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    priority: str = ""
    queue: str = ""
    cpu: str = ""
    memory: str = ""
    clean_task_policy: str = "Running"
    running_timeout: str = ""
    ttl_after_finished: str = ""
    nproc_per_node: int = 0
    share_memory: str = "2Gi"
    ray: str = ""  # the Ray cluster's address (--ray, else $MILLPOND_RAY_ADDRESS): cluster mode
    ray_placement: str = "PACK"


ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")  # Kubernetes' rule for a container's variable names


def pairs(values: tuple[str, ...], flag: str) -> tuple[tuple[str, str], ...]:
    """``K=V`` values of a repeatable flag; a value without ``=`` or with an empty key is refused."""
    result = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{flag} {value!r} must be KEY=VALUE")
        if flag == "--env" and not ENV_NAME.match(key):
            raise UserError(f"--env {value!r}: {key!r} is not a valid variable name (letters, digits, '-', '.', '_')")
        result.append((key.strip(), rest))
    return tuple(result)


def _bindings(values: tuple[str, ...], flag: str, seen: set[str]) -> list[tuple[str, str]]:
    """``SOURCE:/PATH`` values; a path may be mounted once, never at ``/``, and a host folder is absolute."""
    result = []
    for value in values:
        source, sep, target = value.partition(":")
        form = "NAME:/ABSOLUTE/PATH" if flag == "--data" else "/HOST/PATH:/ABSOLUTE/PATH"
        if not sep or not source or not target.startswith("/") or (flag != "--data" and not source.startswith("/")):
            raise UserError(f"{flag} {value!r} must be {form}")
        normal = "/" + "/".join(part for part in target.split("/") if part)
        if normal == "/" or ".." in normal.split("/"):
            raise UserError(f"{flag} {value!r}: nothing can be mounted at {target!r}")
        if normal in seen:
            raise UserError(f"{flag} {value!r}: {normal} is mounted twice")
        seen.add(normal)
        result.append((source, normal))
    return result


def _seconds(text: str, flag: str) -> int | None:
    if not text:
        return None
    seconds = parse_go_duration(text, flag).seconds
    if seconds < 0:
        raise UserError(f"{flag} {text!r} is negative")
    return int(seconds) or None


def _resources(args: CommonArgs) -> Request:
    if args.gpus < 0:
        raise UserError(f"--gpus {args.gpus} is negative")
    cpu = parse_quantity(args.cpu, "--cpu").milli_value() if args.cpu else 0
    memory = parse_bytes(args.memory, "--memory") if args.memory else 0
    if cpu < 0:
        raise UserError(f"--cpu {args.cpu!r} is negative")
    return Request(cpu_millis=cpu, memory_bytes=memory, gpus=args.gpus, shares=_share(args))


def _share(args: CommonArgs) -> tuple[GpuShare, ...]:
    """``--gpumemory``/``--gpucore``: one share of one GPU per instance, or none."""
    if args.gpumemory < 0:
        raise UserError(f"--gpumemory {args.gpumemory} is negative")
    if not 0 <= args.gpucore <= 100:
        raise UserError(f"--gpucore {args.gpucore} must be a percent of one GPU, 1 to 100")
    if args.gpucore and not args.gpumemory:
        raise UserError("--gpucore needs --gpumemory: a GPU share is admitted by its memory")
    if not args.gpumemory:
        return ()
    if args.gpus:
        raise UserError(f"--gpumemory asks for part of one GPU; it cannot be given with --gpus {args.gpus}")
    if args.ray:
        raise UserError("--gpumemory shares a GPU of this machine; on a Ray cluster ask for whole --gpus")
    return (GpuShare(args.gpumemory * 2**30, args.gpucore),)


def pytorch_spec(args: CommonArgs) -> JobSpec:
    """A PyTorchJob: a master and ``workers - 1`` workers (``--workers`` counts the master, as in Arena)."""
    if args.workers < 1:
        raise UserError(f"--workers {args.workers}: a pytorch job has at least 1 (the master)")
    replicas = [ReplicaSpec("master", 1, _command(args), _resources(args))]
    if args.workers > 1:
        replicas.append(ReplicaSpec("worker", args.workers - 1, _command(args), _resources(args)))
    return _common(args, Trainer.PYTORCH, tuple(replicas))


def mpi_spec(args: CommonArgs) -> JobSpec:
    """An MPIJob: a launcher and ``--workers`` workers (Arena's mpijob counts the workers only).

    The launcher runs mpirun (it asks for nothing: the ranks run as the workers, which hold the
    ``--gpus``, ``--cpu`` and ``--memory`` asked per worker).
    """
    if args.workers < 1:
        raise UserError(f"--workers {args.workers}: an mpi job has at least 1 worker (a launcher is added)")
    _pytorch_only(args, "mpi")
    replicas = (ReplicaSpec("launcher", 1, _command(args)), ReplicaSpec("worker", args.workers, _command(args),
                                                                       _resources(args)))
    return _common(args, Trainer.MPI, replicas)


@dataclass(frozen=True)
class TfArgs:
    """What ``arena submit tf`` adds: a chief (``--chief``), parameter servers (``--ps N``), an evaluator,
    and each role's own ``--ROLE-cpu``/``--ROLE-memory`` (``--ps-gpus``), as Arena's tfjob flags."""

    ps: int = 0
    chief: bool = False
    evaluator: bool = False
    worker_image: str = ""
    worker_cpu: str = ""
    worker_memory: str = ""
    ps_cpu: str = ""
    ps_memory: str = ""
    ps_gpus: int = 0
    chief_cpu: str = ""
    chief_memory: str = ""
    evaluator_cpu: str = ""
    evaluator_memory: str = ""


def _role(base: Request, role: str, cpu: str, memory: str, gpus: int | None) -> Request:
    """``base`` (the common --cpu/--memory/--gpus) with a role's own flags over it."""
    if gpus is not None and gpus < 0:
        raise UserError(f"--{role}-gpus {gpus} is negative")
    milli = parse_quantity(cpu, f"--{role}-cpu").milli_value() if cpu else base.cpu_millis
    if milli < 0:
        raise UserError(f"--{role}-cpu {cpu!r} is negative")
    size = parse_bytes(memory, f"--{role}-memory") if memory else base.memory_bytes
    if gpus is None:
        return Request(milli, size, base.gpus, base.shares)
    return Request(milli, size, gpus)  # its own GPU count (--ps-gpus, none for the evaluator): no share


def tf_spec(args: CommonArgs, tf: TfArgs) -> JobSpec:
    """A TFJob: ``--workers`` workers, plus a chief, ``--ps`` parameter servers and an evaluator if asked.

    The chief and the workers get ``--gpus`` each, parameter servers ``--ps-gpus`` (0 by
    default), the evaluator none; every role ``--cpu``/``--memory`` unless its own flags say.
    """
    if args.workers < 0 or (args.workers == 0 and not tf.chief):
        raise UserError(f"--workers {args.workers}: a tf job has at least 1 worker (or a --chief)")
    if tf.ps < 0:
        raise UserError(f"--ps {tf.ps} is negative")
    _pytorch_only(args, "tf")
    base = _resources(args)
    replicas = []
    if tf.chief:
        replicas.append(ReplicaSpec("chief", 1, _command(args), _role(base, "chief", tf.chief_cpu, tf.chief_memory,
                                                                       None)))
    if args.workers:
        replicas.append(ReplicaSpec("worker", args.workers, _command(args),
                                    _role(base, "worker", tf.worker_cpu, tf.worker_memory, None)))
    if tf.ps:
        replicas.append(ReplicaSpec("ps", tf.ps, _command(args), _role(base, "ps", tf.ps_cpu, tf.ps_memory,
                                                                       tf.ps_gpus)))
    if tf.evaluator:
        replicas.append(ReplicaSpec("evaluator", 1, _command(args),
                                    _role(base, "evaluator", tf.evaluator_cpu, tf.evaluator_memory, 0)))
    if tf.worker_image and not args.image:
        args = replace(args, image=tf.worker_image)
    return _common(args, Trainer.TF, tuple(replicas))


def ray_spec(args: CommonArgs) -> JobSpec:
    """Arena's rayjob on an existing cluster: one driver running the command with ``RAY_ADDRESS`` set
    (``launch_ray``); ``--workers`` is the cluster's business, so it must stay 1."""
    if args.workers != 1:
        raise UserError(f"--workers {args.workers}: a ray job is one driver; the Ray cluster has the workers")
    _pytorch_only(args, "ray")
    spec = _common(args, Trainer.RAY, (ReplicaSpec("driver", 1, _command(args), _resources(args)),))
    if not spec.ray_address:
        raise UserError("a ray job joins a Ray cluster: give its address with --ray HOST:PORT "
                        "or MILLPOND_RAY_ADDRESS")
    return spec


def _pytorch_only(args: CommonArgs, trainer: str) -> None:
    if args.nproc_per_node:
        raise UserError(f"--nproc-per-node is a pytorch flag: a {trainer} job has no torchrun")


def _command(args: CommonArgs) -> tuple[str, ...]:
    line = " ".join(args.command).strip()
    if not line:
        raise UserError("no command: put the training command after the flags")
    return ("sh", "-c", line)


def _common(args: CommonArgs, trainer: Trainer, replicas: tuple[ReplicaSpec, ...]) -> JobSpec:
    if args.retry < 0:
        raise UserError(f"--retry {args.retry} is negative")
    if args.nproc_per_node < 0:
        raise UserError(f"--nproc-per-node {args.nproc_per_node} is negative")
    try:
        policy = CleanTaskPolicy(args.clean_task_policy)
    except ValueError:
        raise UserError(f"--clean-task-policy {args.clean_task_policy!r} must be Running, All or None") from None
    if args.working_dir and not args.working_dir.startswith("/"):
        raise UserError(f"--working-dir {args.working_dir!r} must be an absolute path")
    targets: set[str] = set()
    labels = pairs(args.labels, "--label")
    queue = _from_label(args.queue, "--queue", labels, QUEUE_LABEL)
    priority = _from_label(args.priority, "--priority", labels, PRIORITY_LABEL)
    data = tuple(DataBinding(n, p) for n, p in _bindings(args.data, "--data", targets))
    data_dirs = tuple(HostBinding(h, p) for h, p in _bindings(args.data_dirs, "--data-dir", targets))
    replicas = tuple(replace(replica, image=_image(args)) for replica in replicas) if args.image else replicas
    return JobSpec(
        name=args.name, namespace=args.namespace, trainer=trainer, replicas=replicas, image=args.image,
        working_dir=args.working_dir, env=pairs(args.env, "--env"),
        data=data, data_dirs=data_dirs,
        retry=args.retry, running_timeout_s=_seconds(args.running_timeout, "--running-timeout"),
        ttl_after_finished_s=_seconds(args.ttl_after_finished, "--ttl-after-finished"),
        clean_task_policy=policy, nproc_per_node=args.nproc_per_node or None, priority=priority,
        queue=check_queue_name(queue), labels=labels, annotations=pairs(args.annotations, "--annotation"),
        share_memory=parse_bytes(args.share_memory, "--share-memory") if args.share_memory else 0,
        ray_address=_ray_address(args, trainer), ray_placement=_placement(args),
    )


def _image(args: CommonArgs) -> ContainerImage:
    """``--image`` as Arena's charts put it in every replica's pod template: the command as the container's
    command, ``--cpu``/``--memory`` as its limits, ``--share-memory`` as a Memory emptyDir at /dev/shm."""
    if args.image_pull_policy and args.image_pull_policy not in PULL_POLICIES:
        raise UserError(f"--image-pull-policy {args.image_pull_policy!r} must be one of {', '.join(PULL_POLICIES)}")
    for secret in args.image_pull_secrets:
        check_object_name(secret, "--image-pull-secret")
    resources = _resources(args)
    return ContainerImage(
        image=args.image, pull_policy=args.image_pull_policy, pull_secrets=tuple(args.image_pull_secrets),
        memory_bytes=resources.memory_bytes, cpus=resources.cpu_millis / 1000,
        shm_bytes=parse_bytes(args.share_memory, "--share-memory") if args.share_memory else 0)


def _from_label(flag_value: str, flag: str, labels: tuple[tuple[str, str], ...], label: str) -> str:
    """``--queue``/``--priority``, or the Kueue label that says the same (``-l kueue.x-k8s.io/queue-name=Q``,
    how Arena's users reach Kueue); both given and different is refused."""
    named = dict(labels).get(label, "")
    if flag_value and named and named != flag_value:
        raise UserError(f"{flag} {flag_value} and --label {label}={named} name different ones; give one")
    return flag_value or named


RAY_ADDRESS_VAR = "MILLPOND_RAY_ADDRESS"
PLACEMENTS = ("PACK", "SPREAD", "STRICT_SPREAD", "STRICT_PACK")  # Ray's placement group strategies


def _ray_address(args: CommonArgs, trainer: Trainer) -> str:
    """``--ray``, else ``$MILLPOND_RAY_ADDRESS`` for a pytorch job: mpi and tf jobs run on this machine
    (their launchers assume one), so the variable, set for pipelines too, leaves them local."""
    if args.ray:
        return args.ray.strip()
    return os.environ.get(RAY_ADDRESS_VAR, "").strip() if trainer in (Trainer.PYTORCH, Trainer.RAY) else ""


def _placement(args: CommonArgs) -> str:
    strategy = args.ray_placement.upper().replace("-", "_")
    if strategy not in PLACEMENTS:
        raise UserError(f"--ray-placement {args.ray_placement!r} must be one of {', '.join(PLACEMENTS)}")
    return strategy
