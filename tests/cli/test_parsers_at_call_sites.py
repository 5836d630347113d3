"""Every field that holds a quantity or a duration reads it with the one parser for its notation.

Before, four parsers disagreed: a dataset quota took ``2GiB`` and ``1e3`` but not ``500m``, a task's
resources the reverse; a retry backoff of ``1m30s`` (or ``1.s``) waited 0 s, silently; a quota of
``999999999999Ei`` was applied, through floats, as a ``999999999999.00EiB`` cache; the runtime property
``alluxio.user.file.metadata.sync.interval: 60000`` (Alluxio: a minute) meant 60000 s. Each case
here goes through the real call site: ``millpond run``/``apply`` as users run them, the REST API, a
dataset over the session's SeaweedFS.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.datasets.config import load_config, tiers_of
from millpond.durations import DurationError
from millpond.pipelines.resources import ResourceRequest, task_request
from millpond.pipelines.retries import RetryPolicy
from millpond.quantities import QuantityError
from millpond.settings import load_settings
from millpond.store.secrets import ConfigStore
from tests.conftest import task
from tests.datasets_support import SECRET, manifest, s3_options
from tests.ir_support import assert_refused, clone, compiled, list_runs, millpond, post_run, shapes, write_ir
from tests.pipelines import control_flow
from tests.server_support import Served, module_home, serving

# --- KFP IR: retryPolicy durations are protobuf JSON Durations -----------------------------------------


@pytest.fixture(scope="module")
def retrying_ir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return compiled(control_flow.retrying, tmp_path_factory.mktemp("ir"))


@pytest.fixture(scope="module")
def shapes_ir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return compiled(shapes, tmp_path_factory.mktemp("ir"))


def _with_retry(spec: dict[str, Any], **policy: str) -> dict[str, Any]:
    spec = clone(spec)
    spec["root"]["dag"]["tasks"]["flaky"]["retryPolicy"].update(policy)
    return spec


@pytest.mark.parametrize(
    ("field", "value"),
    [("backoffDuration", "1m30s"), ("backoffDuration", " 1s"), ("backoffDuration", "1_0s"),
     ("backoffDuration", "90"), ("backoffMaxDuration", "1h")],
)
def test_a_retry_duration_in_another_notation_is_refused_at_submission(
    field: str, value: str, retrying_ir: dict[str, Any], tmp_path: Path
) -> None:
    """Before: '1m30s' was refused with protobuf's line about int(); ' 1s' and '1_0s' ran (protobuf's Python
    parser takes them, the KFP backend's Go one does not)."""
    home = tmp_path / "home"
    package = write_ir(_with_retry(retrying_ir, **{field: value}), tmp_path / "pipeline.yaml")
    assert_refused(
        home, millpond(home, "run", package, "-p", f"counter={tmp_path / 'count'}"),
        f"root.dag.tasks[flaky].retryPolicy.{field} {value!r} is not a protobuf Duration", "such as 90s",
    )


@pytest.mark.parametrize(
    ("policy", "backoff_s", "max_s"),
    [({"backoffDuration": "90s"}, 90.0, 3600.0), ({"backoffDuration": "3.5s"}, 3.5, 3600.0),
     ({"backoffDuration": "1.s"}, 1.0, 3600.0), ({"backoffDuration": "+2s"}, 2.0, 3600.0),
     ({"backoffDuration": ".5s"}, 0.5, 3600.0), ({"backoffDuration": "3.500s", "backoffMaxDuration": "60s"}, 3.5, 60.0),
     ({}, 0.0, 3600.0)],
)
def test_retry_policy_reads_protobuf_json_durations(policy: dict[str, str], backoff_s: float, max_s: float) -> None:
    """Before: '1.s', '+2s' and '.5s' (valid protobuf JSON) were read as 0 s."""
    read = RetryPolicy.from_spec({"maxRetryCount": 2, **policy})
    assert (read.backoff_s, read.max_duration_s) == (backoff_s, max_s)


@pytest.mark.parametrize("value", ["1m30s", "2m", "1h", "90", "1.5"])
def test_retry_policy_refuses_what_is_not_protobuf_json(value: str) -> None:
    """Before: each of these silently became 0 s (or the 3600 s default)."""
    with pytest.raises(DurationError, match=f"retryPolicy.backoffDuration {value!r} is not a protobuf Duration"):
        RetryPolicy.from_spec({"maxRetryCount": 2, "backoffDuration": value})


