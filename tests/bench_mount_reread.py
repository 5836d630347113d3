"""Read throughput of a cached file through a FUSE mount, and of small files through millpond://.

Not collected by default (run by path): each round mounts the dataset with the code under
test (PYTHONPATH picks the source tree) and reads a cached file through the mount, the
kernel's pages of it dropped before each pass so that every read reaches the mount's process.

    MILLPOND_BENCH_SOURCES=old=/tmp/old/src,new=src .venv/bin/python -m pytest -s tests/bench_mount_reread.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available
from tests.datasets_support import create_s3_dataset, env_for, payload

pytestmark = [
    pytest.mark.s3,
    pytest.mark.skipif(fuse_available() is not None, reason=f"FUSE unavailable: {fuse_available()}"),
]

BIG_MB = int(os.environ.get("MILLPOND_BENCH_MB", "200"))
SMALL_FILES = 2000
PASSES = 5
ROUNDS = int(os.environ.get("MILLPOND_BENCH_ROUNDS", "3"))

SMALL_READER = """
import sys, time, fsspec
names = sys.argv[1:]
fs = fsspec.filesystem("millpond")
for name in names:  # warm: every file cached and verified by this process once
    with fs.open(name, "rb") as f:
        f.read()
best = float("inf")
for _ in range(5):
    started = time.perf_counter()
    for name in names:
        with fs.open(name, "rb") as f:
            f.read()
    best = min(best, time.perf_counter() - started)
print(len(names) / best)
"""


def _sources() -> dict[str, str]:
    spec = os.environ.get("MILLPOND_BENCH_SOURCES", "new=src")
    return dict(part.split("=", 1) for part in spec.split(","))


def _read_through(path: Path) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        buffer = bytearray(1 << 20)
        started = time.perf_counter()
        total = 0
        while count := os.readv(fd, [buffer]):
            total += count
        return total / (1 << 20) / (time.perf_counter() - started)
    finally:
        os.close(fd)


def test_mount_and_fsspec_read_rates(cli, home, tmp_path, s3_server, monkeypatch) -> None:
    files = {"big.bin": payload("big", BIG_MB << 20)} | {
        f"small/{i:05d}.bin": payload(f"s{i}", 10_000) for i in range(SMALL_FILES)
    }
    create_s3_dataset(cli, home, tmp_path, s3_server, files, levels=[
        {"mediumtype": "SSD", "path": str(tmp_path / "cache-ssd"), "quota": f"{BIG_MB + 200}Mi"}
    ])
    assert cli("dataset", "load", "ds").code == 0
    names = [f"ds/small/{i:05d}.bin" for i in range(SMALL_FILES)]
    results: dict[str, dict[str, list[float]]] = {}
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for _ in range(ROUNDS):
        for label, source in _sources().items():
            monkeypatch.setenv("PYTHONPATH", str(Path(source).resolve()))
            assert cli("dataset", "mount", "ds", mnt).code == 0
            try:
                assert (mnt / "big.bin").stat().st_size == BIG_MB << 20
                _read_through(mnt / "big.bin")  # verified once by this mount's process
                rates = [_read_through(mnt / "big.bin") for _ in range(PASSES)]  # the median is kept
            finally:
                assert cli("dataset", "unmount", mnt).code == 0
            small = subprocess.run(
                [sys.executable, "-c", SMALL_READER, *names],
                env=env_for(home) | {"PYTHONPATH": os.environ["PYTHONPATH"]},
                capture_output=True, text=True, check=True,
            )
            entry = results.setdefault(label, {"mount": [], "small": []})
            entry["mount"].append(statistics.median(rates))
            entry["small"].append(float(small.stdout))  # the best of five passes
    for label, entry in results.items():
        print(
            f"\n{label}: mount {BIG_MB} MB cached file "
            f"{statistics.median(entry['mount']):.0f} MB/s (rounds: {', '.join(f'{r:.0f}' for r in entry['mount'])}); "
            f"millpond:// {SMALL_FILES} x 10 kB warm {statistics.median(entry['small']):.0f} files/s "
            f"(rounds: {', '.join(f'{r:.0f}' for r in entry['small'])})"
        )


PREAD = """
import sys, time
from millpond.datasets.cache.engine import open_cache
reader = open_cache("ds").open("big.bin")
size = reader.size
started = time.perf_counter()
reader.pread(0, size)  # the first read of this process checks every block
print("first", size / (time.perf_counter() - started) / 1e6)
for chunk in (1 << 20, 4096):
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for offset in range(0, size if chunk > 4096 else 64 << 20, chunk):
            reader.pread(offset, chunk)
        best = min(best, time.perf_counter() - started)
    calls = (size if chunk > 4096 else 64 << 20) // chunk
    print(chunk, calls / best, best / calls * 1e6)
"""


def test_reader_pread_cost(cli, home, tmp_path, s3_server) -> None:
    """The reader's own cost per call (no FUSE): best of five passes, 1 MiB and 4 KiB preads of a cached file."""
    create_s3_dataset(cli, home, tmp_path, s3_server, {"big.bin": payload("big", BIG_MB << 20)}, levels=[
        {"mediumtype": "SSD", "path": str(tmp_path / "cache-ssd"), "quota": f"{BIG_MB + 200}Mi"}
    ])
    assert cli("dataset", "load", "ds").code == 0
    for _ in range(ROUNDS):
        for label, source in _sources().items():
            lines = subprocess.run(
                [sys.executable, "-c", PREAD], env=env_for(home) | {"PYTHONPATH": str(Path(source).resolve())},
                capture_output=True, text=True, check=True,
            ).stdout.split("\n")
            first, out = lines[0].split(), lines[1].split() + lines[2].split()
            print(
                f"\n{label}: first whole read {float(first[1]):.0f} MB/s; "
                f"1 MiB preads {float(out[1]) * 1.048576:.0f} MB/s ({float(out[2]):.1f} us/call); "
                f"4 KiB preads {float(out[4]):.0f}/s ({float(out[5]):.2f} us/call)"
            )
