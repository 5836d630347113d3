"""Serving's numbers and sizes bounded before anything starts: model archives, replicas, and every flag's extremes.

- A zip bomb and a tar.gz bomb served by a real local HTTP server are refused by the supervisor's fetch with
  KServe's ``ModelLoadFailed`` and one line naming the limit, and leave no half-unpacked model behind; the
  home's budget (``MILLPOND_UNPACK_BUDGET``, kept low so the tests write little) bounds what a fetch writes.
- ``minReplicas``/``maxReplicas`` (a manifest, ``arena serve --replicas``) that this machine can never hold are
  one ``error:`` line, exit 2, nothing stored.
- A hypothesis property drives replicas, canary percent, timeouts, ports, resources and the unpack settings to
  extremes: each is refused at the builder or the check (one line, nothing stored), or accepted by both.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import joblib
import pytest
import yaml

from millpond.errors import UnavailableError
from millpond.serving import lifecycle
from millpond.store.resources import ResourceStore

pytest.importorskip("sklearn")
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

API = "serving.kserve.io/v1beta1"
ZEROS = 300 * 2**20  # what a bomb unpacks to: 300 MiB of zeros in ~0.3 MiB


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    features, labels = load_digits(return_X_y=True)
    buffer = io.BytesIO()
    joblib.dump(LogisticRegression(max_iter=200).fit(features[:300], labels[:300]), buffer)
    return buffer.getvalue()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A real HTTP server over a folder: (the folder, its base URL)."""
    folder = tmp_path / "site"
    folder.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def zeros_in_chunks(out: Any, size: int) -> None:
    chunk = bytes(2**20)
    for _ in range(size // len(chunk)):
        out.write(chunk)


def zip_bomb(path: Path, model: bytes) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("model.joblib", model)
        with zipped.open("zeros.bin", "w", force_zip64=True) as out:
            zeros_in_chunks(out, ZEROS)


def tar_bomb(path: Path, model: bytes) -> None:
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("model.joblib")
        info.size = len(model)
        tar.addfile(info, io.BytesIO(model))

        class Zeros:
            left = ZEROS

            def read(self, size: int = -1) -> bytes:
                count = min(size if size >= 0 else self.left, self.left)
                self.left -= count
                return bytes(count)

        info = tarfile.TarInfo("zeros.bin")
        info.size = ZEROS
        tar.addfile(info, Zeros())  # type: ignore[arg-type]


def apply(cli: Any, tmp_path: Path, name: str, predictor: dict[str, Any]) -> Any:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name},
                                    "spec": {"predictor": predictor}}))
    return cli("apply", "-f", path)


def no_model_left(home: Path, name: str) -> bool:
    models = home / "serving" / "default" / name / "models"
    return not models.exists() or not any(models.iterdir())


@pytest.mark.parametrize("archive", ["bomb.zip", "bomb.tar.gz"])
def test_an_archive_bomb_is_ModelLoadFailed_naming_the_ratio_and_leaves_nothing(
        cli, home: Path, tmp_path: Path, site, model_bytes: bytes, archive: str) -> None:
    folder, base = site
    (zip_bomb if archive.endswith(".zip") else tar_bomb)(folder / archive, model_bytes)
    assert (folder / archive).stat().st_size < 2**20  # about 1000:1
    name = archive.split(".")[0] + archive.split(".")[-1]
    assert apply(cli, tmp_path, name, {"sklearn": {"storageUri": f"{base}/{archive}"}}).code == 0
    with pytest.raises(UnavailableError) as caught:
        lifecycle.wait_ready(ResourceStore(), name, timeout_s=60)
    message = str(caught.value)
    assert "ModelLoadFailed" in message and f"storageUri {base}/{archive}: " in message and "\n" not in message
    assert "100:1 compression ratio a model archive may have (MILLPOND_UNPACK_MAX_RATIO)" in message
    assert no_model_left(home, name)  # the partial folder went with the failure
    assert lifecycle.stop(name)


