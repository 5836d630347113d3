"""Where an Experiment's controller keeps its files: ``$MILLPOND_HOME/katib/UID/`` (a re-created Experiment is another
folder): ``supervisor.log`` (what its supervisor printed) and ``supervisor.lock`` (one supervisor per uid)."""

from __future__ import annotations

from pathlib import Path

from millpond.settings import Settings


def folder(settings: Settings, uid: str) -> Path:
    return settings.home / "katib" / uid


def supervisor_log(settings: Settings, uid: str) -> Path:
    return folder(settings, uid) / "supervisor.log"
