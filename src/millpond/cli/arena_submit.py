"""``arena submit pytorch|mpi|tf|ray`` (aliases ``pytorchjob``, ``mpijob``/``mj``, ``tfjob``, ``rayjob``): Arena's flags
with Arena's defaults, then the command.

``submit_options`` is the flag set every trainer shares (tf adds its replicas' flags on top).
Flags that only mean something on a Kubernetes cluster are accepted and named in one info line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE
from millpond.training.builder import CommonArgs

CLUSTER_ONLY = (
    ("--toleration", True), ("--selector", True), ("--rdma", False), ("--sync-mode", True), ("--sync-source", True),
    ("--sync-image", True),
    ("--gang", False), ("--scheduler", True), ("--tensorboard", False), ("--logdir", True),
)


def _accepted_flags(command: Callable[..., Any], flags: tuple[tuple[str, bool], ...]) -> Callable[..., Any]:
    """Arena's flags that mean something only on a cluster, as hidden options (``cluster_NAME``) it accepts."""
    for flag, takes_value in reversed(flags):
        key = "cluster_" + flag.lstrip("-").replace("-", "_")
        if takes_value:
            command = click.option(flag, key, multiple=True, hidden=True)(command)
        else:
            command = click.option(flag, key, is_flag=True, hidden=True)(command)
    return command


def submit_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Arena's common submit flags (``pkg/argsbuilder``), outermost first so ``--help`` lists them in order."""
    command = _accepted_flags(command, CLUSTER_ONLY)
    options = [
        click.option("--name", required=True, help="The job's name (unique in its namespace)."),
        click.option("-n", "--namespace", type=NAMESPACE_TYPE, default="default", show_default=True),
        click.option("--image", default="", help="The image the command runs in (the runtime policy decides: "
                                                 "MILLPOND_RUNTIME, -a millpond.io/runtime=host|container|auto)."),
        click.option("--image-pull-policy", default="", metavar="POLICY",
                     help="Always, IfNotPresent or Never (default: Kubernetes', by the image's tag)."),
        click.option("--image-pull-secret", "image_pull_secrets", multiple=True, metavar="SECRET",
                     help="A kubernetes.io/dockerconfigjson Secret of the job's namespace (repeatable)."),
        click.option("--gpus", type=int, default=0, show_default=True, help="GPUs per instance."),
        click.option("--gpumemory", type=int, default=0, metavar="GIB",
                     help="GPU sharing: GiB of one GPU's memory per instance (not with --gpus)."),
        click.option("--gpucore", type=int, default=0, metavar="PERCENT",
                     help="GPU sharing: percent of that GPU's compute per instance (with --gpumemory)."),
        click.option("--workers", type=int, default=1, show_default=True,
                     help="Instances (pytorch: counting the master; mpi, tf: the workers)."),
        click.option("--retry", type=int, default=0, show_default=True, help="Restarts of the job after a failure."),
        click.option("--working-dir", default="", help="The command's folder (default: the job's own folder)."),
        click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="An environment variable (repeatable)."),
        click.option("-d", "--data", multiple=True, metavar="NAME:PATH", help="Mount dataset NAME at PATH."),
        click.option("--data-dir", "data_dirs", multiple=True, metavar="HOST:PATH", help="Bind a host folder."),
        click.option("-a", "--annotation", "annotations", multiple=True, metavar="KEY=VALUE"),
        click.option("-l", "--label", "labels", multiple=True, metavar="KEY=VALUE"),
        click.option("-p", "--priority", default="", metavar="NAME",
                     help="A WorkloadPriorityClass (refused when none of that name exists)."),
        click.option("--queue", default="", metavar="NAME",
                     help="Kueue's LocalQueue (as -l kueue.x-k8s.io/queue-name=NAME): the job waits for its quota."),
        click.option("--cpu", default="", help="CPU per instance (a quantity: 2, 500m)."),
        click.option("--memory", default="", help="Memory per instance (a quantity: 4Gi)."),
        click.option("--clean-task-policy", default="Running", show_default=True,
                     help="Running, All or None: stop the other instances when one fails (None: let them run)."),
        click.option("--running-timeout", default="", help="A Go duration (1h30m): then the job fails."),
        click.option("--ttl-after-finished", default="", help="A Go duration: a finished job is deleted after it."),
        click.option("--nproc-per-node", type=int, default=0,
                     help="pytorch: run torchrun with this many processes per instance."),
        click.option("--share-memory", default="2Gi", show_default=True, help="The /dev/shm size, in the image."),
        click.option("--ray", default="", metavar="HOST:PORT",
                     help="Run the instances on this Ray cluster (default: $MILLPOND_RAY_ADDRESS)."),
        click.option("--ray-placement", default="PACK", show_default=True,
                     help="The Ray placement group's strategy: PACK (one node if they fit, else spread), "
                          "SPREAD, STRICT_SPREAD (one node each) or STRICT_PACK."),
        click.argument("command", nargs=-1, type=click.UNPROCESSED),
    ]
    for option in reversed(options):
        command = option(command)
    return command


TF_CLUSTER_ONLY = (("--ps-image", True), ("--worker-port", True), ("--ps-port", True), ("--chief-port", True))


def common_args(values: dict[str, Any], extra: tuple[tuple[str, bool], ...] = ()) -> CommonArgs:
    """The flags as typed; cluster-only ones named in one info line on stderr."""
    ignored = [flag for flag, _ in CLUSTER_ONLY + extra
               if values.get("cluster_" + flag.lstrip("-").replace("-", "_"))]
    if ignored:
        word = "means" if len(ignored) == 1 else "mean"
        print(f"info: {', '.join(ignored)} only {word} something on a Kubernetes cluster; ignored on this machine",
              file=sys.stderr)
    fields = CommonArgs.__dataclass_fields__
    given: dict[str, Any] = {key: tuple(value) if isinstance(value, (list, tuple)) else value
                             for key, value in values.items() if key in fields}  # click's values, as parsed
    return CommonArgs(**given)


