"""An importer task (``dsl.importer``): recorded PENDING and handed to a worker as it stands.

No container policy applies to it (it has no process, no resources, no cache), so it ends the
list here with ``Submit``.
"""

from __future__ import annotations

from pathlib import Path

from millpond.errors import MillpondError
from millpond.pipelines.cluster import unshared_file
from millpond.pipelines.importer import importer_uri, run_importer
from millpond.pipelines.outcomes import TaskOutcome
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Submit, Verdict
from millpond.pipelines.policies.workspace import workspace_of
from millpond.pipelines.views import ComponentSpec, ImporterSpec, TaskInputs
from millpond.scheduling import Grant
from millpond.settings import Settings


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    importer = launch.executor.importer
    if importer is None:
        return PROCEED
    run.rows.record_task(launch, "importer", None, None)
    workspace = workspace_of(run.run, run.settings)
    began = run.rows.starter(launch.node)
    component, inputs, settings = launch.component, launch.inputs, run.settings

    def imported(_grant: Grant) -> TaskOutcome:
        began(None)
        return run_import(importer, component, inputs, workspace, settings)

    return Submit(imported)


def run_import(
    importer: ImporterSpec, component: ComponentSpec, inputs: TaskInputs, workspace: Path | None, settings: Settings
) -> TaskOutcome:
    """Import the artifact (in a worker thread): its outputs, or the one line saying why not."""
    try:
        if settings.ray_address:  # the tasks reading it run on Ray nodes: a file here is not theirs
            problem = unshared_file(importer_uri(importer, inputs.parameters), settings)
            if problem:
                return TaskOutcome(succeeded=False, error=problem)
        outputs = run_importer(importer, component, inputs.parameters, workspace)
    except MillpondError as exc:
        return TaskOutcome(succeeded=False, error=str(exc))
    return TaskOutcome(succeeded=True, parameters=outputs.parameters, artifacts=outputs.artifacts)
