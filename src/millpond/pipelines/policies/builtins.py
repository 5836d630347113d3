"""kfp-kubernetes' CreatePVC and DeletePVC: done here, on this machine's volumes, with no process."""

from __future__ import annotations

from millpond.pipelines.graph import Outputs
from millpond.pipelines.platform import PlatformError, builtin_task
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Done, Fail, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    try:
        produced = builtin_task(
            launch.container.image, launch.inputs.parameters, run.settings.volumes_dir, run.resource_name,
            run.pod_namespace,
        )
    except PlatformError as exc:
        return Fail(str(exc))
    if produced is None:
        return PROCEED
    return Done(Outputs(parameters=produced), how="ran")
