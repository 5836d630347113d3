"""``--runtime``: where this command's tasks run (their images or this machine), for ``run`` and ``server``.

It stands for ``MILLPOND_RUNTIME`` for the processes the command starts, which read their settings
from the environment, as ``--ray`` stands for ``MILLPOND_RAY_ADDRESS``. An object's
``millpond.io/runtime`` annotation still wins for that object (runners.containers.policy).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import click

from millpond.runners.containers.policy import POLICIES

RUNTIME_ENV = "MILLPOND_RUNTIME"


def _remember(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value:
        os.environ[RUNTIME_ENV] = value
    return value


def runtime_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--runtime", type=click.Choice(POLICIES), default=None, expose_value=False, callback=_remember,
        help="Where tasks run: in their images (container, podman, docker), on this machine (host), or "
             "auto: in the image when a container runtime works and the image can be had "
             f"(default: ${RUNTIME_ENV}, else `millpond config get runtime`, else auto).",
    )(command)
