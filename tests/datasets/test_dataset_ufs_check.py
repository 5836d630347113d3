"""A Dataset's status tells the truth about its UFS, against real SeaweedFS: a bucket that does
not exist is ``Failed`` with the store's answer, ``Bound`` once it is created, ``Failed`` again
once it is deleted; an endpoint that never answers costs one bounded wait, then the cached answer."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from millpond.datasets import ufs_check
from millpond.store.secrets import ConfigStore
from tests.datasets_support import SECRET, manifest, s3_options


def _apply(cli, home: Path, tmp_path: Path, s3_server, name: str, mount: str, options: dict[str, str]) -> None:
    ConfigStore(home).create(
        "secret", SECRET, {"aws.accessKeyId": s3_server.access_key, "aws.secretKey": s3_server.secret_key}, replace=True
    )
    levels = [{"mediumtype": "SSD", "path": str(tmp_path / f"cache-{name}"), "quota": "64Mi"}]
    (tmp_path / f"{name}.yaml").write_text(manifest(name, mount, options=options, levels=levels))
    assert cli("apply", "-f", tmp_path / f"{name}.yaml").code == 0


def _status(cli, name: str) -> dict:
    result = cli("get", "dataset", name, "-o", "json")
    assert result.code == 0, result.err
    return result.json()["status"]


def test_a_missing_bucket_fails_with_the_reason_until_it_exists(cli, home, tmp_path, s3_server, monkeypatch) -> None:
    monkeypatch.setattr(ufs_check, "CHECK_TTL_S", 1.0)
    bucket = f"later-{time.time_ns() % 10**9}"
    _apply(cli, home, tmp_path, s3_server, "nob", f"s3://{bucket}/data", s3_options(s3_server))
    status = _status(cli, "nob")
    assert status["phase"] == "Failed"
    [condition] = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("NotReady", "True", "BucketNotFound")
    assert "NoSuchBucket" in condition["message"] and bucket in condition["message"]
    assert s3_server.secret_key not in str(status)
    assert "Failed" in cli("get", "dataset").out

    fs = s3_server.filesystem()
    s3_server.create_bucket(bucket)
    fs.pipe_file(f"{bucket}/data/a.bin", b"x" * 1000)
    time.sleep(1.1)  # the failed answer stood for CHECK_TTL_S; the next read asks again
    status = _status(cli, "nob")
    assert status["phase"] == "Bound" and status["fileNum"] == "1", status
    assert status["conditions"][0]["reason"] == "DatasetReady"

    fs.rm(bucket, recursive=True)  # deleted after it was listed: no longer Bound on stale numbers
    time.sleep(1.1)
    status = _status(cli, "nob")
    assert status["phase"] == "Failed" and status["conditions"][0]["reason"] == "BucketNotFound", status
    assert "ufsTotal" not in status


def test_refused_keys_and_a_silent_endpoint_are_failed_without_hanging_get(cli, home, tmp_path, s3_server) -> None:
    bucket = s3_server.create_bucket()
    options = {**s3_options(s3_server)}
    _apply(cli, home, tmp_path, s3_server, "keys", f"s3://{bucket}/data", options)
    ConfigStore(home).create("secret", SECRET, {"aws.accessKeyId": "nobody", "aws.secretKey": "wrong"}, replace=True)
    (tmp_path / "keys.yaml").write_text((tmp_path / "keys.yaml").read_text().replace("name: keys", "name: refused"))
    assert cli("apply", "-f", tmp_path / "keys.yaml").code == 0
    status = _status(cli, "refused")
    assert status["phase"] == "Failed" and status["conditions"][0]["reason"] == "AccessDenied", status

    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        _apply(cli, home, tmp_path, s3_server, "silent", f"s3://{bucket}/data",
               {**options, "alluxio.underfs.s3.endpoint": endpoint})
        started = time.monotonic()
        status = _status(cli, "silent")
        first = time.monotonic() - started
        assert first < ufs_check.TIMEOUT_S + 3, first
        assert status["phase"] == "Failed" and status["conditions"][0]["reason"] == "UFSUnreachable"
        assert "no answer in" in status["conditions"][0]["message"]
        started = time.monotonic()
        assert _status(cli, "silent")["phase"] == "Failed"
        assert time.monotonic() - started < 1.5  # the cached answer: no second wait
