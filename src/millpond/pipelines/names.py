"""The naming rules the kfp compiler applies, enforced on IR that may not come from it.

A pipeline name and every task key end up in paths (``<root>/<pipeline>/<run>/<task path>``,
the task's log file), so IR written by hand or by a hostile client must not smuggle ``..``,
``/`` or NUL through them. The rules are kfp's own, so any pipeline the kfp compiler writes
passes unchanged:

- ``pipelineInfo.name``: ``kfp.dsl.utils.validate_pipeline_name``, ``^[a-z0-9][a-z0-9-]{0,127}$``;
- task keys: what ``kfp.dsl.utils.sanitize_task_name`` (``maybe_rename_for_k8s``) produces,
  lowercase letters, digits and inner ``-``; at most 253 characters, a Kubernetes name's limit;
- input and output names become file names (output parameter files, artifact URIs): each must
  be one plain file name.
"""

from __future__ import annotations

import re
from typing import Any

from millpond.errors import UserError
from millpond.store.paths import segment_problem

PIPELINE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")
TASK_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_TASK_NAME = 253


class InvalidName(UserError):
    """A name in the IR breaks the kfp compiler's rules (and could be used to leave a folder)."""


def check_pipeline_name(name: object, source: str) -> None:
    """``pipelineInfo.name`` as kfp's compiler requires it (and as it becomes a folder of the pipeline root)."""
    if name is None or name == "":
        return  # millpond names such a pipeline "pipeline"
    if not isinstance(name, str) or not PIPELINE_NAME.fullmatch(name):
        raise InvalidName(
            f"{source}: pipelineInfo.name {_shown(name)} is not a valid pipeline name "
            "(kfp requires ^[a-z0-9][a-z0-9-]{0,127}$: lowercase letters, digits and '-')"
        )


def check_task_name(name: str, owner: str, source: str) -> None:
    """A key of ``dag.tasks`` as kfp's compiler writes it: it names folders and log files."""
    if len(name) > MAX_TASK_NAME or not TASK_NAME.fullmatch(name):
        raise InvalidName(
            f"{source}: {owner}.dag.tasks has an invalid task name {_shown(name)} "
            f"(kfp task names are lowercase letters, digits and '-', starting and ending with a letter or digit, "
            f"at most {MAX_TASK_NAME} characters)"
        )


def check_io_names(component_name: str, component: dict[str, Any], source: str) -> None:
    """Input and output names of a component: each becomes a file name (an output file, an artifact URI)."""
    for side in ("inputDefinitions", "outputDefinitions"):
        definitions = component.get(side) or {}
        for kind in ("parameters", "artifacts"):
            for name in definitions.get(kind) or {}:
                problem = segment_problem(name)
                if problem:
                    raise InvalidName(
                        f"{source}: component {component_name!r} {side}.{kind} name {_shown(name)}: {problem}"
                    )


def _shown(name: Any) -> str:
    """A name as the error line quotes it: in full up to 80 characters, else its start and its length."""
    text = repr(name)
    return text if len(text) <= 80 else f"{text[:60]}… ({len(str(name))} characters)"


MAX_DISPLAY_NAME = 255  # the store's name columns (String(255)); PostgreSQL refuses longer


def check_display_name(what: str, name: str) -> None:
    """A run's or an experiment's name: free text, but it must fit its column and hold no NUL."""
    if "\x00" in name:
        raise UserError(f"{what} must not contain a NUL character")
    if len(name) > MAX_DISPLAY_NAME:
        raise UserError(f"{what} is longer than {MAX_DISPLAY_NAME} characters: {name[:40]!r}...")
