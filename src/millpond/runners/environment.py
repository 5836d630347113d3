"""The environment a task's process starts from: millpond's own, less what belongs to the server.

A task runs the user's code (a KFP component, a DataProcess script); it needs PATH, HOME, the
user's cloud credentials and the like, but never the API token of a ``millpond server``, which
would let it (or anything it runs) drive the API.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from millpond.settings import multi_user_setting

SERVER_ONLY = ("MILLPOND_TOKEN",)
# Multi-user mode: the server's environment is the administrator's, not a namespace's. A task gets its own
# secrets from its spec (kfp-kubernetes, env of a job's container); nothing that names or opens the server's
# database, its TLS files, or a credential the server was started with (any variable so named).
SERVER_SECRETS = ("MILLPOND_DATABASE_URL", "DATABASE_URL", "MILLPOND_TLS_CERT", "MILLPOND_TLS_KEY", "KUBECONFIG",
                  "SSH_AUTH_SOCK", "GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE", "DOCKER_CONFIG",
                  "REGISTRY_AUTH_FILE")
CREDENTIAL_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "ACCESS_KEY", "PRIVATE_KEY", "API_KEY",
                    "AUTH")
CONSOLE_SCRIPT = "arena"  # one of millpond's console scripts, to find the folder they were installed in
# Who a task is, for code in it that acts on millpond itself (the train_job component names and finds its job).
RUN_ID_ENV = "MILLPOND_RUN_ID"
TASK_ID_ENV = "MILLPOND_TASK_ID"


def inherited_environment() -> dict[str, str]:
    """A copy of this process's environment without ``SERVER_ONLY`` variables (multi-user: nor the server's
    secrets, ``server_secret``)."""
    confined = multi_user_setting()
    return {name: value for name, value in os.environ.items()
            if name not in SERVER_ONLY and not (confined and server_secret(name))}


def server_secret(name: str) -> bool:
    """Whether the variable ``name`` of the server's environment stays out of a multi-user task's."""
    upper = name.upper()
    if upper in SERVER_SECRETS:
        return True
    # millpond's own bookkeeping (the engine token its guardian kills by, a grant, a mark) is no credential
    return not upper.startswith("MILLPOND_") and any(word in upper for word in CREDENTIAL_WORDS)


# What makes a process one task's: its run and task, its ledger grant, the engine token its
# guardian kills by (runners.guardian.TOKEN_VAR) when the engine ends, and the task's own mark. Not imported from there:
# guardian.py runs with the standard library only.
TASK_BOUND = (RUN_ID_ENV, TASK_ID_ENV, "MILLPOND_LEDGER_GRANT", "MILLPOND_ENGINE_TOKEN",
              "MILLPOND_PROCESS_MARK")  # the last: runners.process_groups.MARK_VAR, swept when the task ends


def detached_environment() -> dict[str, str]:
    """``inherited_environment`` without what binds a process to the task that started it.

    A process meant to outlive its starter (an InferenceService's supervisor that a pipeline's deploy
    task started) must not carry the engine's token, or the engine's guardian SIGKILLs it when the
    run ends, nor the task's grant, which the task gives back.
    It is millpond's own process (it opens the store), not a task: the server's secrets stay in it.
    """
    return {name: value for name, value in os.environ.items() if name not in SERVER_ONLY and name not in TASK_BOUND}


def console_scripts_folder() -> Path | None:
    """The folder of this installation's console scripts (``arena``, ``millpond``), or None if none is found.

    A venv's ``bin`` (beside its interpreter, even when the venv was never activated), else the
    scheme's scripts folder (``/usr/local/bin``), else the user scheme's (``~/.local/bin``).
    """
    candidates = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))]
    try:
        candidates.append(Path(sysconfig.get_path("scripts", f"{os.name}_user")))
    except KeyError:
        pass
    return next((folder for folder in candidates if os.access(folder / CONSOLE_SCRIPT, os.X_OK)), None)


def with_console_scripts(env: dict[str, str]) -> dict[str, str]:
    """``env`` with millpond's console scripts first on PATH.

    A script written for Arena (seed 000's training step runs ``arena submit`` then polls
    ``arena get``) must reach this millpond's ``arena``, not another on PATH, and not find
    none because the venv millpond runs from was never activated.
    """
    folder = console_scripts_folder()
    if folder is None:
        return dict(env)
    rest = [part for part in env.get("PATH", os.defpath).split(os.pathsep) if part and part != str(folder)]
    return {**env, "PATH": os.pathsep.join([str(folder), *rest])}