SUBMIT_SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": False}


@click.group("submit")
def submit_group() -> None:
    """Submit a training job: pytorch (pytorchjob), mpi (mpijob, mj), tf (tfjob), ray (rayjob)."""


def _submitted(spec: Any) -> None:
    from millpond.training import jobs

    job = jobs.submit(spec)
    group = "ray.io" if job.trainer == "rayjob" else "kubeflow.org"  # KubeRay's group, the operators' otherwise
    click.echo(f"{job.trainer}.{group}/{job.name} created")
    click.echo(f"INFO: The Job {job.name} has been submitted successfully", err=True)
    click.echo(f"INFO: You can run `arena get {job.name} --type {job.trainer} -n {job.namespace}` "
               "to check the job status", err=True)


@submit_group.command("pytorch", context_settings=SUBMIT_SETTINGS)
@submit_options
def submit_pytorch(**values: Any) -> None:
    """A PyTorchJob: --workers instances (a master and workers), each with MASTER_ADDR, RANK, WORLD_SIZE."""
    from millpond.training.builder import pytorch_spec

    _submitted(pytorch_spec(common_args(values)))


@submit_group.command("mpi", context_settings=SUBMIT_SETTINGS)
@submit_options
def submit_mpi(**values: Any) -> None:
    """An MPIJob: a launcher running mpirun over --workers workers (--gpus slots each, or 1)."""
    from millpond.training.builder import mpi_spec

    _submitted(mpi_spec(common_args(values)))


def tf_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Arena's tfjob flags on top of the common ones; ports and the ps image are cluster-only here."""
    for flag, _ in reversed(TF_CLUSTER_ONLY):
        command = click.option(flag, "cluster_" + flag.lstrip("-").replace("-", "_"), multiple=True,
                               hidden=True)(command)
    options = [
        click.option("--ps", type=int, default=0, show_default=True, help="Parameter servers."),
        click.option("--chief", is_flag=True, help="Add a chief (required for an Estimator)."),
        click.option("--evaluator", is_flag=True, help="Add an evaluator (not part of the training cluster)."),
        click.option("--worker-image", default="", help="As --image."),
        click.option("--worker-cpu", default="", help="CPU per worker (default --cpu)."),
        click.option("--worker-memory", default="", help="Memory per worker (default --memory)."),
        click.option("--ps-cpu", default="", help="CPU per parameter server (default --cpu)."),
        click.option("--ps-memory", default="", help="Memory per parameter server (default --memory)."),
        click.option("--ps-gpus", type=int, default=0, show_default=True, help="GPUs per parameter server."),
        click.option("--chief-cpu", default="", help="CPU of the chief (default --cpu)."),
        click.option("--chief-memory", default="", help="Memory of the chief (default --memory)."),
        click.option("--evaluator-cpu", default="", help="CPU of the evaluator (default --cpu)."),
        click.option("--evaluator-memory", default="", help="Memory of the evaluator (default --memory)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@submit_group.command("tf", context_settings=SUBMIT_SETTINGS)
@tf_options
@submit_options
def submit_tf(**values: Any) -> None:
    """A TFJob: --workers workers (with --chief, --ps N, --evaluator), each with its TF_CONFIG."""
    from millpond.training.builder import TfArgs, tf_spec

    fields = TfArgs.__dataclass_fields__
    tf = TfArgs(**{key: value for key, value in values.items() if key in fields})
    _submitted(tf_spec(common_args(values, TF_CLUSTER_ONLY), tf))


# Arena's rayjob flags that shape the RayCluster KubeRay would create: the cluster exists here
RAY_CLUSTER_ONLY = tuple((flag, True) for flag in (
    "--head-image", "--head-cpu", "--head-memory", "--head-gpu", "--head-service-type", "--worker-image",
    "--worker-cpu", "--worker-memory", "--worker-gpu", "--worker-replicas", "--worker-min-replicas",
    "--worker-max-replicas", "--worker-num-of-hosts", "--ray-version", "--pre-stop-command",
    "--active-deadline-seconds", "--autoscaler-cpu", "--autoscaler-memory", "--autoscaler-image",
    "--autoscaler-image-pull-policy", "--autoscaler-idle-timeout-seconds", "--autoscaler-upscaling-mode",
)) + (("--enable-autoscaling", False), ("--suspend", False), ("--shutdown-after-finished", False))


def ray_options(command: Callable[..., Any]) -> Callable[..., Any]:
    return _accepted_flags(command, RAY_CLUSTER_ONLY)


@submit_group.command("ray", context_settings=SUBMIT_SETTINGS)
@ray_options
@submit_options
def submit_ray(**values: Any) -> None:
    """A RayJob on an existing Ray cluster (--ray or $MILLPOND_RAY_ADDRESS): the command is its driver,
    run here with RAY_ADDRESS set; its log is the job's log."""
    from millpond.training.builder import ray_spec

    _submitted(ray_spec(common_args(values, RAY_CLUSTER_ONLY)))


submit_group.add_command(submit_pytorch, "pytorchjob")
submit_group.add_command(submit_ray, "rayjob")
submit_group.add_command(submit_mpi, "mpijob")
submit_group.add_command(submit_mpi, "mj")
submit_group.add_command(submit_tf, "tfjob")
