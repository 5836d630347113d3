"""The dataset cache against a real S3 server (SeaweedFS): reads, loads, eviction, corruption,
restarts, UFS changes, concurrency, write-through, and the status Fluid users read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import fsspec
import pytest

from millpond.datasets.cache.engine import FETCH_THREADS, open_cache
from tests.datasets_support import cache_files, create_s3_dataset, env_for, payload

pytestmark = pytest.mark.s3

SMALL = {f"train/{i:03d}.bin": payload(f"train/{i:03d}", 10_000 + i) for i in range(40)}


def read(name: str, path: str) -> bytes:
    with fsspec.open(f"millpond://{name}/{path}", "rb") as f:
        return f.read()


def test_reads_through_fsspec_fill_the_cache_and_status_follows(cli, home, tmp_path, s3_server) -> None:
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, SMALL)
    before = cli("get", "dataset", "ds", "-o", "json").json()["status"]
    assert before["phase"] == "Bound"
    assert before["fileNum"] == "40"
    assert before["cacheStates"]["cached"] == "0.00B"
    for key in reversed(list(SMALL)[:10]):  # backwards: no read-ahead, only these ten get cached
        assert read("ds", key) == ds.files[key]
    fs = fsspec.filesystem("millpond")
    assert sorted(fs.ls("ds/train", detail=False))[:2] == ["ds/train/000.bin", "ds/train/001.bin"]
    assert fs.info("ds/train/003.bin")["size"] == 10_003
    open_cache("ds").flush()
    status = cli("get", "dataset", "ds", "-o", "json").json()["status"]
    cached = sum(len(ds.files[k]) for k in list(SMALL)[:10])
    total = sum(len(v) for v in SMALL.values())
    assert status["cacheStates"]["cachedPercentage"] == f"{100 * cached / total:.1f}%"
    assert status["cacheStates"]["cacheCapacity"] == "256.00MiB"
    assert status["cacheStates"]["cacheHitRatio"] == "0.0%"  # every read so far was a miss
    for key in list(SMALL)[:10]:
        read("ds", key)
    open_cache("ds").flush()
    status = cli("get", "dataset", "ds", "-o", "json").json()["status"]
    assert status["cacheStates"]["cacheHitRatio"] == "50.0%"
    table = cli("get", "dataset")
    assert table.out.split("\n")[0].split() == [
        "NAME", "UFS", "TOTAL", "SIZE", "CACHED", "CACHE", "CAPACITY", "CACHED", "PERCENTAGE", "PHASE", "AGE"
    ]
    assert "Bound" in table.out.split("\n")[1]


def test_a_folder_read_in_order_is_read_ahead(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, SMALL)
    keys = list(SMALL)
    for key in keys[:3]:
        read("ds", key)
    cache = open_cache("ds")
    cache._pool.shutdown(wait=True)  # let the read-ahead finish
    cached = {row.path for row in cache.index.entries()} | {row.path for row in cache._pending_rows}
    assert set(keys[3:3 + 30]) <= cached


def test_a_folder_read_in_a_shuffled_order_is_read_ahead_whole(cli, home, tmp_path, s3_server) -> None:
    # A training loop's shuffled epoch: every file of train/ is wanted, in an order nobody can guess.
    files = SMALL | {f"val/{i:03d}.bin": payload(f"val/{i:03d}", 9_000 + i) for i in range(10)}
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, files)
    keys = list(SMALL)
    for position in (0, 17, 5, 29, 11):  # after the first, four opens out of order
        assert read("ds", keys[position]) == ds.files[keys[position]]
    cache = open_cache("ds")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(cache.index.entry(key) for key in keys):
        time.sleep(0.05)
    assert all(cache.index.entry(key) for key in keys), "train/ was not read ahead whole"
    assert not any(cache.index.entry(key) for key in files if key.startswith("val/")), "val/ was never opened"
    assert cache.local_path(keys[33]).read_bytes() == ds.files[keys[33]]


def test_a_shuffled_folder_is_not_read_ahead_past_half_the_free_room(cli, home, tmp_path, s3_server) -> None:
    # 40 files of ~10 kB (~400 kB) against 0.95 × 600 KiB of room: read ahead, they would evict
    # what is cached for files nobody has asked for yet.
    levels = [{"mediumtype": "SSD", "path": str(tmp_path / "cache-ssd"), "quota": "600Ki"}]
    create_s3_dataset(cli, home, tmp_path, s3_server, SMALL, levels=levels)
    cache = open_cache("ds")
    cache._sweep("train")
    assert not cache._inflight
    assert cache.index.entries() == []
    fits = dict(list(SMALL.items())[:20])  # ~200 kB: under half the room, so it is read ahead
    create_s3_dataset(cli, home, tmp_path, s3_server, fits, name="small", levels=[
        {"mediumtype": "SSD", "path": str(tmp_path / "cache-small"), "quota": "600Ki"}])
    small = open_cache("small")
    small._sweep("train")
    small._pool.shutdown(wait=True)  # the sweep queued every fetch before returning: let them finish
    assert sorted(row.path for row in small.index.entries()) == sorted(fits)


def test_a_reader_takes_over_a_read_ahead_still_queued(cli, home, tmp_path, s3_server) -> None:
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, SMALL)
    cache = open_cache("ds")
    gate = threading.Event()
    busy = [cache._pool.submit(gate.wait) for _ in range(FETCH_THREADS)]  # every read-ahead thread taken
    try:
        meta = cache.stat("train/007.bin")
        cache.prefetch(meta, 0)  # queued behind them
        assert not cache._inflight[(meta.path, 0)].running()
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(cache.fetch(meta, 0)))
        reader.start()
        reader.join(30)
        assert got == [ds.files["train/007.bin"]], "the reader waited behind the read-ahead queue"
    finally:
        gate.set()
    for future in busy:
        future.result(timeout=30)
    cache._pool.shutdown(wait=True)  # the read-ahead taken over is skipped, not fetched a second time
    cache.flush()
    assert cache.index.counters()["ufs_fetched_bytes"] == len(ds.files["train/007.bin"])
    assert not cache._inflight


def test_load_caches_everything_and_cached_files_have_plain_local_paths(cli, home, tmp_path, s3_server) -> None:
    files = {**SMALL, "big/model.bin": payload("big", 9 * 1024 * 1024 + 17)}  # 3 blocks of 4 MiB
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, files)
    result = cli("dataset", "load", "ds")
    assert result.code == 0, result.err
    assert "41 files" in result.out
    status = cli("get", "dataset", "ds", "-o", "json").json()["status"]
    assert status["cacheStates"]["cachedPercentage"] == "100.0%"
    local = cli("dataset", "path", "ds", "big/model.bin")
    assert local.code == 0
    assert Path(local.out.strip()).read_bytes() == ds.files["big/model.bin"]
    assert Path(local.out.strip()).is_relative_to(tmp_path / "cache-ssd")
    # A second load fetches nothing.
    again = cli("dataset", "load", "ds")
    assert "fetched 0 " in again.out


def test_partial_reads_of_a_large_file_fetch_only_its_blocks(cli, home, tmp_path, s3_server) -> None:
    data = payload("large", 10 * 1024 * 1024)
    create_s3_dataset(cli, home, tmp_path, s3_server, {"large.bin": data})
    with fsspec.open("millpond://ds/large.bin", "rb") as f:
        f.seek(5 * 1024 * 1024)
        assert f.read(1000) == data[5 * 1024 * 1024:5 * 1024 * 1024 + 1000]
    cache = open_cache("ds")
    row = cache.index.entry("large.bin")
    assert row is not None and not row.complete
    assert list(row.present)[1] == 1 and row.present[0] == 0
    assert cli("dataset", "path", "ds", "large.bin").code == 1  # not completely cached: no plain path yet
    assert read("ds", "large.bin") == data
    cache._pool.shutdown(wait=True)  # let the read-ahead finish
    assert cache.local_path("large.bin") is not None


def test_eviction_keeps_quota_and_never_takes_what_a_reader_holds(cli, home, tmp_path, s3_server) -> None:
    files = {f"f{i:02d}": payload(f"f{i:02d}", 100 * 1024) for i in range(30)}
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "1Mi", "high": "0.9", "low": "0.5"}]
    create_s3_dataset(cli, home, tmp_path, s3_server, files, levels=levels)
    fs = fsspec.filesystem("millpond")
    held = fs.open("ds/f00", "rb")
    first_half = held.read(50 * 1024)
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            for _ in range(2):
                for i in range(1, 30):
                    assert read("ds", f"f{i:02d}") == files[f"f{i:02d}"]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    readers = [threading.Thread(target=churn) for _ in range(3)]
    for thread in readers:
        thread.start()
    for thread in readers:
        thread.join()
    assert not errors, errors
    cache = open_cache("ds")
    assert sum(cache.index.usage().values()) <= 1024 * 1024
    # The file held open was never evicted: still cached, and the reader finishes it from there.
    assert cache.index.entry("f00") is not None
    assert first_half + held.read() == files["f00"]
    held.close()
    assert len(cache_files(tmp_path / "shm")) <= 10


def test_full_tier_demotes_to_the_next_tier(cli, home, tmp_path, s3_server) -> None:
    files = {f"f{i:02d}": payload(f"f{i:02d}", 100 * 1024) for i in range(20)}
    levels = [
        {"mediumtype": "MEM", "path": str(tmp_path / "mem"), "quota": "512Ki", "high": "0.9", "low": "0.5"},
        {"mediumtype": "SSD", "path": str(tmp_path / "ssd"), "quota": "64Mi", "high": "0.95", "low": "0.7"},
    ]
    create_s3_dataset(cli, home, tmp_path, s3_server, files, levels=levels)
    assert cli("dataset", "load", "ds").code == 0
    cache = open_cache("ds")
    usage = cache.index.usage()
    assert usage.get(0, 0) <= 512 * 1024
    assert sum(usage.values()) == sum(len(v) for v in files.values())  # nothing lost: moved down, not dropped
    assert len(cache_files(tmp_path / "ssd")) > 0
    for key, data in files.items():
        assert read("ds", key) == data


def test_a_corrupt_piece_is_detected_and_fetched_again(cli, home, tmp_path, s3_server) -> None:
    files = {"small.bin": payload("small", 50_000), "large.bin": payload("large", 9 * 1024 * 1024)}
    create_s3_dataset(cli, home, tmp_path, s3_server, files)
    assert cli("dataset", "load", "ds").code == 0
    for key in files:
        local = Path(cli("dataset", "path", "ds", key).out.strip())
        with open(local, "r+b") as f:
            f.seek(len(files[key]) // 2)  # the middle block of the large file
            f.write(b"\xff" * 100)
    # A fresh process has verified nothing yet: it must notice, fetch the pieces again and serve good bytes.
    script = "import fsspec,sys; sys.stdout.buffer.write(fsspec.open(sys.argv[1], 'rb').open().read())"
    for key, data in files.items():
        out = subprocess.run(
            [sys.executable, "-c", script, f"millpond://ds/{key}"], env=env_for(home), capture_output=True, check=True
        )
        assert out.stdout == data
    # And this process, which had verified them before they were written to, checks again (their ctime changed).
    for key, data in files.items():
        assert read("ds", key) == data
    assert Path(cli("dataset", "path", "ds", "large.bin").out.strip()).read_bytes() == files["large.bin"]
    assert open_cache("ds").index.counters().get("corrupt_blocks", 0) >= 2


def _open_files() -> list[str]:
    """What this process holds open (a removed file shows `` (deleted)`` after its name)."""
    names = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            names.append(os.readlink(fd))
        except OSError:
            continue  # closed meanwhile
    return names


def test_a_reader_shared_by_threads_follows_its_file_being_replaced(cli, home, tmp_path, s3_server) -> None:
    """One long-lived reader (as a FUSE mount keeps one per file), read by many threads while another
    writer puts a new copy of its cache file in place again and again: every read is true, none fails,
    and the reader lets each replaced file go (its space is not held)."""
    files = {"small.bin": payload("small", 50_000), "large.bin": payload("large", 9 * 1024 * 1024)}
    create_s3_dataset(cli, home, tmp_path, s3_server, files)
    assert cli("dataset", "load", "ds").code == 0
    cache = open_cache("ds")
    readers = {key: cache.open(key) for key in files}
    locals_ = {key: Path(cli("dataset", "path", "ds", key).out.strip()) for key in files}
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker(key: str, seed: int) -> None:
        data, reader, step = files[key], readers[key], 65_536 + seed * 4_099
        offset = seed * 10_007
        try:
            while not stop.is_set():
                offset = (offset + step) % len(data)
                assert reader.pread(offset, 300_000) == data[offset:offset + 300_000]
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=worker, args=(key, i)) for key in files for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        for round_ in range(40):
            for key, local in locals_.items():
                fresh = local.with_name(f".{local.name}.{round_}")
                fresh.write_bytes(files[key])
                os.replace(fresh, local)
            time.sleep(0.01)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors[0]
    for key, reader in readers.items():
        assert reader.pread(0, len(files[key])) == files[key]  # reads the file now in place, and holds no other:
    assert not [name for name in _open_files() if name.startswith(str(tmp_path)) and name.endswith(" (deleted)")]
    for reader in readers.values():
        reader.close()


def test_the_index_survives_a_restart(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, SMALL)
    load = subprocess.run(
        [sys.executable, "-m", "millpond.cli.main", "dataset", "load", "ds"],
        env=env_for(home), capture_output=True, text=True,
    )
    assert load.returncode == 0, load.stderr
    # Another process, started later, serves everything from the cache: no byte comes from the UFS.
    script = (
        "import fsspec; from millpond.datasets.cache.engine import open_cache\n"
        "fs = fsspec.filesystem('millpond')\n"
        f"data = [fs.cat_file('ds/' + k) for k in {list(SMALL)!r}]\n"
        "c = open_cache('ds'); c.flush(); print(c.index.counters().get('ufs_fetched_bytes'), sum(map(len, data)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], env=env_for(home), capture_output=True, text=True, check=True)
    fetched, read_bytes = map(int, out.stdout.split())
    assert read_bytes == sum(len(v) for v in SMALL.values())
    assert fetched == read_bytes  # all fetched by the load, none by the reader after the restart


def test_metadata_follows_ufs_changes_on_sync_and_after_the_ttl(cli, home, tmp_path, s3_server) -> None:
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, {"a.txt": b"first", "b.txt": b"bee"},
                           annotations={"data.millpond.io/metadata-ttl": "2s"})
    assert read("ds", "a.txt") == b"first"
    ds.put("a.txt", b"second version")
    ds.put("c.txt", b"new")
    ds.remove("b.txt")
    assert cli("dataset", "sync", "ds").code == 0
    assert read("ds", "a.txt") == b"second version"
    fs = fsspec.filesystem("millpond")
    assert sorted(fs.ls("ds", detail=False)) == ["ds/a.txt", "ds/c.txt"]
    # Without a sync: the TTL (2 s) runs out and the next look lists the UFS again.
    ds.put("d.txt", b"later")
    time.sleep(2.6)
    assert read("ds", "d.txt") == b"later"


def test_a_file_changed_in_the_ufs_is_not_served_stale_after_sync(cli, home, tmp_path, s3_server) -> None:
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, {"model.bin": payload("v1", 5 * 1024 * 1024)})
    assert cli("dataset", "load", "ds").code == 0
    ds.put("model.bin", payload("v2", 6 * 1024 * 1024))
    assert cli("dataset", "sync", "ds").code == 0
    assert read("ds", "model.bin") == ds.files["model.bin"]


def test_concurrent_readers_in_threads_and_processes(cli, home, tmp_path, s3_server) -> None:
    files = {f"d/{i:03d}": payload(f"c{i}", 20_000 + 7 * i) for i in range(60)}
    files["d/large"] = payload("large", 9 * 1024 * 1024)
    create_s3_dataset(cli, home, tmp_path, s3_server, files)
    script = (
        "import fsspec, hashlib, sys, json\n"
        "fs = fsspec.filesystem('millpond')\n"
        "print(json.dumps({k: hashlib.sha256(fs.cat_file('ds/' + k)).hexdigest() for k in sys.argv[1:]}))\n"
    )
    keys = sorted(files)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, *(keys[i:] + keys[:i])], env=env_for(home), stdout=subprocess.PIPE, text=True
        )
        for i in (0, 20, 40)
    ]
    errors: list[BaseException] = []

    def worker(offset: int) -> None:
        try:
            for key in keys[offset:] + keys[:offset]:
                assert read("ds", key) == files[key]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i * 7,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    import hashlib

    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        assert json.loads(out) == {k: hashlib.sha256(files[k]).hexdigest() for k in keys}
    cache = open_cache("ds")
    cache.flush()
    rows = cache.index.entries()
    assert sorted(r.path for r in rows) == keys
    assert all(r.complete for r in rows)


def test_readwrite_dataset_writes_through_to_the_ufs(cli, home, tmp_path, s3_server) -> None:
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, {"in.txt": b"input"}, access="ReadWriteMany")
    with fsspec.open("millpond://ds/out/result.txt", "wb") as f:
        f.write(b"written through")
    assert ds.object("out/result.txt") == b"written through"
    assert read("ds", "out/result.txt") == b"written through"
    assert cli("dataset", "clean", "ds").code == 0  # cleaning the cache loses nothing
    assert read("ds", "out/result.txt") == b"written through"
    fsspec.filesystem("millpond").rm_file("ds/out/result.txt")
    assert not s3_server.filesystem().exists(f"{ds.bucket}/{ds.prefix}/out/result.txt")


def test_readonly_dataset_refuses_writes_and_escaping_paths(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, {"in.txt": b"input"})
    with pytest.raises(PermissionError):
        with fsspec.open("millpond://ds/out.txt", "wb") as f:
            f.write(b"x")
    with pytest.raises(PermissionError):
        read("ds", "../../etc/passwd")
    result = cli("dataset", "load", "ds", "../outside")
    assert result.code == 2
    assert result.err.count("\n") == 1 and "escapes the dataset root" in result.err


def test_bad_input_to_dataset_commands_is_one_line(cli, home, tmp_path, s3_server) -> None:
    missing = cli("dataset", "load", "nosuch")
    assert missing.code == 2
    assert missing.err.strip() == "error: dataset 'nosuch' not found (millpond apply -f DATASET.yaml first)"
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, {"in.txt": b"input"})
    assert cli("dataset", "load", "ds", "no/such/file").code == 2
    # An endpoint nobody listens on: the dataset is Failed, the condition says why, load is one line.
    text = (tmp_path / "ds.yaml").read_text().replace(s3_server.endpoint_url, "http://127.0.0.1:9")
    (tmp_path / "bad.yaml").write_text(text.replace("name: ds", "name: unreachable"))
    assert cli("apply", "-f", tmp_path / "bad.yaml").code == 0
    status = cli("get", "dataset", "unreachable", "-o", "json").json()["status"]
    assert status["phase"] == "Failed"
    assert "127.0.0.1:9" in status["conditions"][0]["message"]
    load = cli("dataset", "load", "unreachable")
    # An unreachable store is an outside failure, not bad input: exit 1 (errors.UnavailableError), one line.
    assert load.code == 1 and load.err.count("\n") == 1 and load.err.startswith("error: load unreachable: ")
    assert ds.server.secret_key not in load.err + json.dumps(status)


def test_local_and_pvc_mounts(cli, home, tmp_path) -> None:
    from tests.datasets_support import manifest

    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "x.txt").write_text("local data")
    volume = home / "volumes" / "shared"
    volume.mkdir(parents=True)
    (volume / "y.txt").write_text("volume data")
    levels = [{"mediumtype": "SSD", "path": str(tmp_path / "c"), "quota": "1Gi"}]
    (tmp_path / "m.yaml").write_text(
        manifest("loc", f"local://{source}", secret=False, levels=levels) + "---\n"
        + manifest("vol", "pvc://shared", secret=False, levels=levels, path="/data")
    )
    assert cli("apply", "-f", tmp_path / "m.yaml").code == 0
    assert read("loc", "sub/x.txt") == b"local data"
    assert read("vol", "data/y.txt") == b"volume data"


def test_deleting_a_dataset_removes_its_cache(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, SMALL)
    assert cli("dataset", "load", "ds").code == 0
    assert cache_files(tmp_path / "cache-ssd")
    assert cli("delete", "dataset", "ds").code == 0
    assert not cache_files(tmp_path / "cache-ssd")
    assert not list((home / "datasets" / "default").glob("ds-*"))


def test_web_ufs_lists_and_reads_over_http(cli, home, tmp_path) -> None:
    import functools
    import http.server

    from tests.datasets_support import manifest

    site = tmp_path / "site"
    (site / "releases").mkdir(parents=True)
    (site / "releases" / "tool-1.0.tar.gz").write_bytes(payload("tool", 70_000))
    (site / "README.txt").write_text("hello")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        levels = [{"mediumtype": "SSD", "path": str(tmp_path / "c"), "quota": "1Gi"}]
        (tmp_path / "web.yaml").write_text(manifest("web", url, secret=False, levels=levels, path="/mirror"))
        assert cli("apply", "-f", tmp_path / "web.yaml").code == 0
        assert read("web", "mirror/releases/tool-1.0.tar.gz") == payload("tool", 70_000)
        assert read("web", "mirror/README.txt") == b"hello"
        status = cli("get", "dataset", "web", "-o", "json").json()["status"]
        assert status["phase"] == "Bound" and status["fileNum"] == "2"
    finally:
        server.shutdown()


def test_juicefs_mount_point_keeps_files_in_the_bucket_its_options_name(cli, home, tmp_path, s3_server) -> None:
    from millpond.store.secrets import ConfigStore

    bucket = s3_server.create_bucket()
    s3_server.filesystem().pipe_file(f"{bucket}/jfs/demo/MNIST/raw/a.gz", b"compressed")
    ConfigStore(home).create("secret", "jfs-secret", {
        "access-key": s3_server.access_key, "secret-key": s3_server.secret_key, "metaurl": "redis://unused:6379/1"})
    (tmp_path / "jfs.yaml").write_text(f"""\
