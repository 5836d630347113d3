"""Training jobs: Arena's model (submit, list, get, logs, delete) run by a background supervisor per job.

``TrainingClient`` and the builders (``PytorchJobBuilder``, ``MPIJobBuilder``, ``TFJobBuilder``; Python,
shaped like Arena's SDK) are imported on first use, so the supervisor and the CLI load only what they need.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MPIJobBuilder", "PytorchJobBuilder", "TFJobBuilder", "TrainingClient", "TrainingJobInfo"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from millpond.training import client  # noqa: PLC0415 - a lazy package attribute: importing millpond.training stays cheap

        return getattr(client, name)
    raise AttributeError(name)
