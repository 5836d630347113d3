"""The FUSE mount of a dataset: lazy reads from S3, served from the cache, write-through on ReadWrite."""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from millpond.datasets.cache.engine import open_cache
from millpond.datasets.mounts import fuse_available, is_mounted, records
from tests.datasets_support import cache_files, create_s3_dataset, env_for, payload

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


# -- a mount serves only true bytes, whatever other processes do to the cache files it holds -----

TRUTH = {"small.bin": payload("small", 50_000), "big.bin": payload("big", 9 * 1024 * 1024)}  # one block; three


def _forget_pages(path: Path) -> None:
    """Drop the kernel's pages of a mounted file: the next read asks the mount's process (as after memory pressure)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _settle(local: Path) -> None:
    """Wait until a write to ``local`` gets a new ctime (file times tick every few ms on older kernels)."""
    written = local.stat().st_ctime_ns
    while time.time_ns() < written + 50_000_000:
        time.sleep(0.01)


def _corrupt(local: Path, at: int) -> None:
    """Flip 100 bytes of a cache file in place (same inode), as a stray writer or a bad disk would."""
    _settle(local)
    with open(local, "r+b") as f:
        f.seek(at)
        f.write(b"\xff" * 100)


def _local(cli, key: str) -> Path:  # type: ignore[no-untyped-def]
    result = cli("dataset", "path", "ds", key)
    assert result.code == 0, result.err
    return Path(result.out.strip())


def _held_but_removed(tier: Path) -> list[str]:
    """Cache files the mount's process still holds open although they were removed or replaced."""
    (record,) = records()
    held = []
    for fd in Path(f"/proc/{record.pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith(str(tier)) and target.endswith(" (deleted)"):
            held.append(target)
    return held


def _read_all_through(mountpoint: Path) -> None:
    for key, data in TRUTH.items():
        assert (mountpoint / key).read_bytes() == data


def _load_mount_and_read(cli, home: Path, tmp_path: Path, s3_server, mountpoint: Path) -> None:  # type: ignore[no-untyped-def]
    """A loaded dataset, mounted and read: the mount holds both cache files open, their blocks verified."""
    create_s3_dataset(cli, home, tmp_path, s3_server, TRUTH)
    assert cli("dataset", "load", "ds").code == 0
    assert cli("dataset", "mount", "ds", mountpoint).code == 0
    _read_all_through(mountpoint)


def test_a_cache_file_corrupted_in_place_under_the_mount_is_fetched_again(
    cli, home, tmp_path, s3_server, mountpoint
) -> None:
    _load_mount_and_read(cli, home, tmp_path, s3_server, mountpoint)
    for key, data in TRUTH.items():
        local = _local(cli, key)
        _corrupt(local, len(data) // 2)  # the middle block of the big file
        _forget_pages(mountpoint / key)
        assert (mountpoint / key).read_bytes() == data
        assert local.read_bytes() == data  # the mount fetched the bad block again and repaired the cache file
    assert cli("dataset", "unmount", mountpoint).code == 0
    assert open_cache("ds").index.counters().get("corrupt_blocks", 0) >= 2


def test_a_cache_file_replaced_by_another_process_is_read_anew(cli, home, tmp_path, s3_server, mountpoint) -> None:
    _load_mount_and_read(cli, home, tmp_path, s3_server, mountpoint)
    small, big = _local(cli, "small.bin"), _local(cli, "big.bin")
    for key, local in (("small.bin", small), ("big.bin", big)):
        _corrupt(local, len(TRUTH[key]) // 2)
    # Another process repairs them, each by writing a new file over the corrupt one (an atomic rename):
    # a millpond reader re-fetches the small file; the big one is put back whole, as a tier move would.
    script = "import fsspec,sys; sys.stdout.buffer.write(fsspec.open(sys.argv[1], 'rb').open().read())"
    repaired = subprocess.run(
        [sys.executable, "-c", script, "millpond://ds/small.bin"], env=env_for(home), capture_output=True, check=True
    )
    assert repaired.stdout == TRUTH["small.bin"]
    fresh = big.with_name(".big.bin.repair")
    fresh.write_bytes(TRUTH["big.bin"])
    os.replace(fresh, big)
    assert small.read_bytes() == TRUTH["small.bin"] and big.read_bytes() == TRUTH["big.bin"]
    for key in TRUTH:
        _forget_pages(mountpoint / key)
    _read_all_through(mountpoint)  # not the old, corrupt copies the mount held open
    assert _held_but_removed(tmp_path / "cache-ssd") == []
    assert cli("dataset", "unmount", mountpoint).code == 0


def test_a_cache_cleaned_by_another_process_is_fetched_again_by_the_mount(
    cli, home, tmp_path, s3_server, mountpoint
) -> None:
    _load_mount_and_read(cli, home, tmp_path, s3_server, mountpoint)
    tier = tmp_path / "cache-ssd"
    assert len(cache_files(tier)) == 2
    clean = subprocess.run(
        [sys.executable, "-m", "millpond.cli.main", "dataset", "clean", "ds"], env=env_for(home), capture_output=True
    )
    assert clean.returncode == 0, clean.stderr
    assert cache_files(tier) == []
    for key in TRUTH:
        _forget_pages(mountpoint / key)
    _read_all_through(mountpoint)  # no EIO: fetched again from the UFS...
    assert len(cache_files(tier)) == 2  # ...into the cache, which counts them again
    assert _held_but_removed(tier) == []  # and the removed files' space is given back
    assert cli("dataset", "unmount", mountpoint).code == 0


def test_a_readonly_mount_declines_flush_and_reads_a_shuffled_folder_ahead(
    cli, home, tmp_path, s3_server, mountpoint
) -> None:
    import mfusepy

    from millpond.datasets.fuse_mount import make_operations

    ds = create_s3_dataset(cli, home, tmp_path, s3_server, FILES)
    # FLUSH answered ENOSYS: the kernel stops sending it (no_flush), so close() costs no round trip.
    with pytest.raises(mfusepy.FuseOSError) as declined:
        make_operations(open_cache("ds")).flush("/mnist/000.gz", 0)
    assert declined.value.errno == errno.ENOSYS
    assert cli("dataset", "mount", "ds", mountpoint).code == 0
    names = sorted(os.listdir(mountpoint / "mnist"))
    order = [names[i] for i in (0, 17, 5, 29, 11, 23, 2)]  # a shuffled epoch's first files
    for name in order:
        with open(mountpoint / "mnist" / name, "rb") as f:  # every close still succeeds
            assert f.read() == ds.files[f"mnist/{name}"]
    # The rest of the folder is fetched ahead of the reader, many at once, without being opened.
    index = open_cache("ds").index
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(index.entry(f"mnist/{n}") for n in names):
        time.sleep(0.05)
    assert all(index.entry(f"mnist/{n}") for n in names), "the shuffled folder was not read ahead"
    assert index.entry("big.bin") is None  # another folder's file, never opened
    assert cli("dataset", "unmount", mountpoint).code == 0



# -- warm reads stay out of Python; what the kernel caches expires with the metadata TTL -----------


@contextlib.contextmanager
def _fuse_requests(tmp_path: Path) -> Iterator[Callable[[Path], collections.Counter[str]]]:
    """The kernel's FUSE requests, by opcode, per mount: its ``fuse`` tracepoints in a trace instance of our own.

    Skips where tracefs cannot be had (not root, or a kernel without the tracepoints, before 6.13).
    """
    if os.geteuid() != 0:
        pytest.skip("counting FUSE requests needs tracefs (root)")
    tracefs = Path("/sys/kernel/tracing")
    mounted_here = None
    if not (tracefs / "instances").is_dir():
        mounted_here = tmp_path / "tracefs"
        mounted_here.mkdir()
        if subprocess.run(["mount", "-t", "tracefs", "nodev", str(mounted_here)], capture_output=True).returncode:
            pytest.skip("tracefs cannot be mounted here")
        tracefs = mounted_here
    instance = tracefs / "instances" / f"millpond-test-{os.getpid()}"
    try:
        instance.mkdir()
        if not (instance / "events" / "fuse" / "fuse_request_send").is_dir():
            pytest.skip("this kernel has no fuse tracepoints")
        (instance / "events" / "fuse" / "fuse_request_send" / "enable").write_text("1")
        (instance / "tracing_on").write_text("1")

        def counted(mountpoint: Path) -> collections.Counter[str]:
            connection = os.stat(mountpoint).st_dev
            found: collections.Counter[str] = collections.Counter()
            for line in (instance / "trace").read_text().splitlines():
                match = re.search(r"fuse_request_send: connection (\d+) req \d+ opcode \d+ \(FUSE_(\w+)\)", line)
                if match and int(match.group(1)) == connection:
                    found[match.group(2)] += 1
            (instance / "trace").write_text("")
            return found

        yield counted
    finally:
        if instance.is_dir():
            (instance / "tracing_on").write_text("0")
            instance.rmdir()
        if mounted_here is not None:
            subprocess.run(["umount", str(mounted_here)], check=False)


def _drop_kernel_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def test_a_listed_folder_is_read_with_one_round_trip_a_file(cli, home, tmp_path, s3_server, mountpoint) -> None:
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, FILES)
    assert cli("dataset", "load", "ds").code == 0
    assert cli("dataset", "mount", "ds", mountpoint).code == 0
    folder = mountpoint / "mnist"
    # The first open of the mount's life asks for OPEN and FLUSH once: declined, never again.
    assert (mountpoint / "big.bin").read_bytes() == ds.files["big.bin"]
    with _fuse_requests(tmp_path) as requests:
        for kernel_caches in ("fresh mount", "dropped"):
            if kernel_caches == "dropped":
                _drop_kernel_caches()
            requests(mountpoint)
            names = sorted(os.listdir(folder))
            listed = requests(mountpoint)
            assert listed["READDIRPLUS"] >= 1 and listed["READDIR"] == 0, listed
            for name in names:
                assert os.stat(folder / name).st_size == len(ds.files[f"mnist/{name}"])
                with open(folder / name, "rb") as f:
                    assert f.read() == ds.files[f"mnist/{name}"]
            read = requests(mountpoint)
            # The listing gave the kernel every name and its attributes: no LOOKUP or GETATTR per
            # file; a ReadOnly mount declined OPEN and FLUSH for good: one READ into Python a file
            # (and the IOCTL of Python's isatty check, answered by libfuse in C).
            for opcode in ("LOOKUP", "GETATTR", "OPEN", "FLUSH", "RELEASE"):
                assert read[opcode] == 0, (kernel_caches, read)
            assert read["READ"] == len(names), (kernel_caches, read)
    assert cli("dataset", "unmount", mountpoint).code == 0


def test_a_changed_ufs_is_seen_through_the_mount_once_the_metadata_ttl_passed(
    cli, home, tmp_path, s3_server, mountpoint
) -> None:
    ttl = 2.0
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, {"d/a.txt": b"first", "d/b.txt": b"kept"},
                           annotations={"data.millpond.io/metadata-ttl": f"{ttl:g}s"})
    assert cli("dataset", "mount", "ds", mountpoint).code == 0
    folder = mountpoint / "d"
    assert sorted(os.listdir(folder)) == ["a.txt", "b.txt"]
    assert (folder / "a.txt").read_bytes() == b"first"  # now in the kernel's page cache, and listed
    changed = time.monotonic()
    fs = s3_server.filesystem()
    fs.pipe_file(f"{ds.bucket}/{ds.prefix}/d/a.txt", b"second, longer")
    fs.pipe_file(f"{ds.bucket}/{ds.prefix}/d/c.txt", b"new")
    # The documented bound: names, attributes and pages the kernel keeps live as long as the
    # dataset's metadata TTL (and the mount's listing is that old at most), so once twice the TTL
    # has passed since the change, every reader sees it.
    time.sleep(max(0.0, changed + 2 * ttl + 0.5 - time.monotonic()))
    assert sorted(os.listdir(folder)) == ["a.txt", "b.txt", "c.txt"]
    assert os.stat(folder / "a.txt").st_size == len(b"second, longer")
    assert (folder / "a.txt").read_bytes() == b"second, longer"
    assert (folder / "c.txt").read_bytes() == b"new"
    assert (folder / "b.txt").read_bytes() == b"kept"
    assert cli("dataset", "unmount", mountpoint).code == 0
