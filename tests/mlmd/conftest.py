"""One home for the ML Metadata tests: a two-step pipeline (``make`` writes a Dataset, ``fit`` reads it and writes a
Model) run twice, the second run a cache hit, then ``millpond server --mlmd-port`` over it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.lineage.pipelines import fit_one
from tests.lineage.support import compiled
from tests.mlmd.support import MlmdServer, run_pipeline, start_server


@dataclass(frozen=True)
class Recorded:
    """The server, and the two runs (``millpond run -o json``): the first ran both tasks, the second hit the cache."""

    server: MlmdServer
    first: dict[str, Any]
    second: dict[str, Any]

    def task(self, run: dict[str, Any], name: str) -> dict[str, Any]:
        [found] = [task for task in run["tasks"] if task["name"] == name]
        return found


@pytest.fixture(scope="package")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    home = tmp_path_factory.mktemp("mlmd") / "home"
    package = compiled(fit_one, home.parent)
    first = run_pipeline(home, package)
    second = run_pipeline(home, package)
    assert all(task["cached"] for task in second["tasks"] if task["name"] in ("make", "fit")), second
    server = start_server(home)
    yield Recorded(server, first, second)
    server.stop()
