"""One team server for the package's tests (starting one costs seconds; every test reads or writes its own objects)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kfp_multiuser.team import Team, start_team
from tests.server_support import module_home


@pytest.fixture(scope="package")
def team_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "kfp-multiuser")


@pytest.fixture(scope="package")
def team(team_home: Path) -> Iterator[Team]:
    started = start_team(team_home)
    yield started
    started.stop()
