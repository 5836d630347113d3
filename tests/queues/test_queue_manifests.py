"""Kueue's queueing manifests at ``millpond apply -f`` / ``get`` / ``delete``: both served versions become
the same records, Kueue's webhook rules refuse what Kueue refuses (one ``error:`` line, exit 2,
nothing stored), the kinds that need a Kubernetes cluster are refused naming why, and the
conformance corpus's Kueue rows apply or are refused as EXPECTED.tsv says. Hostile and mutated
documents only ever come out accepted or refused with a UserError."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given

from millpond.datasets.manifests import read_documents
from millpond.datasets.schema_check import check_schema_file
from millpond.errors import UserError
from millpond.scheduling.queues import objects
from millpond.scheduling.queues.kinds import KINDS, REFUSED
from millpond.scheduling.queues.manifests import is_queue_document
from millpond.scheduling.queues.model import QueueingStrategy
from millpond.store.resources import ResourceStore
from tests.conftest import spawn_cli
from tests.fuzz_support import fuzz_settings, mutated, mutated_text

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "k8s-manifests"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/conformance/k8s-manifests")
QUEUE_KINDS = set(KINDS) | set(REFUSED)
ON_BOTH_DATABASES = pytest.mark.usefixtures("database")  # SQLite, then PostgreSQL


def cluster_queue(version: str = "v1beta2", **spec: Any) -> dict[str, Any]:
    cohort = {"cohortName": "team"} if version == "v1beta2" else {"cohort": "team"}
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue", "metadata": {"name": "alice"},
            "spec": {**cohort, "namespaceSelector": {}, "queueingStrategy": "StrictFIFO",
                     "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
                         {"name": "default-flavor", "resources": [
                             {"name": "cpu", "nominalQuota": 8, "borrowingLimit": 2},
                             {"name": "memory", "nominalQuota": "32Gi", "lendingLimit": "16Gi"},
                             {"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}],
                     **spec}}


def flavor(version: str = "v1beta2") -> dict[str, Any]:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}


def local_queue(target: str = "alice", namespace: str = "project-a") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "alice", "namespace": namespace}, "spec": {"clusterQueue": target}}


def write(tmp_path: Path, *documents: dict[str, Any]) -> Path:
    path = tmp_path / "queues.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def nothing_stored() -> bool:
    store = ResourceStore()
    return all(not store.list(kind, None) for kind in KINDS)


@ON_BOTH_DATABASES
def test_v1beta1_and_v1beta2_apply_read_back_as_the_same_records(cli, tmp_path: Path) -> None:
    applied = cli("apply", "-f", write(tmp_path, flavor("v1beta1"), cluster_queue("v1beta1",
                  flavorFungibility={"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}), local_queue()))
    assert applied.code == 0, applied.err
    assert applied.out.splitlines() == ["resourceflavor.kueue.x-k8s.io/default-flavor created",
                                        "clusterqueue.kueue.x-k8s.io/alice created",
                                        "localqueue.kueue.x-k8s.io/alice created"]
    old = objects.stored_objects(ResourceStore())
    again = cli("apply", "-f", write(tmp_path, flavor(), cluster_queue(
        flavorFungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}), local_queue()))
    assert again.code == 0 and again.out.splitlines()[-1] == "localqueue.kueue.x-k8s.io/alice unchanged"
    new = objects.stored_objects(ResourceStore())
    assert old == new
    queue = new.cluster_queues["alice"]
    assert queue.cohort == "team" and queue.queueing_strategy is QueueingStrategy.STRICT_FIFO
    assert queue.resource_groups[0].flavors[0].resources[1].lending_limit == 16 * 2**30 * 1000
    assert new.local_queues[("project-a", "alice")].cluster_queue == "alice"
    shown = cli("get", "cq", "alice", "-o", "json").json()
    assert shown["apiVersion"] == "kueue.x-k8s.io/v1beta2" and "namespace" not in shown["metadata"]
    table = cli("get", "queues", "-A")
    assert table.out.split("\n")[1].split()[:3] == ["project-a", "alice", "alice"], table.out
    assert cli("delete", "localqueue", "alice", "-n", "project-a").code == 0
    gone = cli("get", "lq", "alice", "-n", "project-a")
    assert gone.code == 2 and gone.err.strip() == \
        'error: localqueues.kueue.x-k8s.io "alice" not found in namespace "project-a"'


def test_priority_classes_keep_value_and_description_at_the_top(cli, tmp_path: Path) -> None:
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
           "value": 10000, "description": "urgent"}
    assert cli("apply", "-f", write(tmp_path, wpc)).code == 0
    shown = cli("get", "wpc", "high", "-o", "yaml")
    assert yaml.safe_load(shown.out)["value"] == 10000
    assert objects.stored_objects(ResourceStore()).priority_classes["high"].description == "urgent"
    assert cli("get", "workloadpriorityclasses").out.split("\n")[1].split()[:2] == ["high", "10000"]


def _spec(**changes: Any) -> dict[str, Any]:
    """The good ClusterQueue with fields of its spec changed (None: removed)."""
    doc = cluster_queue()
    doc["spec"].update(changes)
    doc["spec"] = {key: value for key, value in doc["spec"].items() if value is not None}
    return doc


def _resources(*quotas: dict[str, Any], covered: tuple[str, ...] = ("cpu",)) -> list[dict[str, Any]]:
    return [{"coveredResources": list(covered), "flavors": [{"name": "f", "resources": list(quotas)}]}]


# (document, what the one error line says): Kueue's webhooks and CEL rules, and millpond's refusals.
BAD = [
    (_spec(resourceGroups=_resources({"name": "cpu", "nominalQuota": 1})
           + _resources({"name": "cpu", "nominalQuota": 1})), 'coveredResources[0]: Duplicate value: "cpu"'),
    (_spec(resourceGroups=[{"coveredResources": ["cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]},
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 2}]}]}]), 'flavors[1].name: Duplicate value: "f"'),
    (_spec(resourceGroups=_resources({"name": "memory", "nominalQuota": 1})),
     'resources[0].name: Invalid value: "memory": must match the name in coveredResources'),
    (_spec(resourceGroups=_resources({"name": "cpu", "nominalQuota": 1}, covered=("cpu", "memory"))),
     "flavors must have the same number of resources as the coveredResources"),
    (_spec(resourceGroups=_resources({"name": "cpu", "nominalQuota": "-1"})), "must be greater than or equal to 0"),
    (_spec(cohortName=None), "borrowingLimit: Invalid value: 2: must be nil when cohort is empty"),
    (_spec(resourceGroups=_resources({"name": "cpu", "nominalQuota": 1, "lendingLimit": 2})),
     "lendingLimit: Invalid value: 2: must be less than or equal to the nominalQuota"),
    (_spec(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}),
     "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"),
    (_spec(flavorFungibility={"preference": "BorrowingOverPreemption"}), "preference can only be set when both"),
    (_spec(namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In"}]}),
     "matchExpressions[0].values: Required value"),
    (_spec(queueingStrategy="Random"), "spec.queueingStrategy: \"Random\" is not one of"),
    (_spec(cohort="team"), 'unknown field "spec.cohort"'),  # v1beta1's name, in a v1beta2 document
    (_spec(**{"a\nb": 1}), 'unknown field "spec[a\\nb]"'),  # a newline in a key stays escaped: one line
    ({**flavor(), "metadata": {"name": "f", "x\ny": 1}}, 'unknown field "metadata.x\\ny"'),
    (_spec(resourceGroups=_resources({"name": "cpu", "nominalQuota": "lots"})), "nominalQuota"),
    (cluster_queue("v1beta1", admissionChecks=["prov"]), "spec.admissionChecks: admission checks are run by"),
    (_spec(admissionChecksStrategy={"admissionChecks": [{"name": "prov"}]}), "spec.admissionChecksStrategy: admission"),
    ({**cluster_queue(), "apiVersion": "kueue.x-k8s.io/v1alpha1"},
     "apiVersion 'kueue.x-k8s.io/v1alpha1' is not supported (millpond reads kueue.x-k8s.io/v1beta2 and"),
    ({**cluster_queue(), "metadata": {"name": "Alice"}}, "metadata.name: invalid ClusterQueue name 'Alice'"),
    ({**local_queue(), "spec": {}}, "spec.clusterQueue: required field is missing"),
    ({**flavor(), "spec": {"topologyName": "default"}}, "spec.topologyName: Topology: topology-aware scheduling"),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "x"},
      "value": 2**31}, "value: 2147483648 is out of range for int32"),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "org"},
      "spec": {"resourceGroups": _resources({"name": "cpu", "nominalQuota": 1, "lendingLimit": 1})}},
     "lendingLimit: Invalid value: 1: must be nil when parent is empty"),
    ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "MultiKueueCluster", "metadata": {"name": "w"}},
     "MultiKueueCluster: MultiKueue dispatches workloads to remote Kubernetes clusters"),
    ({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "DynamicResourceAllocationConfig",
      "metadata": {"name": "default", "namespace": "kueue-system"}}, "millpond has no DRA devices"),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"}},
     "Kueue makes Workloads from jobs itself"),
]


@pytest.mark.parametrize(("document", "says"), BAD, ids=[says[:40] for _, says in BAD])
def test_a_bad_queue_manifest_is_one_error_line_exit_2_and_nothing_stored(cli, tmp_path: Path,
                                                                          document: dict[str, Any], says: str) -> None:
    result = cli("apply", "-f", write(tmp_path, flavor(), document))  # after a good one: all or nothing
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.err
    assert "Traceback" not in result.err and result.out == ""
    assert nothing_stored()


@ON_BOTH_DATABASES
def test_a_local_queues_cluster_queue_is_immutable(cli, tmp_path: Path) -> None:
    assert cli("apply", "-f", write(tmp_path, local_queue("alice"))).code == 0
    moved = cli("apply", "-f", write(tmp_path, local_queue("bob")))
    assert moved.code == 2 and 'spec.clusterQueue: Invalid value: "bob": field is immutable' in moved.err
    twice = cli("apply", "-f", write(tmp_path, local_queue("carol", "b"), local_queue("dave", "b")))
    assert twice.code == 2 and "field is immutable" in twice.err
    assert ResourceStore().get("LocalQueue", "alice", "b") is None
    assert ResourceStore().get("LocalQueue", "alice", "project-a").spec["clusterQueue"] == "alice"


def test_fields_without_effect_here_are_named_in_one_info_line(cli, tmp_path: Path) -> None:
    result = cli("apply", "-f", write(tmp_path, flavor(), _spec(fairSharing={"weight": 2}, admissionScope={
        "admissionMode": "UsageBasedAdmissionFairSharing"}), {**local_queue(), "spec": {
            "clusterQueue": "alice", "fairSharing": {"weight": "1"}}}, {**local_queue(namespace="b"), "spec": {
                "clusterQueue": "alice", "fairSharing": {"weight": "1"}}}))
    assert result.code == 0, result.err
    assert result.err.strip().splitlines() == [
        "info: ClusterQueue alice: recorded, no effect here: spec.fairSharing, spec.admissionScope",
        "info: LocalQueue alice: recorded, no effect here: spec.fairSharing"]


@ON_BOTH_DATABASES
def test_a_queue_naming_what_is_not_there_yet_is_accepted_and_says_so(cli, tmp_path: Path) -> None:
    """As in Kueue, the queue is stored and inactive; one line per missing kind says why it admits nothing."""
    result = cli("apply", "-f", write(tmp_path, cluster_queue(), local_queue(), local_queue("nobody", "b")))
    assert result.code == 0, result.err
    assert result.err.strip().splitlines() == [
        "info: ClusterQueue nobody not found: LocalQueue b/alice admits nothing until it is applied",
        "info: ResourceFlavor default-flavor not found: ClusterQueue alice admits nothing until it is applied"]
    assert cli("apply", "-f", write(tmp_path, flavor())).err == ""


def test_refused_kinds_name_why_at_get_too(cli) -> None:
    for name in ("admissionchecks", "topology", "multikueueconfigs", "provisioningrequestconfig"):
        result = cli("get", name)
        assert result.code == 2 and len(result.err.strip().splitlines()) == 1 and "millpond" in result.err


def _corpus_rows() -> list[tuple[str, str, str]]:
    if not (CORPUS / "EXPECTED.tsv").is_file():
        return []
    rows = []
    for line in (CORPUS / "EXPECTED.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        file, expected, kinds = line.split("\t")[:3]
        if set(kinds.split(",")) <= QUEUE_KINDS:
            rows.append((file, expected, kinds))
    return rows


@pytest.mark.skipif(not _corpus_rows(), reason="the shared conformance corpus is not beside this checkout")
@ON_BOTH_DATABASES
@pytest.mark.parametrize(("file", "expected", "kinds"), _corpus_rows(), ids=[row[0][:60] for row in _corpus_rows()])
def test_corpus_queue_rows_apply_or_are_refused_as_expected(cli, file: str, expected: str, kinds: str) -> None:
    result = cli("apply", "-f", CORPUS / file)
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) <= 4, result.err
    if expected == "apply":
        assert result.code == 0, result.err
    elif expected == "refuse":
        assert result.code == 2 and result.err.startswith("error: "), result.err
    else:
        assert result.code in (0, 2), result.err
    if result.code == 2:
        assert len(result.err.strip().splitlines()) == 1 and nothing_stored()
        return
    documents = [doc for doc in yaml.safe_load_all((CORPUS / file).read_text()) if doc]
    assert len(result.out.splitlines()) == len(documents)
    stored = objects.stored_objects(ResourceStore())
    counts = {kind: sum(doc["kind"] == kind for doc in documents) for kind in KINDS}
    assert (len(stored.cluster_queues), len(stored.local_queues), len(stored.cohorts), len(stored.flavors),
            len(stored.priority_classes)) == (counts["ClusterQueue"], counts["LocalQueue"], counts["Cohort"],
                                              counts["ResourceFlavor"], counts["WorkloadPriorityClass"])


# --- fuzzing: seeds are our own documents and the corpus's Kueue documents, mutated --------------------------
def _seeds() -> list[dict[str, Any]]:
    seeds: list[dict[str, Any]] = [cluster_queue(), cluster_queue("v1beta1"), flavor(), local_queue(),
                                   *(document for document, _ in BAD)]
    for file, _, _ in _corpus_rows():
        seeds += [doc for doc in yaml.safe_load_all((CORPUS / file).read_text()) if isinstance(doc, dict)]
    return seeds


SEEDS = _seeds()


@fuzz_settings(examples=600)
@given(doc=mutated(SEEDS))
def test_mutated_queue_manifest_is_accepted_or_refused(doc: Any) -> None:
    """Whatever the document, the checks either accept it (and its records can be made) or raise one UserError line."""
    if not is_queue_document(doc):  # apply sends it to Fluid's checks
        return
    try:
        manifests = objects.check([("fuzz.yaml", 1, copy.deepcopy(doc))], _NoStore(),  # type: ignore[arg-type]
                                  check_schema_file)
    except UserError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz.yaml: document 1: ")
        return
    assert [manifest.info.kind for manifest in manifests] == [doc["kind"]]


class _NoStore:
    """What ``objects.check`` reads of a store: no LocalQueue stored yet."""

    def get(self, kind: str, name: str, namespace: str = "default") -> None:
        return None


TEXTS = [yaml.safe_dump_all([doc]) for doc in SEEDS[:4]] + [(CORPUS / file).read_text() for file, _, _ in
                                                            _corpus_rows()]


@fuzz_settings(examples=300)
@given(text=mutated_text(TEXTS))
def test_mutated_queue_manifest_text_is_accepted_or_refused(text: str, tmp_path_factory: pytest.TempPathFactory
                                                            ) -> None:
    path = Path(tmp_path_factory.getbasetemp()) / "fuzz-queues.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        documents = [d for d in read_documents([str(path)]) if is_queue_document(d[2])]
        objects.check(documents, _NoStore(), check_schema_file)  # type: ignore[arg-type]
    except UserError as exc:
        assert "\n" not in str(exc)


def _stored() -> list[tuple[str, str, str, Any]]:
    store = ResourceStore()
    return [(r.kind, r.namespace, r.name, r.manifest) for kind in KINDS for r in store.list(kind, None)]


@fuzz_settings(examples=80)
@given(doc=mutated(SEEDS))
def test_a_mutated_manifest_at_millpond_apply_is_applied_or_one_error_line_with_nothing_stored(
        cli, tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    """The whole command, as a user runs it: exit 0, or exit 2 with one ``error:`` line and the store untouched."""
    before = _stored()
    path = Path(tmp_path_factory.getbasetemp()) / "fuzz-apply.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = cli("apply", "-f", path)
    assert "Traceback" not in result.err
    if result.code == 2:
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and result.out == "", result.err
        assert _stored() == before
    else:
        assert result.code == 0, result.err


@ON_BOTH_DATABASES
def test_admission_reads_the_objects_again_whenever_any_process_changed_one(cli, home: Path, tmp_path: Path) -> None:
    """``cycle.load_objects`` keeps what it parsed while the objects' stamps stay: a change, a delete and a
    re-create by another ``millpond`` process are each seen by the next read; no change, the same records."""
    from millpond.scheduling.queues.cycle import load_objects
    from millpond.settings import load_settings

    settings = load_settings()
    assert cli("apply", "-f", write(tmp_path, flavor(), cluster_queue(), local_queue())).code == 0
    first = load_objects(settings)
    assert load_objects(settings) is first  # nothing changed: nothing parsed again
    assert first.cluster_queues["alice"].queueing_strategy is QueueingStrategy.STRICT_FIFO

    def elsewhere(*args: str) -> None:  # another process, as a second terminal or the server would be
        process = spawn_cli(home, *args)
        _out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err

    elsewhere("apply", "-f", str(write(tmp_path, cluster_queue(queueingStrategy="BestEffortFIFO"))))
    changed = load_objects(settings)
    assert changed.cluster_queues["alice"].queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    elsewhere("delete", "localqueue", "alice", "-n", "project-a")
    assert ("project-a", "alice") not in load_objects(settings).local_queues
    elsewhere("apply", "-f", str(write(tmp_path, local_queue(namespace="project-b"))))
    assert set(load_objects(settings).local_queues) == {("project-b", "alice")}
    assert load_objects(settings).cluster_queues["alice"].queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
