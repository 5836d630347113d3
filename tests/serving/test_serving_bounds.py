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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


# --- properties: every number a user gives serving, driven to extremes --------------------------------------------
EXTREME_INTS = st.one_of(st.sampled_from([-(2**63), -1, 0, 1, 2, 100, 101, 600, 601, 1000, 1001, 65535, 65536,
                                          10**5, 2**31, 2**63 - 1, 2**63]), st.integers(-10**6, 10**6))
QUANTITIES = st.sampled_from(["0", "1", "100m", "1e3", "100000", "1Ei", "9223372036854775807", "1e30", "-1", "0.5",
                              "64Mi", "100Ti", "1Gi", "abc", ""])


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(numbers=st.fixed_dictionaries({}, optional={
    key: EXTREME_INTS for key in ("minReplicas", "maxReplicas", "canaryTrafficPercent", "containerConcurrency",
                                  "timeout", "scaleTarget")}),
       port=st.one_of(st.none(), EXTREME_INTS), cpu=st.one_of(st.none(), QUANTITIES),
       memory=st.one_of(st.none(), QUANTITIES), gpus=st.one_of(st.none(), QUANTITIES),
       batch=st.one_of(st.none(), EXTREME_INTS))
def test_extreme_numbers_in_a_manifest_are_refused_in_one_line_or_bounded(
        home: Path, numbers: dict[str, int], port: int | None, cpu: str | None, memory: str | None,
        gpus: str | None, batch: int | None) -> None:
    from millpond.errors import UserError
    from millpond.serving import capacity
    from millpond.serving.deploy import check

    container: dict[str, Any] = {"name": "kserve-container", "command": ["serve"]}
    if port is not None:
        container["ports"] = [{"containerPort": port}]
    requests = {key: value for key, value in (("cpu", cpu), ("memory", memory), ("nvidia.com/gpu", gpus))
                if value is not None}
    if requests:
        container["resources"] = {"requests": requests}
    predictor: dict[str, Any] = {**numbers, "containers": [container]}
    if batch is not None:
        predictor["batcher"] = {"maxBatchSize": batch}
    body = {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": "extreme"},
            "spec": {"predictor": predictor}}
    try:
        spec = check(body, "extreme.yaml").predictor
        capacity.resource_refusal(spec)  # what arena serve adds: never a traceback either
    except UserError as exc:
        assert str(exc).startswith("extreme.yaml: ") and "\n" not in str(exc)
        return
    assert spec is not None
    assert 1 <= spec.replicas <= capacity.most_replicas(spec) and spec.max_replicas <= capacity.most_replicas(spec)
    assert 1 <= spec.container.port <= 65535
    assert spec.canary_traffic_percent is None or 0 <= spec.canary_traffic_percent <= 100
    assert 0 <= predictor.get("containerConcurrency", 0) <= 1000 and 0 <= predictor.get("timeout", 0) <= 600
    assert predictor.get("scaleTarget", 1) >= 1 and (batch is None or batch >= 0)


ARENA_NUMBERS = {"--min-replicas": "1", "--max-replicas": "0", "--canary-traffic-percent": "-1", "--timeout": "0",
                 "--container-concurrency": "0", "--scale-target": "0", "--port": "0", "--cpu": "100m",
                 "--memory": "64Mi", "--gpus": "0"}


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extremes=st.dictionaries(st.sampled_from(sorted(ARENA_NUMBERS)),
                                st.one_of(EXTREME_INTS.map(str), QUANTITIES), min_size=1, max_size=2))
def test_extreme_arena_serve_flags_are_refused_in_one_line_before_anything_is_stored(
        home: Path, capsys, extremes: dict[str, str]) -> None:
    """The real ``arena serve kserve`` with an unservable format (nothing is ever started), one or two of its
    numbers at an extreme: exit 0 stores a manifest within bounds; anything else is one ``error:`` line, exit 2,
    and nothing stored."""
    flags = [part for flag, value in {**ARENA_NUMBERS, **extremes}.items() for part in (flag, value)]
    ResourceStore().delete("InferenceService", "extreme")  # an earlier example's, whatever became of it
    code, err = arena(capsys, "serve", "kserve", "--name", "extreme", "--model-format", "xgboost", "--storage-uri",
                      "s3://b/m", *flags)
    store = ResourceStore()
    stored = store.get("InferenceService", "extreme")
    if code != 0:
        assert code == 2 and one_error_line(err) and stored is None
        return
    assert stored is not None, err
    predictor = stored.spec["predictor"]
    assert 0 <= predictor.get("timeout", 0) <= 600 and 0 <= predictor.get("containerConcurrency", 0) <= 1000
    assert 0 <= predictor.get("canaryTrafficPercent", 0) <= 100 and predictor.get("scaleTarget", 1) >= 1
    assert 1 <= predictor.get("minReplicas", 1) <= 10**4 and predictor.get("maxReplicas", 0) <= 10**4
    store.delete("InferenceService", "extreme")


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.one_of(st.sampled_from(["", "0", "1", "90%", "100%", "0%", "101%", "-5%", "1e30", "nan%", "1Ki",
                                         "abc", "9223372036854775807", "1e400"]), st.text(max_size=6)),
       ratio=st.one_of(st.sampled_from(["", "0", "1", "100", "1000000", "1000001", "-1", "1.5", "²"]),
                       st.text(max_size=4)),
       sizes=st.lists(st.tuples(st.integers(0, 64 * 2**10), st.booleans()), min_size=1, max_size=4))
def test_unpack_settings_and_archives_at_extremes_refuse_or_stay_within_the_budget(
        home: Path, tmp_path_factory, monkeypatch, budget: str, ratio: str, sizes: list[tuple[int, bool]]) -> None:
    from millpond.errors import UserError
    from millpond.serving import archives
    from millpond.settings import load_settings

    if "\x00" in budget or "\x00" in ratio:
        return  # an environment variable cannot hold NUL
    monkeypatch.setenv("MILLPOND_UNPACK_BUDGET", budget)
    monkeypatch.setenv("MILLPOND_UNPACK_MAX_RATIO", ratio)
    try:
        settings = load_settings()
    except UserError as exc:
        assert "MILLPOND_UNPACK_" in str(exc) and "\n" not in str(exc)
        return
    assert 0 < settings.unpack_free_share <= 1 and 1 <= settings.unpack_max_ratio <= 10**6
    assert settings.unpack_max_bytes is None or settings.unpack_max_bytes >= 0
    base = tmp_path_factory.mktemp("archive")
    archive = base / "model.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for index, (size, zeros) in enumerate(sizes):
            zipped.writestr(f"f{index}", bytes(size) if zeros else os.urandom(size))
    into = base / "into"
    into.mkdir()
    limits = archives.limits_for(into, settings)
    limits = archives.UnpackLimits(min(limits.max_bytes, 128 * 2**10), limits.max_ratio, 3, limits.budget)
    try:
        archives.unpack_zip(archive, into, limits)
    except archives.ArchiveRefused as exc:
        assert "\n" not in str(exc)
    written = sum(path.stat().st_size for path in into.rglob("*") if path.is_file())
    assert written <= limits.max_bytes