apiVersion: data.fluid.io/v1alpha1
kind: Dataset
metadata: {{name: mydataset}}
spec:
  accessModes: [ReadWriteMany]
  mounts:
    - name: minio
      mountPoint: juicefs:///demo
      options: {{bucket: "{s3_server.endpoint_url}/{bucket}/jfs", storage: minio}}
      encryptOptions:
        - {{name: access-key, valueFrom: {{secretKeyRef: {{name: jfs-secret, key: access-key}}}}}}
        - {{name: secret-key, valueFrom: {{secretKeyRef: {{name: jfs-secret, key: secret-key}}}}}}
        - {{name: metaurl, valueFrom: {{secretKeyRef: {{name: jfs-secret, key: metaurl}}}}}}
---
apiVersion: data.fluid.io/v1alpha1
kind: JuiceFSRuntime
metadata: {{name: mydataset}}
spec:
  replicas: 1
  tieredstore: {{levels: [{{mediumtype: SSD, path: "{tmp_path / 'jfs-cache'}", quota: 1Gi, low: "0.1"}}]}}
""")
    result = cli("apply", "-f", tmp_path / "jfs.yaml")
    assert result.code == 0, result.err
    assert read("mydataset", "MNIST/raw/a.gz") == b"compressed"  # the mount's folder is the dataset's root
    with fsspec.open("millpond://mydataset/ckpt/model.pt", "wb") as f:
        f.write(b"weights")
    assert s3_server.filesystem().cat_file(f"{bucket}/jfs/demo/ckpt/model.pt") == b"weights"