def test_a_valid_backoff_the_old_parser_misread_is_waited(retrying_ir: dict[str, Any], tmp_path: Path) -> None:
    """'1.s' is one second in protobuf JSON (and passes protobuf's own check); the old parser waited 0 s."""
    home = tmp_path / "home"
    package = write_ir(_with_retry(retrying_ir, backoffDuration="1.s"), tmp_path / "pipeline.yaml")
    result = millpond(home, "run", package, "-p", f"counter={tmp_path / 'count'}", "-o", "json")
    assert result.returncode == 0, result.stderr
    log = Path(task(json.loads(result.stdout), "flaky")["log"]).read_text()
    assert log.count("retrying in 1s") == 2, log  # backoffFactor 1: one second before each retry


@pytest.fixture(scope="module")
def api_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "parsers-api")


@pytest.fixture(scope="module")
def server(api_home: Path) -> Iterator[Served]:
    yield from serving()


def test_the_api_refuses_a_retry_duration_in_another_notation(retrying_ir: dict[str, Any], server: Served) -> None:
    status, body = post_run(server.url, _with_retry(retrying_ir, backoffDuration="1m30s"))
    assert status == 400, body
    assert "retryPolicy.backoffDuration '1m30s' is not a protobuf Duration" in body["message"]
    assert list_runs(server.url) == []


# --- KFP IR: resources are Kubernetes quantities ----------------------------------------------------


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"resourceCpuLimit": "500m"}, ResourceRequest(cpu=0.5)),
        ({"resourceCpuRequest": "0.1m"}, ResourceRequest(cpu=0.001)),  # whole millicores, rounded up
        ({"resourceCpuRequest": "1e3"}, ResourceRequest(cpu=1000.0)),  # refused before
        ({"resourceMemoryRequest": "1e9"}, ResourceRequest(memory=1e9)),  # refused before
        ({"resourceMemoryRequest": "1.5Gi"}, ResourceRequest(memory=1.5 * 2**30)),
        ({"resourceMemoryRequest": "500m"}, ResourceRequest(memory=1.0)),  # bytes round up (was 0.5)
        ({"resourceMemoryLimit": "+2Gi"}, ResourceRequest(memory=2.0 * 2**30)),
        ({"accelerator": {"resourceType": "nvidia.com/gpu", "resourceCount": "2"}},
         ResourceRequest(accelerator="nvidia.com/gpu", accelerators=2)),
    ],
    ids=["cpu-500m", "cpu-0.1m", "cpu-1e3", "memory-1e9", "memory-1.5Gi", "memory-500m", "memory-+2Gi", "gpus-2"],
)
def test_task_resources_are_read_as_kubernetes_reads_them(
    resources: dict[str, Any], expected: ResourceRequest
) -> None:
    assert task_request({"resources": resources}) == expected


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"resourceMemoryRequest": "2GiB"}, "resourceMemoryRequest '2GiB' is not a Kubernetes quantity"),
        ({"resourceMemoryRequest": "4K"}, "resourceMemoryRequest '4K' has an unknown suffix 'K'"),  # was 4000
        ({"resourceMemoryLimit": "1KB"}, "resourceMemoryLimit '1KB' is not a Kubernetes quantity"),
        ({"resourceMemoryRequest": "-1Gi"}, "resourceMemoryRequest '-1Gi' is negative"),
        ({"resourceCpuLimit": "-500m"}, "resourceCpuLimit '-500m' is negative"),
        ({"resourceCpuLimit": "999999999999Ei"}, "resourceCpuLimit '999999999999Ei' is too large"),
        ({"accelerator": {"resourceType": "nvidia.com/gpu", "resourceCount": "1.5"}},
         "accelerator resourceCount '1.5' is not a whole number"),  # was 1
    ],
    ids=["2GiB", "4K", "1KB", "negative-memory", "negative-cpu", "Ei-overflow", "half-a-gpu"],
)
def test_task_resources_that_kubernetes_refuses(resources: dict[str, Any], message: str) -> None:
    with pytest.raises(QuantityError, match=message.replace("(", r"\(")):
        task_request({"resources": resources})


def _with_resources(spec: dict[str, Any], **resources: str) -> dict[str, Any]:
    spec = clone(spec)
    spec["deploymentSpec"]["executors"]["exec-first"]["container"]["resources"] = resources
    return spec


