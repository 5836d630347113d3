"""One place for configuration: the MILLPOND_* environment variables and the home folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """Where millpond keeps its state, and how much of the machine it may use."""

    home: Path
    max_parallel: int
    fork_server: bool = True  # lightweight tasks fork from a warm process (MILLPOND_FORK_SERVER=0: never)

    @property
    def database_url(self) -> str:
        url = os.environ.get("MILLPOND_DATABASE_URL")
        return url or f"sqlite:///{self.home / 'millpond.db'}"

    @property
    def default_pipeline_root(self) -> Path:
        return self.home / "artifacts"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def staging_dir(self) -> Path:
        return self.home / "staging"

    @property
    def venvs_dir(self) -> Path:
        return self.home / "venvs"

    @property
    def volumes_dir(self) -> Path:
        """Named local volumes: what a PVC is on one machine."""
        return self.home / "volumes"


def load_settings() -> Settings:
    """Read settings from the environment each call, so tests can point MILLPOND_HOME anywhere."""
    home = Path(os.environ.get("MILLPOND_HOME") or Path.home() / ".millpond").expanduser().resolve()
    parallel = os.environ.get("MILLPOND_MAX_PARALLEL")
    return Settings(
        home=home,
        max_parallel=int(parallel) if parallel else (os.cpu_count() or 1),
        fork_server=os.environ.get("MILLPOND_FORK_SERVER", "1").lower() not in ("0", "false", "no"),
    )