def test_the_homes_budget_bounds_a_download_and_what_it_unpacks_to(cli, home: Path, tmp_path: Path, site,
                                                                    model_bytes: bytes, monkeypatch) -> None:
    folder, base = site
    monkeypatch.setenv("MILLPOND_UNPACK_BUDGET", "4Mi")  # the supervisor inherits it
    noise = os.urandom(2 * 2**20)  # incompressible: 2 MiB compressed, 5 MiB unpacked (2.5:1, a fair ratio)
    with zipfile.ZipFile(folder / "big.zip", "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("model.joblib", model_bytes)
        zipped.writestr("noise.bin", noise)
        zipped.writestr("zeros.bin", bytes(3 * 2**20))
    (folder / "huge.joblib").write_bytes(os.urandom(5 * 2**20))
    assert apply(cli, tmp_path, "big", {"sklearn": {"storageUri": f"{base}/big.zip"}}).code == 0
    assert apply(cli, tmp_path, "huge", {"sklearn": {"storageUri": f"{base}/huge.joblib"}}).code == 0
    with pytest.raises(UnavailableError, match=r"big.zip unpacks to 5\.\d MiB, more than the \d\.\d MiB a model may "
                                               r"take here \(MILLPOND_UNPACK_BUDGET=4\.0 MiB, less the 2\.\d MiB"):
        lifecycle.wait_ready(ResourceStore(), "big", timeout_s=60)
    with pytest.raises(UnavailableError, match=r"huge.joblib is 5\.0 MiB, more than the 4\.0 MiB a model may take"):
        lifecycle.wait_ready(ResourceStore(), "huge", timeout_s=60)
    assert no_model_left(home, "big") and no_model_left(home, "huge")
    assert lifecycle.stop("big") and lifecycle.stop("huge")


def test_a_member_count_and_a_ballooning_tar_header_are_refused(tmp_path: Path) -> None:
    from millpond.serving import archives
    from millpond.serving.archives import ArchiveRefused, UnpackLimits

    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as zipped:
        for index in range(21):
            zipped.writestr(f"f{index}", b"x")
    into = tmp_path / "into"
    into.mkdir()
    limits = UnpackLimits(max_bytes=2**30, max_ratio=100, max_members=20, budget="test")
    with pytest.raises(ArchiveRefused, match="many.zip holds more than 20 members"):
        archives.unpack_zip(many, into, limits)
    # a GNU long-name header of 20 MiB: read into memory by tarfile itself, so counted while it streams
    long = tmp_path / "long.tar.gz"
    with tarfile.open(long, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("a" * (20 * 2**20))
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ArchiveRefused, match="long.tar.gz decompresses to more than .* compression ratio"):
        archives.unpack_tar(long, into, limits)
    assert list(into.iterdir()) == []


@pytest.mark.parametrize(("value", "says"), [
    ("abc", "MILLPOND_UNPACK_BUDGET='abc'"), ("0%", "more than 0%"), ("150%", "at most 100%"),
    ("-1Gi", "MILLPOND_UNPACK_BUDGET"),
])
def test_a_bad_unpack_budget_is_one_line(cli, home: Path, monkeypatch, value: str, says: str) -> None:
    monkeypatch.setenv("MILLPOND_UNPACK_BUDGET", value)
    result = cli("get", "isvc")
    assert result.code == 2 and says in result.err and len(result.err.strip().splitlines()) == 1


# --- replicas this machine can never hold -------------------------------------------------------------------------
def arena(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from millpond.cli.arena import main

    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("info: ")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("field", ["minReplicas", "maxReplicas"])
def test_replicas_this_machine_can_never_hold_are_refused_at_apply(cli, home: Path, tmp_path: Path,
                                                                   field: str) -> None:
    predictor = {field: 100000, "sklearn": {"storageUri": f"file://{tmp_path}"}}
    result = apply(cli, tmp_path, "many", predictor)
    assert result.code == 2
    line = one_error_line(result.err)
    assert f"InferenceService many: spec.predictor.{field}: 100000 replicas can never run on this machine" in line
    assert "room for" in line
    assert ResourceStore().get("InferenceService", "many") is None and not lifecycle.supervisors("many")


@pytest.mark.parametrize(("flags", "says"), [
    (("--replicas", "100000"), "spec.predictor.minReplicas: 100000 replicas can never run on this machine"),
    (("--max-replicas", "100000"), "spec.predictor.maxReplicas: 100000 replicas"),
    (("--cpu", "100000"), "spec.predictor: 1 replica can never run on this machine: requests 100000 CPUs"),
    (("--replicas", "3", "--memory", "100Ti"), "3 replicas can never run on this machine"),
])
def test_arena_serve_refuses_replicas_that_can_never_run(home: Path, tmp_path: Path, capsys, flags: tuple[str, ...],
                                                         says: str) -> None:
    model = ("kserve", "--model-format", "sklearn", "--storage-uri") if "--max-replicas" in flags else (
        "sklearn", "--model-uri")
    code, err = arena(capsys, "serve", *model, str(tmp_path), "--name", "many", *flags)
    assert code == 2 and says in one_error_line(err)
    assert ResourceStore().get("InferenceService", "many") is None and not lifecycle.supervisors("many")


def test_a_stored_object_with_too_many_replicas_starts_none_and_says_why(cli, home: Path, tmp_path: Path) -> None:
    """An object stored before apply checked replicas (written to the store directly): its supervisor starts no
    replica and its status says why."""
    body = {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": "stored", "namespace": "default"},
            "spec": {"predictor": {"minReplicas": 100000, "containers": [
                {"name": "kserve-container", "command": ["sleep", "60"]}]}}}
    store = ResourceStore()
    store.apply([body])
    lifecycle.start(store, "stored")
    with pytest.raises(UnavailableError, match="InvalidPredictorSpec: spec.predictor.minReplicas: 100000 replicas "
                                               "can never run on this machine"):
        lifecycle.wait_ready(store, "stored", timeout_s=30)
    [supervisor] = lifecycle.supervisors("stored")
    children = Path(f"/proc/{supervisor.pid}/task/{supervisor.pid}/children").read_text().split()
    assert children == []  # not one replica started
    assert lifecycle.stop("stored")
