"""The launcher's request: what the task runs (its component and container), on what, where it logs.

The run's workspace, when the pipeline declares one, is bound at ``bindings.WORKSPACE_PATH``. In multi-user
mode the task sees of the pipeline root only its own outputs and its namespace's inputs
(``namespace_inputs.confine``): an input of another namespace fails it here, before anything is made.
"""

from __future__ import annotations

from millpond.pipelines import bindings
from millpond.pipelines.launcher import TaskRequest
from millpond.pipelines.namespace_inputs import confine
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict
from millpond.pipelines.policies.workspace import workspace_of
from millpond.runners.base import Bind


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    workspace = workspace_of(run.run, run.settings)
    request = TaskRequest(
        run_id=run.run.id,
        run_name=run.resource_name,
        pipeline_name=run.run.pipeline_name,
        pipeline_root=run.run.pipeline_root,
        task_id=launch.node.record_id or "",
        task_name=launch.node.display_name,
        task_path=launch.node.path,
        component_spec=launch.component.raw,
        container=launch.container.raw,
        parameters=launch.inputs.parameters,
        artifacts=launch.inputs.artifacts,
        log_path=launch.the_log_path(),
        staging_dir=run.settings.staging_dir,
        venvs_dir=run.settings.venvs_dir,
    )
    if workspace is not None:
        request.extra_binds.append(Bind(workspace, bindings.WORKSPACE_PATH))
    launch.request = request
    problem = confine(request, run.run, run.store, run.settings)
    return Fail(problem) if problem else PROCEED
