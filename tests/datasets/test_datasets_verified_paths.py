"""A cache file handed out as a path holds the dataset's bytes (issue 28, defect 7).

``millpond dataset path`` (and fsspec's ``local_path``) hand a user a plain file to read, outside
every millpond check: its bytes are verified (each block's CRC32C and the file's length) and
repaired from the UFS before the path is printed. A read through ``millpond://`` that finds a cache
file damaged repairs the file itself, not only the bytes it serves — a length changed behind the
cache's back included (bytes appended keep every block's CRC right).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available
from tests.datasets_support import env_for, local_dataset, payload

BIG = 9 * 1024 * 1024 + 5  # three 4 MiB blocks, the last one short
FILES = {"sub/s1.bin": payload("s1", 50_000), "sub/s2.bin": payload("s2", BIG), "sub/empty.bin": b""}


def _flip(local: Path) -> None:
    """Bytes changed in place in the middle (the middle block of the big file)."""
    with open(local, "r+b") as f:
        f.seek(local.stat().st_size // 2)
        f.write(b"\xff\x00" * 50)


def _append(local: Path) -> None:
    with open(local, "ab") as f:
        f.write(b"junk")


def _cut(local: Path) -> None:
    os.truncate(local, max(0, local.stat().st_size - 1000))


DAMAGE: dict[str, Callable[[Path], None]] = {"flipped": _flip, "appended": _append, "cut": _cut}


@pytest.fixture
def dataset(cli, home: Path, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """Dataset ds over a local folder, loaded; the folder."""
    return local_dataset(cli, tmp_path, FILES)


def _path(cli, key: str) -> Path:  # type: ignore[no-untyped-def]
    result = cli("dataset", "path", "ds", key)
    assert result.code == 0, result.err
    return Path(result.out.strip())


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_dataset_path_hands_out_only_verified_bytes(cli, dataset, damage) -> None:  # type: ignore[no-untyped-def]
    for key, data in FILES.items():
        local = _path(cli, key)
        assert local.read_bytes() == data
        if data or damage == "appended":  # an empty file can only grow
            DAMAGE[damage](local)
            assert local.read_bytes() != data
        handed = _path(cli, key)  # a fresh process: it has verified nothing yet
        assert handed.read_bytes() == data, f"{key} {damage}: the path handed out holds wrong bytes"


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_read_through_millpond_urls_repairs_the_cache_file(cli, home, dataset, damage) -> None:  # type: ignore[no-untyped-def]
    script = "import fsspec,sys; sys.stdout.buffer.write(fsspec.open(sys.argv[1], 'rb').open().read())"
    for key, data in FILES.items():
        if not data:
            continue
        local = _path(cli, key)
        DAMAGE[damage](local)
        read = subprocess.run([sys.executable, "-c", script, f"millpond://ds/{key}"], env=env_for(home),
                              capture_output=True, check=True)
        assert read.stdout == data
        assert local.read_bytes() == data, f"{key} {damage}: the read served around the damage and left it"


def test_fsspecs_local_path_is_verified_too(cli, home, dataset) -> None:  # type: ignore[no-untyped-def]
    script = "import fsspec,sys; print(fsspec.filesystem('millpond').local_path(sys.argv[1]))"
    local = _path(cli, "sub/s2.bin")
    _flip(local)
    handed = subprocess.run([sys.executable, "-c", script, "ds/sub/s2.bin"], env=env_for(home), capture_output=True,
                            text=True, check=True).stdout.strip()
    assert Path(handed).read_bytes() == FILES["sub/s2.bin"]


@pytest.mark.skipif(fuse_available() is not None, reason=f"FUSE unavailable: {fuse_available()}")
def test_a_read_through_the_mount_repairs_a_cache_file_grown_behind_its_back(cli, dataset, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "mnt"
    folder.mkdir()
    assert cli("dataset", "mount", "ds", folder).code == 0
    try:
        for key, data in FILES.items():
            if not data:
                continue  # the kernel reads no byte of an empty file: the mount never sees it (``dataset path`` does)
            local = _path(cli, key)
            _append(local)
            assert (folder / key).read_bytes() == data  # a fresh open: the mount stats the cache file it reads
            assert local.read_bytes() == data, f"{key}: the mount served around the damage and left it"
    finally:
        assert cli("dataset", "unmount", folder).code == 0
