"""The task's kfp-kubernetes config: environment, mounts, secrets and config maps, its time limit.

What it makes for the task (secret files, dataset mounts) is given back when the task ends, or
when a later policy fails it (``TaskLaunch.release``).
"""

from __future__ import annotations

from collections.abc import Mapping

from millpond.pipelines import bindings, ir
from millpond.pipelines.placeholders import PlaceholderContext
from millpond.pipelines.platform import PlatformError, PodInfo, prepare_platform
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    node, request = launch.node, launch.the_request()

    def resolve(binding: Mapping[str, object]) -> object:
        found, value = bindings.resolve_parameter(node.scope, dict(binding), dict(run.job))
        return value if found else None

    # A subPath may hold the launcher's placeholders (a kfp 1.x one: ``{{workflow.uid}}_{{pod.name}}``).
    placeholders = PlaceholderContext(
        {"inputs": {"parameterValues": dict(launch.inputs.parameters)}},
        job={**run.job, "pipeline_task_name": node.display_name, "pipeline_task_uuid": node.record_id or ""},
    )
    # multi-user: the task's pod is its run's namespace's, and so are the datasets it mounts (single-user: default)
    namespace = run.pod_namespace
    try:
        platform = prepare_platform(
            ir.kubernetes_config(run.run.platform_spec, launch.executor.label),
            resolve=resolve,
            render=placeholders.substitute,
            configs=run.configs,
            volumes_dir=run.settings.volumes_dir,
            scratch_dir=run.settings.staging_dir / f"{node.record_id}-platform",
            pod=PodInfo(name=f"{run.resource_name}-{node.name}"[:63], uid=node.record_id or "", namespace=namespace),
            remote=run.remote_datasets,
            volumes_shared=run.settings.is_shared(run.settings.volumes_dir),
        )
    except PlatformError as exc:
        return Fail(str(exc))
    launch.platform = platform
    request.extra_env.update(platform.env)
    request.extra_binds.extend(platform.binds)
    request.datasets = list(platform.dataset_binds)
    request.carried = list(platform.scratch)  # its secret, config-map and empty-dir folders
    request.timeout_s = platform.timeout_s
    return PROCEED
