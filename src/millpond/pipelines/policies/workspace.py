"""The run's workspace folder (kfp's PipelineConfig ``workspace``), shared by its importers and containers."""

from __future__ import annotations

from pathlib import Path

from millpond.settings import Settings
from millpond.store.journal import RunRecord
from millpond.store.paths import contained_path


def workspace_of(run: RunRecord, settings: Settings) -> Path | None:
    """The run's workspace folder, made on first use, when the pipeline declares one; else None."""
    platform = run.platform_spec or {}
    config = platform.get("platforms", {}).get("kubernetes", {}).get("pipelineConfig", {})
    if "workspace" not in config:
        return None
    folder = contained_path(settings.home / "workspaces", run.id, what="run id")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
