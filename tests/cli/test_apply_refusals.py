"""Refused at apply, what cannot work (issue 12, defect 6): one ``error:`` line naming file and field, exit 2.

Nothing is stored: each bad value sits in a file after a valid Dataset, so that also says the apply
is all or nothing. A document nested 100,000 deep is refused whichever way it comes: a YAML
or JSON file, stdin, a multi-document file, the server's Fluid API (YAML and JSON bodies) and
the Fluid SDK — with the field where it passes the limit, never a RecursionError.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from millpond.errors import UserError
from millpond.store.resources import ResourceStore
from tests.conftest import MILLPOND_BIN

# Local paths that do not exist: should a check ever let an operation through, it copies nothing.
DATASET = """\
apiVersion: data.fluid.io/v1alpha1
kind: Dataset
metadata: {name: good}
spec:
  mounts: [{mountPoint: "local:///absent", name: data}]
---
"""


def _doc(kind: str, name: str, spec: str) -> str:
    return f"apiVersion: data.fluid.io/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n{spec}"


# (case id, kind, document, the field path and problem the error line names)
CANNOT_WORK = [
    ("replicas-negative", "AlluxioRuntime", _doc("AlluxioRuntime", "rt", "  replicas: -1\n"),
     "AlluxioRuntime rt: spec.replicas: -1 is below the minimum 0"),
    ("juicefs-replicas-negative", "JuiceFSRuntime", _doc("JuiceFSRuntime", "jfs", "  replicas: -1\n"),
     "JuiceFSRuntime jfs: spec.replicas: -1 is below the minimum 0"),
    ("levels-empty", "AlluxioRuntime", _doc("AlluxioRuntime", "rt", "  tieredstore: {levels: []}\n"),
     "AlluxioRuntime rt: spec.tieredstore.levels: an empty array is too short (at least 1 item)"),
    ("quota-overflow", "AlluxioRuntime",
     _doc("AlluxioRuntime", "rt", "  tieredstore: {levels: [{mediumtype: SSD, quota: 1e400}]}\n"),
     "AlluxioRuntime rt: spec.tieredstore.levels[0].quota: '1e400' is too large"),
    ("ttl-negative-dataload", "DataLoad",
     _doc("DataLoad", "load", "  dataset: {name: good, namespace: default}\n  ttlSecondsAfterFinished: -1\n"),
     "DataLoad load: spec.ttlSecondsAfterFinished: -1 is below the minimum 0"),
    ("ttl-negative-datamigrate", "DataMigrate",
     _doc("DataMigrate", "mig", "  from: {dataset: {name: good, namespace: default}}\n"
                                "  to: {externalStorage: {uri: 'local:///absent/out'}}\n"
                                "  ttlSecondsAfterFinished: -1\n"),
     "DataMigrate mig: spec.ttlSecondsAfterFinished: -1 is below the minimum 0"),
    ("dataload-no-dataset", "DataLoad", _doc("DataLoad", "load", "  target: [{path: /}]\n"),
     "DataLoad load: spec.dataset: required field is missing"),
    ("dataload-empty-spec", "DataLoad", _doc("DataLoad", "load", "  {}\n"),
     "DataLoad load: spec.dataset: required field is missing"),
    ("dataload-empty-dataset-name", "DataLoad", _doc("DataLoad", "load", "  dataset: {name: ''}\n"),
     "DataLoad load: spec.dataset.name: invalid dataset name ''"),
    ("dataprocess-no-dataset", "DataProcess",
     _doc("DataProcess", "proc", "  processor: {script: {image: debian, source: 'true'}}\n"),
     "DataProcess proc: spec.dataset: required field is missing"),
    ("databackup-no-dataset", "DataBackup", _doc("DataBackup", "bak", "  backupPath: local:///absent/backup\n"),
     "DataBackup bak: spec.dataset: required field is missing"),
    ("databackup-empty-dataset", "DataBackup",
     _doc("DataBackup", "bak", "  dataset: ''\n  backupPath: local:///absent/backup\n"),
     'DataBackup bak: spec.dataset: "" is too short (at least 1 character)'),
    ("datamigrate-no-dataset-side", "DataMigrate",
     _doc("DataMigrate", "mig", "  from: {externalStorage: {uri: 'local:///absent/in'}}\n"
                                "  to: {externalStorage: {uri: 'local:///absent/out'}}\n"),
     "DataMigrate mig: spec: either spec.from.dataset or spec.to.dataset must be set"),
    ("datamigrate-empty-side", "DataMigrate",
     _doc("DataMigrate", "mig", "  from: {}\n  to: {dataset: {name: good, namespace: default}}\n"),
     "DataMigrate mig: spec.from: names neither a dataset nor an externalStorage"),
    ("datamigrate-side-with-both", "DataMigrate",
     _doc("DataMigrate", "mig", "  from: {dataset: {name: good, namespace: default},"
                                " externalStorage: {uri: 'local:///absent/in'}}\n"
                                "  to: {externalStorage: {uri: 'local:///absent/out'}}\n"),
     "DataMigrate mig: spec.from: names both a dataset and an externalStorage"),
]


def _refused_in_one_line(result: Any, fragment: str) -> str:
    lines = result.err.strip().splitlines()
    assert result.code == 2, (result.code, result.err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err[-2000:]
    assert fragment in lines[0], lines[0]
    assert result.out == ""
    return lines[0]


def _stored(cli: Any, kind: str) -> list[str]:
    """What ``millpond get KIND -o json`` lists."""
    result = cli("get", kind, "-o", "json")
    assert result.code == 0, result.err
    return [item["metadata"]["name"] for item in result.json()["items"]]


@pytest.mark.parametrize(("kind", "document", "fragment"), [case[1:] for case in CANNOT_WORK],
                         ids=[case[0] for case in CANNOT_WORK])
def test_apply_refuses_what_cannot_work(cli, tmp_path: Path, kind: str, document: str, fragment: str) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(DATASET + document)
    line = _refused_in_one_line(cli("apply", "-f", path), fragment)
    assert line.startswith(f"error: {path}: "), line
    assert _stored(cli, kind) == []
    assert _stored(cli, "datasets") == []


def test_the_limits_leave_what_works(cli, tmp_path: Path) -> None:
    """0 replicas, a TTL of 0, a runtime with no tieredstore: accepted as before."""
    path = tmp_path / "objects.yaml"
    path.write_text(DATASET + _doc("AlluxioRuntime", "good", "  replicas: 0\n") + "---\n"
                    + _doc("JuiceFSRuntime", "other", "  tieredstore: {}\n"))
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err
    assert _stored(cli, "alluxioruntimes") == ["good"]
    assert _stored(cli, "juicefsruntimes") == ["other"]


def test_operations_that_can_work_pass_the_checks(home: Path) -> None:
    """A DataMigrate from external storage into a dataset and a TTL of 0 pass (checked, not started here)."""
    from millpond.datasets.manifests import check_document
    from millpond.store.secrets import ConfigStore

    migrate = {
        "apiVersion": "data.fluid.io/v1alpha1", "kind": "DataMigrate", "metadata": {"name": "in"},
        "spec": {"from": {"externalStorage": {"uri": "local:///absent/in"}},
                 "to": {"dataset": {"name": "good", "namespace": "default"}}, "ttlSecondsAfterFinished": 0},
    }
    assert check_document(migrate, "in.yaml", 1, ConfigStore(home)).name == "in"


def test_apply_refuses_a_quota_no_disk_can_hold(cli, tmp_path: Path) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(DATASET + _doc("AlluxioRuntime", "good",
                                   "  tieredstore: {levels: [{mediumtype: SSD, quota: 999999999999Ei}]}\n"))
    _refused_in_one_line(cli("apply", "-f", path), "spec.tieredstore.levels[0].quota")
    assert _stored(cli, "alluxioruntimes") == []


# --- nested 100,000 deep, every way in ---------------------------------------------------------

LEVELS = 100_000
DEEP = "[" * LEVELS + "]" * LEVELS
DEEP_DATASET_YAML = ("apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata: {name: deep}\nspec:\n"
                     "  mounts:\n  - mountPoint: local:///absent\n    options:\n      key: " + DEEP + "\n")
DEEP_DATASET_JSON = ('{"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "deep"}, '
                     '"spec": {"mounts": [{"mountPoint": "local:///absent", "options": {"key": ' + DEEP + '}}]}}')
FIELD = "spec.mounts[0].options.key[0][0]"


def _millpond(home: Path, *args: Any, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as its own process: a blown stack must show as a crash, not end the test run."""
    env = {**os.environ, "MILLPOND_HOME": str(home)}
    return subprocess.run([str(MILLPOND_BIN), *map(str, args)], env=env, input=stdin, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.parametrize(("name", "text", "where"), [
    ("deep.yaml", DEEP_DATASET_YAML, ":8:"),
    ("deep.json", DEEP_DATASET_JSON, ":1:"),
    ("multi.yaml", DATASET + DEEP_DATASET_YAML, ":14:"),
    ("-", DEEP_DATASET_YAML, "STDIN:8:"),
], ids=["yaml", "json", "second-document", "stdin"])
def test_apply_refuses_a_document_nested_100000_deep(home: Path, tmp_path: Path, name: str, text: str,
                                                      where: str) -> None:
    if name == "-":
        result = _millpond(home, "apply", "-f", "-", stdin=text)
    else:
        (tmp_path / name).write_text(text)
        result = _millpond(home, "apply", "-f", tmp_path / name)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    assert where in lines[0] and FIELD in lines[0] and "nested deeper than 100 levels" in lines[0], lines[0]
    listing = _millpond(home, "get", "datasets", "-o", "json")
    assert listing.returncode == 0 and json.loads(listing.stdout)["items"] == [], listing


def test_the_fluid_api_refuses_a_document_nested_100000_deep(home: Path) -> None:
    from tests.server_support import Served

    served = Served()
    try:
        for body, media in ((DATASET + DEEP_DATASET_YAML, "application/yaml"), (DEEP_DATASET_JSON, "application/json")):
            request = urllib.request.Request(f"{served.url}/apis/millpond/v1/fluid/apply", data=body.encode(),
                                             method="POST", headers={"Content-Type": media})
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(request, timeout=60)
            assert answer.value.code == 400, media
            message = json.loads(answer.value.read())
            text = json.dumps(message)
            assert FIELD in text and "nested deeper than 100 levels" in text, (media, text[:2000])
        with urllib.request.urlopen(f"{served.url}/apis/millpond/v1/datasets", timeout=60) as listing:
            assert json.loads(listing.read())["items"] == []
    finally:
        served.stop()


def _deep_value() -> Any:
    value: Any = "x"
    for _ in range(LEVELS):
        value = [value]
    return value


def test_the_fluid_sdk_refuses_a_value_nested_100000_deep(home: Path) -> None:
    from millpond import fluid

    client = fluid.FluidClient()
    with pytest.raises(UserError, match=r"create_dataset: .*spec\.sharedOptions\.key\[0\]\[0\].*nested deeper"):
        client.create_dataset("deep", "data", "local:///absent", shared_options={"key": _deep_value()})
    with pytest.raises(UserError, match=r"create_dataset: .*spec\.mounts\[0\]\.options\.key\[0\].*nested deeper"):
        client.create_dataset("deep", "data", "local:///absent", options={"key": _deep_value()})
    assert ResourceStore().list("Dataset") == []
    client.create_dataset("shallow", "data", "local:///absent")
    dataset = client.get_dataset("shallow")
    with pytest.raises(UserError, match=r"process: .*spec\.processor\.script\.env\[0\].*nested deeper"):
        dataset.process("/data", {"script": {"image": "debian", "source": "true", "env": _deep_value()}})
    assert ResourceStore().list("DataProcess") == []
