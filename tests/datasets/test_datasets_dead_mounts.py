"""A mount whose daemon was killed is reported dead and cleared by the next command (issue 28, defect 9).

``kill -9`` of a mount's daemon leaves the folder in the mount table answering "Transport endpoint is
not connected". The next command that touches it — ``dataset mounts``, ``mount`` at the folder,
``unmount``, any ``dataset`` command on the dataset, ``millpond ps`` — says it is dead, unmounts it
lazily (``fusermount3 -uz``) and forgets it, so the folder is usable and can be mounted again.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted, records
from tests.datasets_support import local_dataset, payload
from tests.training_support import gone

pytestmark = pytest.mark.skipif(fuse_available() is not None, reason=f"FUSE unavailable: {fuse_available()}")

FILES = {"sub/a.bin": payload("a", 10_000)}


@pytest.fixture
def folder(cli, home: Path, tmp_path: Path) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    """Dataset ds (loaded) mounted at a folder whose daemon was then killed with SIGKILL."""
    local_dataset(cli, tmp_path, FILES)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    assert cli("dataset", "mount", "ds", mnt).code == 0
    (record,) = records()
    os.kill(record.pid, signal.SIGKILL)
    assert gone(record.pid, record.ticks)
    with pytest.raises(OSError):  # "Transport endpoint is not connected"
        os.listdir(mnt)
    yield mnt
    if is_mounted(str(mnt)):
        cli("dataset", "unmount", mnt)


def _cleared(mnt: Path) -> None:
    assert not is_mounted(str(mnt)) and os.listdir(mnt) == [] and records() == []


def test_the_mounts_listing_says_dead_and_clears_it(cli, folder) -> None:  # type: ignore[no-untyped-def]
    (line,) = cli("dataset", "mounts").out.splitlines()
    assert line.endswith("dead (pid " + line.split("pid ")[1].split()[0] + " is gone): unmounted (fusermount3 -uz)")
    assert "\tmounted" not in line
    _cleared(folder)
    assert cli("dataset", "mounts").out == ""  # reported once, then forgotten


def test_mounting_again_at_the_folder_works(cli, folder) -> None:  # type: ignore[no-untyped-def]
    again = cli("dataset", "mount", "ds", folder)
    assert again.code == 0, again.err
    assert "was dead" in again.err
    assert (folder / "sub" / "a.bin").read_bytes() == FILES["sub/a.bin"]
    assert "\tmounted" in cli("dataset", "mounts").out
    assert cli("dataset", "unmount", folder).code == 0


def test_unmount_of_a_dead_mount_succeeds_and_says_so(cli, folder) -> None:  # type: ignore[no-untyped-def]
    result = cli("dataset", "unmount", folder)
    assert result.code == 0, result.err
    assert "was dead" in result.err and result.out.strip() == f"unmounted {folder}"
    _cleared(folder)


def test_any_dataset_command_on_the_dataset_clears_its_dead_mount(cli, folder) -> None:  # type: ignore[no-untyped-def]
    result = cli("dataset", "path", "ds", "sub/a.bin")
    assert result.code == 0, result.err
    assert f"info: the mount of dataset ds at {folder} was dead" in result.err
    _cleared(folder)


def test_millpond_ps_clears_a_dead_mount(cli, folder) -> None:  # type: ignore[no-untyped-def]
    result = cli("ps")
    assert result.code == 0, result.err
    assert f"at {folder}: dead (pid" in result.err
    _cleared(folder)


def test_a_dead_mount_no_record_names_is_cleared_by_a_new_mount(cli, folder) -> None:  # type: ignore[no-untyped-def]
    (record,) = records()
    from millpond.datasets.mounts import forget

    forget(record.folder)  # as if another home had mounted it there
    again = cli("dataset", "mount", "ds", folder)
    assert again.code == 0, again.err
    assert (folder / "sub" / "a.bin").read_bytes() == FILES["sub/a.bin"]
    assert cli("dataset", "unmount", folder).code == 0
