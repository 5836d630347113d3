"""The one registry of kinds: every kind has a handler; ``describe`` for each family; a new kind is one module."""

from __future__ import annotations

import importlib
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.kinds import OWNERS, REGISTRY

DATASET = """\
apiVersion: data.fluid.io/v1alpha1
kind: Dataset
metadata: {name: demo, labels: {team: vision}}
spec:
  mounts: [{mountPoint: "file:///tmp", name: tmp}]
"""
QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 4}]}]
"""
SERVING_RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: sk, annotations: {note: kept}}
spec:
  supportedModelFormats: [{name: sklearn, version: "1"}]
  containers: [{name: kserve-container, image: example/sklearn}]
"""
TRAINING_RUNTIME = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: torch-small}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          spec:
            template:
              spec:
                containers: [{name: node, image: pytorch/pytorch}]
"""
WIDGET = """\
apiVersion: example.millpond.dev/v1
kind: Widget
metadata: {name: w1, labels: {shape: round}}
spec: {size: 3}
"""

Cli = Callable[..., Any]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_registered_kind_resolves_to_its_familys_handler() -> None:
    kinds = list(REGISTRY)
    assert {entry.owner for entry in kinds} == set(OWNERS)
    assert len(kinds) == 49  # 12 Fluid, 6 Kubeflow, 1 batch (Job), 5 Kueue, 2 KubeRay, 1 v1 Pod, 14 core (v1 with
    # ResourceQuota, RBAC, Kubeflow's Profile), 3 KServe, 1 Seldon (SeldonDeployment), 1 Kubeflow Notebook,
    # 3 Katib (Experiment, Suggestion, Trial)
    for entry in kinds:
        handler = REGISTRY.handler(entry)
        for member in ("claims", "check", "get", "list_objects", "printer_columns", "table", "delete", "status",
                       "events"):
            assert callable(getattr(handler, member)), (entry.kind, member)
        assert handler.owner == entry.owner and entry in handler.kinds, entry
        for spelling in entry.spellings():
            assert REGISTRY.resolve(spelling) == entry, spelling
        columns = handler.printer_columns(entry)
        # kubectl's own tables of Roles and Events show a time otherwise: CREATED AT, LAST SEEN
        assert columns[0] == "NAME" and ("AGE" in columns or {"CREATED AT", "LAST SEEN"} & set(columns)), (
            entry.kind, columns)
    orders = [handler.apply_order for handler in REGISTRY.handlers()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    assert [handler.owner for handler in REGISTRY.handlers()][:1] == ["scheduling.queues"]  # queues first


def test_describe_shows_each_familys_object_as_kubectl_does(cli: Cli, tmp_path: Path) -> None:
    files = [_write(tmp_path, f"{name}.yaml", text) for name, text in
             (("dataset", DATASET), ("queues", QUEUES), ("runtime", SERVING_RUNTIME), ("training", TRAINING_RUNTIME))]
    for path in files:
        applied = cli("apply", "-f", path)
        assert applied.code == 0, applied.err

    dataset = cli("describe", "dataset", "demo")
    assert dataset.code == 0, dataset.err
    lines = dataset.out.splitlines()
    assert lines[:6] == ["Name:         demo", "Namespace:    default", "Labels:       team=vision",
                         "Annotations:  <none>", "API Version:  data.fluid.io/v1alpha1", "Kind:         Dataset"]
    assert "Spec:" in lines and "    Mount Point:  file:///tmp" in lines and "Status:" in lines
    assert "  Phase:  NotBound" in lines and lines[-1] == "Events:       <none>"
    assert any(line.startswith("  UID:") for line in lines) and "Conditions:" in lines

    queue = cli("describe", "clusterqueue", "team-a")
    assert queue.code == 0, queue.err
    assert "Namespace:" not in queue.out  # cluster-scoped
    assert "Kind:         ClusterQueue" in queue.out and "        Nominal Quota:  4" in queue.out.splitlines()
    assert "  Pending Workloads:    0" in queue.out.splitlines()

    runtime = cli("describe", "servingruntime", "sk")
    assert runtime.code == 0, runtime.err
    assert "Annotations:  note=kept" in runtime.out.splitlines()
    assert "    Image:  example/sklearn" in runtime.out.splitlines()

    training = cli("describe", "trainingruntime", "torch-small", "-n", "default")
    assert training.code == 0, training.err
    assert "API Version:  trainer.kubeflow.org/v1alpha1" in training.out and "Ml Policy:" in training.out


def test_describe_fails_as_get_does(cli: Cli) -> None:
    for args in (("dataset", "missing"), ("isvc", "missing"), ("nosuchkind", "x"), ("clusterqueue", "none")):
        described, got = cli("describe", *args), cli("get", *args)
        assert (described.code, described.err) == (got.code, got.err) and described.code != 0, (args, described)
        assert len(described.err.strip().splitlines()) == 1 and described.err.startswith("error: ")


def test_describe_shows_conditions_and_events() -> None:
    from millpond.cli.describe import describe_text
    from millpond.kind_handler import KindEvent

    text = describe_text(
        {"apiVersion": "x/v1", "kind": "Thing", "metadata": {"name": "t", "namespace": "ns"},
         "spec": {"replicas": 2}, "status": {"phase": "Running", "conditions": [
             {"type": "Ready", "status": "True", "reason": "Up", "message": "all good"}]}},
        [KindEvent("Normal", "Started", "5s", "millpond-training", "instance 0 started")])
    lines = text.splitlines()
    at = lines.index("Conditions:")
    assert lines[at + 1].split() == ["Type", "Status", "Reason", "Message"]
    assert lines[at + 3].split() == ["Ready", "True", "Up", "all", "good"]
    at = lines.index("Events:")
    assert lines[at + 1].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert lines[at + 3].split()[:4] == ["Normal", "Started", "5s", "millpond-training"]
    assert "  Replicas:  2" in lines and "  Phase:  Running" in lines


@pytest.fixture
def widgets() -> Iterator[Any]:
    """The worked example's module, registered for the test and forgotten after it."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        module = importlib.import_module("kinds_example_widgets")
        REGISTRY.register_handler(module.WidgetHandler())  # as when first imported (a module cached from before)
        yield module
    finally:
        REGISTRY.remove_owner("widgets")
        sys.modules.pop("kinds_example_widgets", None)
        sys.path.remove(str(Path(__file__).parent))


