"""Resume: a task that already succeeded in this run keeps its outputs and does not run again.

First, before anything is recorded: its row is the one it already has.
"""

from __future__ import annotations

from millpond.pipelines.graph import Outputs
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Done, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    previous = run.previous.get(launch.node.path)
    if previous is None:
        return PROCEED
    return Done(Outputs.from_json(previous.outputs), how="reused", reused_id=previous.id)