def test_a_task_asking_for_memory_in_exponent_form_runs(shapes_ir: dict[str, Any], tmp_path: Path) -> None:
    """Before: '1e9' failed the task ("invalid resources: not a Kubernetes quantity")."""
    home = tmp_path / "home"
    spec = _with_resources(shapes_ir, resourceMemoryRequest="1e9", resourceCpuRequest="500m")
    result = millpond(home, "run", write_ir(spec, tmp_path / "pipeline.yaml"), "-o", "json")
    assert result.returncode == 0, result.stderr


def test_a_task_asking_for_memory_kubernetes_refuses_fails_naming_it(shapes_ir: dict[str, Any], tmp_path: Path) -> None:
    """Before: '4K' ran as 4000 bytes; Kubernetes (and so KFP) refuses the pod."""
    home = tmp_path / "home"
    result = millpond(home, "run", write_ir(_with_resources(shapes_ir, resourceMemoryRequest="4K"),
                                            tmp_path / "pipeline.yaml"), "-o", "json")
    assert result.returncode == 1, result.stderr
    error = task(json.loads(result.stdout), "first")["error"]
    assert "invalid resources: resourceMemoryRequest '4K' has an unknown suffix 'K'" in error


# --- Fluid: tieredstore quotas are Kubernetes quantities; metadata TTLs in their notations -------------


def _runtime(quota: str = '"2Gi"', extra: str = "") -> str:
    """A Dataset and its AlluxioRuntime in one file, as Fluid's samples write them."""
    return (
        "apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata:\n  name: big\nspec:\n  mounts:\n"
        "    - mountPoint: local:///tmp\n      name: m\n---\n"
        "apiVersion: data.fluid.io/v1alpha1\nkind: AlluxioRuntime\nmetadata:\n  name: big\nspec:\n"
        f"  tieredstore:\n    levels:\n      - mediumtype: SSD\n        path: /tmp/millpond-parsers-never\n"
        f"        quota: {quota}\n{extra}"
    )