def test_a_kind_registered_by_one_module_reaches_apply_get_describe_and_delete(widgets: Any, cli: Cli,
                                                                             tmp_path: Path) -> None:
    entry = REGISTRY.resolve("wd")
    assert entry.kind == "Widget" and REGISTRY.handler(entry).owner == "widgets"
    applied = cli("apply", "-f", _write(tmp_path, "widget.yaml", WIDGET + "---\n" + DATASET))
    assert applied.code == 0, applied.err
    assert applied.out.splitlines() == ["dataset.data.fluid.io/demo created", "widget.example.millpond.dev/w1 created"]
    assert applied.err.splitlines() == ["info: Widget w1: widgets are only recorded"]
    table = cli("get", "widgets")
    assert table.code == 0 and table.out.splitlines()[0].split() == ["NAME", "SIZE", "AGE"]
    assert table.out.splitlines()[1].split()[:2] == ["w1", "3"]
    shown = cli("get", "widget.example.millpond.dev", "w1", "-o", "json").json()
    assert shown["metadata"]["labels"] == {"shape": "round"} and shown["status"]["phase"] == "Ready"
    assert cli("get", "widgets", "-o", "json").json()["items"][0]["metadata"]["uid"] == shown["metadata"]["uid"]
    described = cli("describe", "widget", "w1")
    assert "Labels:       shape=round" in described.out and "Ready" in described.out.split("Conditions:")[1]
    refused = cli("apply", "-f", _write(tmp_path, "bad.yaml", WIDGET.replace("size: 3", "size: 0")))
    assert refused.code != 0 and refused.err.strip().splitlines() == [
        f"error: {tmp_path / 'bad.yaml'}: document 1: Widget w1: spec.size: a positive integer is required"]
    deleted = cli("delete", "wd", "w1")
    assert deleted.out == 'widget.example.millpond.dev "w1" deleted\n'
    missing = cli("get", "widget", "w1")
    assert missing.code != 0 and missing.err == 'error: widgets.example.millpond.dev "w1" not found\n'


def _call(method: str, url: str, body: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, method=method, data=body.encode() if body is not None else None,
                                     headers={"Content-Type": "application/yaml"} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as failed:
        return failed.code, json.loads(failed.read())


def test_the_server_routes_reach_a_kind_registered_by_one_module(widgets: Any, home: Path) -> None:
    from tests.server_support import Served

    served = Served()
    api = f"{served.url}/apis/millpond/v1"
    try:
        code, answer = _call("POST", f"{api}/fluid/apply", WIDGET)
        assert code == 200, answer
        [item] = answer["items"]
        assert (item["kind"], item["name"], item["action"], item["message"]) == (
            "Widget", "w1", "created", "widget.example.millpond.dev/w1 created") and item["uid"]
        assert answer["notes"] == ["Widget w1: widgets are only recorded"]
        code, listed = _call("GET", f"{api}/widgets")
        assert code == 200 and [one["metadata"]["name"] for one in listed["items"]] == ["w1"]
        assert _call("GET", f"{api}/wd/w1")[1]["spec"] == {"size": 3}
        code, deleted = _call("DELETE", f"{api}/widgets/w1")
        assert code == 200 and deleted["message"] == 'widget.example.millpond.dev "w1" deleted'
        assert _call("GET", f"{api}/widgets/w1")[0] == 404
    finally:
        served.stop()


REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference"


@pytest.mark.parametrize("family", ["kueue", "kserve"])
def test_printer_columns_are_the_crds_additional_printer_columns(family: str) -> None:
    """Kueue's and KServe's tables show (a prefix-ordered subset of) the columns their CRDs declare."""
    import yaml

    if not (REFERENCE / family).is_dir():
        pytest.skip(f"no {REFERENCE / family}")
    declared: dict[str, list[str]] = {}
    for path in (REFERENCE / family).glob("*.yaml"):
        for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # MBs
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                [stored] = [v for v in doc["spec"]["versions"] if v.get("storage")]
                declared[doc["spec"]["names"]["kind"]] = [
                    c["name"].upper() for c in stored.get("additionalPrinterColumns") or []]
    owner = {"kueue": "scheduling.queues", "kserve": "serving"}[family]
    checked = 0
    for entry in REGISTRY:
        if entry.owner != owner or not declared.get(entry.kind):
            continue
        columns = [c for c in REGISTRY.handler(entry).printer_columns(entry) if c not in ("NAME", "AGE")]
        remaining = iter(declared[entry.kind])
        assert all(column in remaining for column in columns), (entry.kind, columns, declared[entry.kind])
        checked += 1
    assert checked >= 2
