"""Where a job keeps its files: ``$MILLPOND_HOME/training/UID/`` (a re-created job is another folder).

``logs/INSTANCE.log`` is each instance's output, one line per line it printed, prefixed with
the UTC time the supervisor read it (``arena logs --timestamps`` shows it, ``--since`` filters
on it); ``work/`` is the working folder when ``--working-dir`` is not given; ``supervisor.log``
is what the supervisor itself printed (a traceback, if it ever fails).
"""

from __future__ import annotations

from pathlib import Path

from millpond.settings import load_settings


def job_folder(uid: str) -> Path:
    return load_settings().home / "training" / uid


def instance_log(uid: str, instance: str) -> Path:
    return job_folder(uid) / "logs" / f"{instance}.log"


def supervisor_log(uid: str) -> Path:
    return job_folder(uid) / "supervisor.log"
