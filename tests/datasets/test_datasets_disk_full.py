"""A tier's quota larger than its disk is bounded by the disk (issue 28: sizes the machine can honour).

Fluid takes any quota, and a home's disk may be smaller than the quota written for a cluster. The
cache never writes past what the tier's filesystem has free (evicting first, then serving uncached),
so a read of a dataset larger than the disk still returns every byte instead of "No space left on
device", and ``dataset load`` says how much of the dataset it could keep rather than claiming it all.
The tier here is a 2 MiB tmpfs (mounted by the test: root only) under a 1Gi quota.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.datasets_support import env_for, manifest, payload

FILES = {f"f{i}.bin": payload(f"f{i}", 900_000) for i in range(3)} | {"big.bin": payload("big", 5_000_000)}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_dataset_larger_than_its_tiers_disk_is_read_whole(cli, home: Path, tmp_path: Path, small_disk) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "ufs"
    source.mkdir()
    for key, data in FILES.items():
        (source / key).write_bytes(data)
    levels = [{"mediumtype": "SSD", "path": str(small_disk), "quota": "1Gi"}]
    (tmp_path / "ds.yaml").write_text(manifest("ds", f"local://{source}", secret=False, levels=levels))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    script = "import fsspec,sys; sys.stdout.buffer.write(fsspec.open(sys.argv[1], 'rb').open().read())"
    for key, data in FILES.items():
        read = subprocess.run([sys.executable, "-c", script, f"millpond://ds/{key}"], env=env_for(home),
                              capture_output=True)
        assert read.returncode == 0, read.stderr.decode()[-1500:]
        assert read.stdout == data, key
    assert cli("dataset", "clean", "ds").code == 0
    loaded = cli("dataset", "load", "ds")
    assert loaded.code == 0, loaded.err
    assert "of them cached: the rest did not fit (the tiers' quota, or their disk)" in loaded.out, loaded.out
    for key, data in FILES.items():  # and what the cache kept is served right
        found = cli("dataset", "path", "ds", key)
        if found.code == 0:
            assert Path(found.out.strip()).read_bytes() == data
