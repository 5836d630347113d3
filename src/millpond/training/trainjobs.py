"""Kubeflow Trainer v2: a TrainJob read with its runtime's meaning (the ``torch-distributed`` one).

A TrainJob names a runtime (``runtimeRef``: a ClusterTrainingRuntime, or a TrainingRuntime of
its namespace) whose ``mlPolicy`` says how to launch it and whose ``node`` replicated job is the
pod template; the TrainJob's ``trainer`` overrides the image, command, args, env, resources per
node, ``numNodes`` and ``numProcPerNode``. With ``mlPolicy.torch`` each of the ``numNodes``
instances gets the variables torchrun reads (``PET_NNODES``, ``PET_NPROC_PER_NODE``,
``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT``: ``launch``'s pytorch planner);
the command itself (``torchrun ...``) is the user's, as in Trainer. ``numProcPerNode`` ``auto``
(the default) is the node's GPUs, or 1 on CPU.

``torch-distributed`` is installed with Trainer on every cluster, so it is known here even when
not applied; other runtimes must be applied first. A runtime whose policy or steps (MPI,
initializers) cannot run here refuses the TrainJob with one line naming it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from millpond.datasets.fields import show
from millpond.errors import UserError
from millpond.training.job_fields import RuntimeLookup, cluster_only_notes, job_spec
from millpond.training.pod_template import Container, env_pairs, no_command, read_pod, resources
from millpond.training.spec import ContainerImage, JobSpec, ReplicaSpec, Trainer

BUILT_IN_TORCH = {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
    {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}}}]}}}
_POLICIES = ("torch", "mpi", "jax", "xgboost", "mlx", "flux")


def runtime_notes(body: dict[str, Any]) -> list[str]:
    policy = _policy(body["spec"].get("mlPolicy") or {})
    if policy != "torch":
        return [f"recorded; a TrainJob cannot run on its {policy or 'missing'} policy here yet (only torch)"]
    return []


def _policy(ml_policy: dict[str, Any]) -> str | None:
    return next((name for name in _POLICIES if name in ml_policy), None)


def _runtime(body: dict[str, Any], runtimes: RuntimeLookup) -> tuple[str, dict[str, Any]]:
    ref = body["spec"]["runtimeRef"]
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    if kind not in ("ClusterTrainingRuntime", "TrainingRuntime"):
        raise UserError(f"spec.runtimeRef.kind: {show(kind)} is not ClusterTrainingRuntime or TrainingRuntime")
    namespace = "" if kind == "ClusterTrainingRuntime" else body["metadata"]["namespace"]
    found = runtimes(kind, ref["name"], namespace)
    if found is not None:
        return f"{kind} {ref['name']}", found.get("spec") or {}
    if kind == "ClusterTrainingRuntime" and ref["name"] == "torch-distributed":
        return "the built-in ClusterTrainingRuntime torch-distributed", BUILT_IN_TORCH
    where = f" in namespace {namespace}" if namespace else ""
    raise UserError(f"spec.runtimeRef.name: no {kind} {ref['name']}{where} "
                    "(apply it first; torch-distributed is built in)")


def _node_pod(runtime: dict[str, Any], label: str) -> tuple[dict[str, Any], list[str | int]]:
    """The runtime's ``node`` pod spec; another replicated job (an initializer, a launcher) cannot run here."""
    jobs = (runtime.get("template") or {}).get("spec", {}).get("replicatedJobs") or []
    node = None
    for index, job in enumerate(jobs):
        if job.get("name") == "node":
            node = index, job
        else:
            raise UserError(f"{label}: spec.template.spec.replicatedJobs[{index}] ({show(job.get('name'))}) "
                            "cannot run here (only the node job runs)")
    if node is None:
        raise UserError(f"{label}: has no node replicated job")
    where: list[str | int] = ["spec", "template", "spec", "replicatedJobs", node[0], "template", "spec",
                              "template", "spec"]
    pod = ((node[1].get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
    return pod, where


def trainjob_spec(body: dict[str, Any], runtimes: RuntimeLookup) -> tuple[JobSpec, list[str]]:
    """The TrainJob as a job of ``numNodes`` ``node`` instances with torchrun's variables."""
    spec = body["spec"]
    if spec.get("initializer"):
        raise UserError("spec.initializer: dataset and model initializers cannot run here yet")
    label, runtime = _runtime(body, runtimes)
    ml_policy = runtime.get("mlPolicy") or {}
    policy = _policy(ml_policy)
    if policy != "torch":
        raise UserError(f"spec.runtimeRef: {label} has the {policy or 'no'} policy; only torch runs here yet")
    pod, where = _node_pod(runtime, label)
    try:
        base = read_pod(pod, "node", where, _template_annotations(runtime))
    except UserError as exc:
        raise UserError(f"{label}: {exc}") from None
    trainer = spec.get("trainer") or {}
    container = _override(base, trainer)
    nodes = int(trainer.get("numNodes") or ml_policy.get("numNodes") or 1)
    nproc_value = trainer.get("numProcPerNode", (ml_policy.get("torch") or {}).get("numProcPerNode", "auto"))
    if nproc_value in (None, "auto"):
        nproc = max(1, container.resources.gpus)
    elif str(nproc_value).isdigit() and int(nproc_value) > 0:
        nproc = int(nproc_value)
    else:
        raise UserError(f"spec.trainer.numProcPerNode: {show(nproc_value)} is not a positive number or auto")
    env = (("PET_NPROC_PER_NODE", str(nproc)), ("WORLD_SIZE", str(nodes * nproc)), *container.env)
    replica = ReplicaSpec("node", nodes, container.argv, container.resources, env, container.image_spec)
    notes = cluster_only_notes(spec) + container.notes
    job = job_spec(body, Trainer.PYTORCH, (replica,), [container.image], {}, container.data,
                    container.data_dirs, {container.working_dir})
    return job, notes


def _override(base: Container, trainer: dict[str, Any]) -> Container:
    """The TrainJob's ``trainer`` over the runtime's node container (Trainer's own precedence)."""
    image = str(trainer.get("image") or base.image)
    command = [str(word) for word in trainer.get("command") or ()]
    args = [str(word) for word in trainer.get("args") or ()]
    notes = list(base.notes)
    has_command = bool(command) or base.has_command
    if command:
        argv: tuple[str, ...] = (*command, *args)
        notes = [note for note in notes if "no command" not in note]
    elif base.has_command:
        argv = (*base.argv, *args) if args else base.argv
    else:
        argv = no_command(image)
    env = dict(base.env)
    env.update(env_pairs(trainer.get("env"), ["spec", "trainer", "env"]))
    wanted = trainer.get("resourcesPerNode")
    res = resources(wanted, ["spec", "trainer", "resourcesPerNode"]) if wanted else base.resources
    in_image = base.image_spec
    if image:
        in_image = replace(in_image or ContainerImage(image), image=image)
        if command:
            in_image = replace(in_image, args_only=False, args=())
        elif not base.has_command:
            in_image = replace(in_image, args_only=True, args=tuple(args) or in_image.args)
        if wanted:
            in_image = replace(in_image, memory_bytes=res.memory_bytes if (wanted.get("limits") or {}).get("memory")
                               else 0, cpus=res.cpu_millis / 1000 if (wanted.get("limits") or {}).get("cpu") else 0.0)
    return Container(argv, image, tuple(env.items()), res, base.working_dir, has_command, base.data,
                     base.data_dirs, notes, in_image)


def _template_annotations(runtime: dict[str, Any]) -> dict[str, Any]:
    """The runtime's ``node`` job's pod template annotations (its ``millpond.io/runtime``)."""
    for job in (runtime.get("template") or {}).get("spec", {}).get("replicatedJobs") or []:
        if job.get("name") == "node":
            return (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get(
                "metadata", {}).get("annotations") or {}
    return {}
