"""One home for the ML Metadata tests: a two-step pipeline (``make`` writes a Dataset, ``fit`` reads it and writes a
Model) run twice, the second run a cache hit, then ``millpond server --mlmd-port`` over it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.lineage.pipelines import fit_one
from tests.lineage.support import compiled
from tests.mlmd.support import Recorded, run_pipeline, start_server


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
