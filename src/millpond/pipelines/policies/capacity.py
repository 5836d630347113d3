"""A request no machine of this home (or node of the Ray cluster) can ever grant fails now, not never."""

from __future__ import annotations

from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    impossible = run.budget.impossible(launch.resources)
    return Fail(impossible) if impossible else PROCEED
