"""The task's image: where it runs (``runners.containers.policy``), how its image is pulled, with what.

This policy only describes the image (the run's runtime policy, the task's ``millpond.io/runtime``
pod annotation over it, the pull policy and pull secrets of its kfp-kubernetes config, its CPU and
memory limits); the launcher decides on the worker, where a pull may take its time, and the task's
log says where it ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from millpond.errors import MillpondError, UserError
from millpond.pipelines import ir
from millpond.pipelines.builtin_images import MILLPOND_STEP_IMAGES
from millpond.pipelines.placeholders import PlaceholderContext
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict
from millpond.pipelines.resources import with_inputs
from millpond.quantities import parse_bytes, parse_quantity
from millpond.runners.containers.images import dockerconfig_of
from millpond.runners.containers.policy import RAN_IN, Decision, ImageRequest, chosen
from millpond.runners.python_env import split_prelude


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    request = launch.the_request()
    image = _rendered_image(launch, run)
    if not image or image in MILLPOND_STEP_IMAGES:  # millpond's own steps run its commands, not an image
        return PROCEED
    if image != launch.container.image:  # the row shows the image the task runs in, not its placeholder
        run.store.update_task(launch.node.record_id or "", image=image)
    config = ir.kubernetes_config(run.run.platform_spec, launch.executor.label) or {}
    annotations = launch.platform.annotations if launch.platform else {}
    try:
        secrets = _pull_secrets(config, run, launch)
        resources = with_inputs(launch.container.raw, dict(launch.inputs.parameters)).get("resources") or {}
        memory = resources.get("resourceMemoryLimit") or resources.get("memoryLimit")
        cpus = resources.get("resourceCpuLimit") or resources.get("cpuLimit")
        request.image = ImageRequest(
            image=image,
            policy=chosen(annotations, run.settings.runtime),
            pull_policy=config.get("imagePullPolicy") or None,
            pull_secrets=secrets,
            args_only=not launch.container.raw.get("command"),
            lightweight=split_prelude(list(launch.container.raw.get("command") or [])) is not None,
            shm_bytes=_shared_memory(config),
        )
        request.memory_limit = (parse_bytes(str(memory), "resourceMemoryLimit") if isinstance(memory, str)
                                else int(float(memory) * 1e9) if memory else None)
        request.cpu_limit = _cores(cpus)
        request.on_placed = _recorder(launch)
    except MillpondError as exc:
        return Fail(str(exc))
    return PROCEED


def _rendered_image(launch: TaskLaunch, run: RunContext) -> str:
    """The image with its placeholders filled (a kfp 1.x step's image from a pipeline parameter:
    ``image=image`` in seed 002 is ``{{$.inputs.parameters['image']}}`` in the IR)."""
    image = launch.container.image
    if "{{" not in image:
        return image
    placeholders = PlaceholderContext(
        {"inputs": {"parameterValues": dict(launch.inputs.parameters)}},
        job={**run.job, "pipeline_task_name": launch.node.display_name,
             "pipeline_task_uuid": launch.node.record_id or ""},
    )
    return placeholders.substitute(image).strip()


def _pull_secrets(config: dict[str, object], run: RunContext, launch: TaskLaunch) -> tuple[dict[str, object], ...]:
    """Each named pull secret's registry config; one that does not exist is left out with a note in the task's
    log, as the kubelet pulls without it ("Unable to retrieve some image pull secrets")."""
    found = []
    entries = config.get("imagePullSecret")
    for entry in entries if isinstance(entries, list) else []:
        name = str(entry.get("secretName") or "") if isinstance(entry, dict) else ""
        if not name:
            continue
        try:
            data = run.configs.get("secret", name)
        except UserError:  # missing, or a name no Secret can have (kfp's sample names ``secretA``)
            with open(launch.the_log_path(), "a", encoding="utf-8") as log:
                log.write(f"[millpond] imagePullSecret {name!r} not found: pulling without it\n")
            continue
        found.append(dockerconfig_of(data, f"imagePullSecret {name!r}"))
    return tuple(found)


def _recorder(launch: TaskLaunch) -> Callable[[Decision], dict[str, Any]]:
    """Where the task ran, as a pod annotation on its row (``millpond.io/ran-in``: the UI and the Pod views),
    written with the row's RUNNING (one write per task, not two: a wide loop records thousands)."""
    labels = dict(launch.platform.labels) if launch.platform else {}
    annotations = dict(launch.platform.annotations) if launch.platform else {}

    def record(decision: Decision) -> dict[str, Any]:
        return {"pod_metadata": {"labels": labels, "annotations": {**annotations, RAN_IN: decision.ran_in}}}

    return record


def _shared_memory(config: dict[str, object]) -> int | None:
    """kfp-kubernetes' ``enabledSharedMemory`` as the container's /dev/shm size: its ``size``, else 1 GiB (a
    memory-backed emptyDir without a limit; the runtime's own default, 64 MiB, is what the option is there to lift)."""
    shared = config.get("enabledSharedMemory")
    if not isinstance(shared, dict):
        return None
    size = shared.get("size")
    return parse_bytes(str(size), "enabledSharedMemory.size") if size else 1 << 30


def _cores(value: object) -> float | None:
    """A CPU limit in cores (``500m``, ``2``, the IR's double), None when unset."""
    if value in (None, "", 0):
        return None
    return float(parse_quantity(value, "resourceCpuLimit").cores)