@pytest.mark.parametrize(
    "document",
    [_runtime('"999999999999Ei"'), _runtime('"1e30"'), _runtime('"9Ei"'),
     _runtime('"1Gi"', '        quotaList: "999999999999Ei,1Gi"\n').replace("path: /tmp/millpond-parsers-never",
                                                                           "path: /tmp/a,/tmp/b")],
    ids=["999999999999Ei", "1e30", "9Ei", "quotaList"],
)
def test_a_quota_beyond_int64_is_one_error_line_and_nothing_stored(cli, tmp_path: Path, document: str) -> None:
    """Before: each was applied, through floats (status then showed a 999999999999.00EiB cache)."""
    path = tmp_path / "runtime.yaml"
    path.write_text(document)
    result = cli("apply", "-f", path)
    assert result.code == 2, (result.out, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {path}: AlluxioRuntime big: spec.tieredstore.levels[0]."), lines
    assert ("'999999999999Ei'" in lines[0]) == ("999999999999Ei" in document)
    assert "too large: Kubernetes quantities stop at 2^63-1" in lines[0] and "Traceback" not in result.err
    for kind in ("datasets", "alluxioruntimes"):
        listed = cli("get", kind, "-o", "json")
        assert listed.code == 0 and listed.json()["items"] == [], kind


def test_fluids_printed_size_is_not_a_quota(cli, tmp_path: Path) -> None:
    """Fluid prints 2.00GiB in status, but its CRD and its controller (resource.ParseQuantity) refuse 2GiB."""
    path = tmp_path / "runtime.yaml"
    path.write_text(_runtime('"2GiB"'))
    result = cli("apply", "-f", path)
    assert result.code == 2 and "spec.tieredstore.levels[0].quota" in result.err and "2GiB" in result.err


@pytest.mark.parametrize("quota", ["2GiB", "512MiB", "100B"])
def test_the_cache_config_refuses_a_size_that_is_not_a_quantity(quota: str) -> None:
    """Before: datasets/quantity.py read Fluid's printed forms back ('2GiB' as 2 GiB, '100B' as 100 bytes)."""
    runtime = {"spec": {"tieredstore": {"levels": [{"mediumtype": "SSD", "path": "/tmp/x", "quota": quota}]}}}
    with pytest.raises(QuantityError, match=f"quota {quota!r} is not a Kubernetes quantity"):
        tiers_of(runtime, "default/x", load_settings())


def _apply_s3_dataset(cli: Any, home: Path, tmp_path: Path, s3_server: Any, *, quota: str = "64Mi",
                      annotations: dict[str, str] | None = None, properties: dict[str, str] | None = None) -> Any:
    bucket = s3_server.create_bucket()
    s3_server.filesystem().pipe_file(f"{bucket}/data/a.txt", b"alpha")
    ConfigStore(home).create("secret", SECRET, {"aws.accessKeyId": s3_server.access_key,
                                                "aws.secretKey": s3_server.secret_key}, replace=True)
    text = manifest("ds", f"s3://{bucket}/data", options=s3_options(s3_server), annotations=annotations,
                    levels=[{"mediumtype": "SSD", "path": str(tmp_path / "cache"), "quota": quota}])
    if properties:
        lines = "".join(f'\n    {key}: "{value}"' for key, value in properties.items())
        text = text.replace("spec:\n  replicas: 1\n", f"spec:\n  replicas: 1\n  properties:{lines}\n")
    path = tmp_path / "ds.yaml"
    path.write_text(text)
    return cli("apply", "-f", path)


@pytest.mark.parametrize(("quota", "size"), [("500m", 1), ("+1Gi", 2**30), ("1.5e8", 150_000_000)])
def test_quotas_the_old_dataset_parser_refused(cli, home: Path, tmp_path: Path, s3_server: Any, quota: str,
                                               size: int) -> None:
    """Before: '500m' and '+1Gi' were "not a size" at apply; upstream reads them (500m: Value() rounds up to 1)."""
    applied = _apply_s3_dataset(cli, home, tmp_path, s3_server, quota=quota)
    assert applied.code == 0, applied.err
    assert load_config("ds").tiers[0].quota == size
    status = cli("get", "dataset", "ds", "-o", "json")
    assert status.code == 0 and status.json()["status"]["phase"] == "Bound", status.out


@pytest.mark.parametrize(
    ("annotations", "properties", "ttl_s"),
    [
        ({"data.millpond.io/metadata-ttl": "1m30s"}, None, 90.0),  # before: a ValueError when status was read
        ({"data.millpond.io/metadata-ttl": "-1s"}, None, float("inf")),
        (None, {"alluxio.user.file.metadata.sync.interval": "60000"}, 60.0),  # Alluxio's ms (before: 60000 s)
        (None, {"alluxio.user.file.metadata.sync.interval": "5min"}, 300.0),  # before: "not a duration"
        (None, {"alluxio.user.file.metadata.sync.interval": "-1"}, float("inf")),
        ({"data.millpond.io/metadata-ttl": "2s"}, {"alluxio.user.file.metadata.sync.interval": "-1"}, 2.0),
    ],
    ids=["annotation-1m30s", "annotation-negative", "property-60000ms", "property-5min", "property-never",
         "annotation-wins"],
)
def test_metadata_ttl_in_each_notation(cli, home: Path, tmp_path: Path, s3_server: Any, annotations: Any,
                                       properties: Any, ttl_s: float) -> None:
    applied = _apply_s3_dataset(cli, home, tmp_path, s3_server, annotations=annotations, properties=properties)
    assert applied.code == 0, applied.err
    assert load_config("ds").metadata_ttl_s == ttl_s
    status = cli("get", "dataset", "ds", "-o", "json")
    assert status.code == 0 and status.json()["status"]["phase"] == "Bound", status.err


@pytest.mark.parametrize(
    ("annotations", "properties", "fragment"),
    [
        ({"data.millpond.io/metadata-ttl": "30"}, None,
         "metadata.annotations[data.millpond.io/metadata-ttl]: '30' is not a Go duration"),
        ({"data.millpond.io/metadata-ttl": "5min"}, None,
         "metadata.annotations[data.millpond.io/metadata-ttl]: '5min' is not a Go duration"),
        (None, {"alluxio.user.file.metadata.sync.interval": "1m30s"},
         "spec.properties[alluxio.user.file.metadata.sync.interval]: '1m30s' is not an Alluxio duration"),
    ],
    ids=["annotation-bare-number", "annotation-alluxio-unit", "property-go-form"],
)
def test_a_metadata_ttl_in_the_wrong_notation_is_refused_at_apply(
    cli, home: Path, tmp_path: Path, s3_server: Any, annotations: Any, properties: Any, fragment: str
) -> None:
    """Before: stored, then the first status read raised ValueError (or the TTL silently meant seconds)."""
    applied = _apply_s3_dataset(cli, home, tmp_path, s3_server, annotations=annotations, properties=properties)
    assert applied.code == 2, applied.err
    lines = applied.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines
    assert cli("get", "datasets", "-o", "json").json()["items"] == []
