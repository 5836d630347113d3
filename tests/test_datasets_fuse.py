"""The FUSE mount of a dataset: lazy reads from S3, served from the cache, write-through on ReadWrite."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from millpond.datasets.cache.engine import open_cache
from millpond.datasets.mounts import fuse_available, is_mounted
from tests.datasets_support import create_s3_dataset, payload

pytestmark = [
    pytest.mark.s3,
    pytest.mark.skipif(fuse_available() is not None, reason=f"FUSE unavailable: {fuse_available()}"),
]

FILES = {f"mnist/{i:03d}.gz": payload(f"m{i}", 30_000 + i) for i in range(30)} | {
    "big.bin": payload("big", 9 * 1024 * 1024)
}


@pytest.fixture
def mountpoint(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "mnt"
    folder.mkdir()
    yield folder
    if is_mounted(str(folder)):
        subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def test_mount_serves_files_lazily_then_from_the_cache(cli, home, tmp_path, s3_server, mountpoint) -> None:
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, FILES)
    result = cli("dataset", "mount", "ds", mountpoint)
    assert result.code == 0, result.err
    assert is_mounted(str(mountpoint))
    assert sorted(os.listdir(mountpoint)) == ["big.bin", "mnist"]
    assert len(os.listdir(mountpoint / "mnist")) == 30
    assert (mountpoint / "big.bin").stat().st_size == len(FILES["big.bin"])
    # A training loop walking the folder in order; the cache fills as it goes.
    for name in sorted(os.listdir(mountpoint / "mnist")):
        assert (mountpoint / "mnist" / name).read_bytes() == ds.files[f"mnist/{name}"]
    with open(mountpoint / "big.bin", "rb") as f:
        f.seek(4 * 1024 * 1024 + 5)
        assert f.read(100) == FILES["big.bin"][4 * 1024 * 1024 + 5:4 * 1024 * 1024 + 105]
        f.seek(0)
        assert f.read() == FILES["big.bin"]
    with pytest.raises(OSError):
        (mountpoint / "new.txt").write_bytes(b"x")  # ReadOnlyMany
    status = cli("get", "dataset", "ds", "-o", "json").json()["status"]
    assert status["cacheStates"]["cachedPercentage"] == "100.0%"
    assert cli("dataset", "mounts").out.count("mounted") == 1
    unmounted = cli("dataset", "unmount", mountpoint)
    assert unmounted.code == 0, unmounted.err
    assert not is_mounted(str(mountpoint))
    # Mounted again, with the UFS gone quiet: everything is served from the cache.
    assert cli("dataset", "mount", "ds", mountpoint).code == 0
    fetched = open_cache("ds").index.counters().get("ufs_fetched_bytes", 0)
    for name in sorted(os.listdir(mountpoint / "mnist")):
        assert (mountpoint / "mnist" / name).read_bytes() == ds.files[f"mnist/{name}"]
    assert cli("dataset", "unmount", mountpoint).code == 0
    assert open_cache("ds").index.counters().get("ufs_fetched_bytes", 0) == fetched


def test_readwrite_mount_writes_through_to_s3(cli, home, tmp_path, s3_server, mountpoint) -> None:
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, {"in/a.txt": b"input"}, access="ReadWriteMany")
    assert cli("dataset", "mount", "ds", mountpoint).code == 0
    (mountpoint / "out").mkdir()
    (mountpoint / "out" / "model.ckpt").write_bytes(b"checkpoint bytes")
    assert ds.object("out/model.ckpt") == b"checkpoint bytes"
    with open(mountpoint / "in" / "a.txt", "ab") as f:
        f.write(b" + more")
    assert ds.object("in/a.txt") == b"input + more"
    os.unlink(mountpoint / "out" / "model.ckpt")
    assert not s3_server.filesystem().exists(f"{ds.bucket}/{ds.prefix}/out/model.ckpt")
    assert cli("dataset", "unmount", mountpoint).code == 0


def test_mount_errors_are_one_line(cli, home, tmp_path, s3_server, mountpoint) -> None:
    missing = cli("dataset", "mount", "nosuch", mountpoint)
    assert missing.code == 2 and missing.err.count("\n") == 1 and "nosuch" in missing.err
    create_s3_dataset(cli, home, tmp_path, s3_server, {"a": b"a"})
    not_folder = cli("dataset", "mount", "ds", tmp_path / "absent")
    assert not_folder.code == 2 and "is not a folder" in not_folder.err
    not_mounted = cli("dataset", "unmount", mountpoint)
    assert not_mounted.code == 2 and "is not mounted" in not_mounted.err
    # A dataset whose UFS cannot be listed fails to mount, saying why, and leaves nothing mounted.
    text = (tmp_path / "ds.yaml").read_text()
    text = text.replace(s3_server.endpoint_url, "http://127.0.0.1:9").replace("name: ds", "name: gone")
    (tmp_path / "gone.yaml").write_text(text)
    assert cli("apply", "-f", tmp_path / "gone.yaml").code == 0
    failed = cli("dataset", "mount", "gone", mountpoint)
    assert failed.code == 2 and failed.err.count("\n") == 1 and "127.0.0.1:9" in failed.err
    assert not is_mounted(str(mountpoint))
