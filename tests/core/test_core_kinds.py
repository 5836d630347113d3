"""Kubernetes' built-in kinds (``millpond.core``) through ``millpond apply/get/describe/delete`` and the server's
``/apis/millpond/v1`` routes: Namespaces (explicit, implied, deleted with everything in them), Secrets and
ConfigMaps on the home's store, ServiceAccounts and RBAC kept, PVCs as local volumes and as Fluid's view of a
bound Dataset, the machine as a Node, the families' events as Events; bad input is one line, nothing stored."""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millpond.core.nodes import node_name
from millpond.kind_handler import HandlerBase, KindContext, KindEvent, KindName, Table
from millpond.kinds import REGISTRY
from millpond.store.resources import ResourceStore
from millpond.store.secrets import ConfigStore, MissingConfig

Cli = Callable[..., Any]

NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {tier: gold}}
"""
SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: team}
type: Opaque
data: {access: QUtJRA==}
stringData: {secret: s3cr3t}
"""
CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team}
data: {mode: fast}
"""
ACCOUNTS = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: trainer, namespace: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: team}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read, namespace: team}
subjects: [{kind: ServiceAccount, name: trainer}]
roleRef: {kind: Role, name: reader, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: viewer}
rules: [{nonResourceURLs: [/healthz], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: view-all}
subjects: [{kind: Group, name: people, apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: ClusterRole, name: viewer, apiGroup: rbac.authorization.k8s.io}
"""
DATASET = """\
apiVersion: data.fluid.io/v1alpha1
kind: Dataset
metadata: {name: demo, namespace: NS, annotations: {pvc.fluid.io/resources.requests.storage: 30Gi}}
spec:
  accessModes: [ReadWriteMany]
  mounts: [{mountPoint: "file:///tmp", name: tmp}]
---
apiVersion: data.fluid.io/v1alpha1
kind: AlluxioRuntime
metadata: {name: demo, namespace: NS}
spec:
  replicas: 1
  tieredstore:
    levels: [{mediumtype: SSD, path: /tmp/millpond-core-test-cache, quota: 1Gi}]
"""
LOCAL_QUEUE = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team}
spec: {clusterQueue: cq}
"""
CLAIM = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch, namespace: team}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 2Gi}}
"""


def _apply(cli: Cli, tmp_path: Path, text: str, name: str = "batch.yaml") -> Any:
    path = tmp_path / name
    path.write_text(text)
    return cli("apply", "-f", path)


def _table(out: str) -> list[list[str]]:
    """The table's rows split on kubectl's three-space gaps (headers first)."""
    return [[cell.strip() for cell in line.split("   ") if cell.strip()] for line in out.splitlines()]


def _names(cli: Cli, *args: str) -> list[str]:
    result = cli("get", *args, "-o", "json")
    assert result.code == 0, result.err
    return [item["metadata"]["name"] for item in result.json()["items"]]


def _one_error(result: Any) -> str:
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    return lines[0]


# --- the registry's names for the core group ------------------------------------------------------------------

def test_core_kinds_are_named_as_kubectl_names_them() -> None:
    secret = REGISTRY.resolve("secrets")
    assert (secret.group, secret.resource) == ("", "secret")
    assert secret.not_found("x", "default") == 'secrets "x" not found'
    assert secret.not_found("x", "team") == 'secrets "x" not found in namespace "team"'
    for spelling, kind in (("ns", "Namespace"), ("cm", "ConfigMap"), ("sa", "ServiceAccount"),
                           ("pvc", "PersistentVolumeClaim"), ("pv", "PersistentVolume"), ("no", "Node"),
                           ("ev", "Event"), ("secrets.v1", "Secret"), ("rolebindings.rbac.authorization.k8s.io",
                                                                     "RoleBinding")):
        assert REGISTRY.resolve(spelling).kind == kind
    assert REGISTRY.resolve("roles").resource == "role.rbac.authorization.k8s.io"
    assert REGISTRY.resolve("dataset").resource == "dataset.data.fluid.io"  # the other groups as before
    for entry in REGISTRY:
        handler = REGISTRY.handler(entry)
        assert handler.printer_columns(entry)[0] == "NAME"


# --- Namespaces ---------------------------------------------------------------------------------------------

def test_namespaces_created_and_implied_with_status_active(cli: Cli, home: Path, tmp_path: Path) -> None:
    result = _apply(cli, tmp_path, NAMESPACE)
    assert result.code == 0 and result.out == "namespace/team created\n", result.err
    assert _apply(cli, tmp_path, NAMESPACE).out == "namespace/team unchanged\n"
    assert _apply(cli, tmp_path, CONFIG_MAP.replace("team", "other")).code == 0  # an object implies its namespace
    rows = _table(cli("get", "namespaces").out)
    assert rows[0] == ["NAME", "STATUS", "AGE"]
    assert [(row[0], row[1]) for row in rows[1:]] == [("default", "Active"), ("other", "Active"), ("team", "Active")]
    shown = cli("get", "ns", "team", "-o", "json").json()
    assert shown["apiVersion"] == "v1" and shown["kind"] == "Namespace" and "namespace" not in shown["metadata"]
    assert shown["metadata"]["labels"] == {"tier": "gold", "kubernetes.io/metadata.name": "team"}
    assert shown["metadata"]["uid"] and shown["metadata"]["creationTimestamp"].endswith("Z")
    assert shown["status"] == {"phase": "Active"}
    described = cli("describe", "namespace", "team")
    assert described.code == 0 and "tier=gold" in described.out


def test_deleting_a_namespace_deletes_its_dataset_config_map_and_local_queue(cli: Cli, home: Path,
                                                                              tmp_path: Path) -> None:
    batch = "---\n".join([NAMESPACE, DATASET.replace("NS", "team"), CONFIG_MAP, SECRET, LOCAL_QUEUE, CLAIM])
    result = _apply(cli, tmp_path, batch)
    assert result.code == 0, result.err
    assert _apply(cli, tmp_path, CONFIG_MAP.replace("team", "default").replace("settings", "kept")).code == 0
    assert _names(cli, "datasets", "-n", "team") == ["demo"] and _names(cli, "localqueues", "-n", "team") == ["lq"]
    assert _names(cli, "pvc", "-n", "team") == ["demo", "scratch"]
    assert (home / "volumes" / "team" / "scratch").is_dir()

    deleted = cli("delete", "namespace", "team")
    assert deleted.code == 0 and deleted.out == 'namespace "team" deleted\n', deleted.err
    for kind in ("datasets", "alluxioruntimes", "localqueues", "configmaps", "secrets", "pvc"):
        assert _names(cli, kind, "-n", "team") == [], kind
    assert "team" not in _names(cli, "namespaces")
    assert not (home / "volumes" / "team" / "scratch").exists()
    with pytest.raises(MissingConfig):
        ConfigStore(home).get("configmap", "settings")
    assert ConfigStore(home).get("configmap", "kept") == {"mode": "fast"}  # another namespace's stays
    assert ResourceStore().list("LocalQueue", None) == []


def test_default_cannot_be_deleted_and_a_missing_namespace_is_not_found(cli: Cli, home: Path) -> None:
    line = _one_error(cli("delete", "namespace", "default"))
    assert line == 'error: namespaces "default" is forbidden: this namespace may not be deleted'
    assert _one_error(cli("delete", "ns", "nowhere")) == 'error: namespaces "nowhere" not found'
    assert "default" in _names(cli, "ns")


# --- Secrets and ConfigMaps -----------------------------------------------------------------------------------

def test_a_secret_is_kept_in_the_store_and_its_values_never_shown_by_the_table_or_describe(
    cli: Cli, home: Path, tmp_path: Path,
) -> None:
    result = _apply(cli, tmp_path, SECRET)
    assert result.code == 0 and result.out == "secret/keys created\n", result.err
    assert ConfigStore(home).get("secret", "keys", "team") == {"access": "AKID", "secret": "s3cr3t"}
    table = cli("get", "secrets", "-n", "team")
    assert _table(table.out)[0] == ["NAME", "TYPE", "DATA", "AGE"]
    assert _table(table.out)[1][:3] == ["keys", "Opaque", "2"]
    described = cli("describe", "secret", "keys", "-n", "team")
    assert described.code == 0 and "6 bytes" in described.out and "4 bytes" in described.out
    for shown in (table.out, described.out, result.out + result.err):
        assert "s3cr3t" not in shown and "czNjcjN0" not in shown and "AKID" not in shown
    # -o yaml is kubectl get -o yaml: base64 data, to whoever may read the home
    shown = cli("get", "secret", "keys", "-n", "team", "-o", "json").json()
    assert shown["data"] == {"access": "QUtJRA==", "secret": "czNjcjN0"} and shown["type"] == "Opaque"
    assert shown["metadata"]["namespace"] == "team" and "stringData" not in shown
    assert _apply(cli, tmp_path, SECRET).out == "secret/keys unchanged\n"
    assert _apply(cli, tmp_path, SECRET.replace("s3cr3t", "other")).out == "secret/keys configured\n"
    assert _names(cli, "secrets") == []  # in team, not in default
    assert _one_error(cli("get", "secret", "keys")) == 'error: secrets "keys" not found'
    deleted = cli("delete", "secret", "keys", "-n", "team")
    assert deleted.out == 'secret "keys" deleted\n'
    with pytest.raises(MissingConfig):
        ConfigStore(home).get("secret", "keys", "team")


def test_a_secret_made_by_millpond_secret_is_in_default_and_a_name_is_one_per_namespace(
    cli: Cli, home: Path, tmp_path: Path,
) -> None:
    ConfigStore(home).create("secret", "keys", {"token": "t"})
    assert _names(cli, "secrets") == ["keys"]
    assert _apply(cli, tmp_path, SECRET).out == "secret/keys created\n"  # team's keys: another object
    assert ConfigStore(home).get("secret", "keys") == {"token": "t"}
    assert ConfigStore(home).get("secret", "keys", "team") == {"access": "AKID", "secret": "s3cr3t"}
    assert _apply(cli, tmp_path, SECRET.replace("team", "default")).out == "secret/keys configured\n"
    assert ConfigStore(home).get("secret", "keys", "team") == {"access": "AKID", "secret": "s3cr3t"}


def test_an_immutable_config_map_keeps_its_data(cli: Cli, home: Path, tmp_path: Path) -> None:
    immutable = CONFIG_MAP + "immutable: true\n"
    assert _apply(cli, tmp_path, immutable).out == "configmap/settings created\n"
    assert "field is immutable" in _one_error(_apply(cli, tmp_path, immutable.replace("fast", "slow")))
    assert cli("get", "cm", "settings", "-n", "team", "-o", "json").json()["data"] == {"mode": "fast"}
    assert _table(cli("get", "configmaps", "-n", "team").out)[0] == ["NAME", "DATA", "AGE"]


# --- ServiceAccounts and RBAC -------------------------------------------------------------------------------

def test_service_accounts_and_rbac_are_kept_with_one_info_line_each(cli: Cli, home: Path, tmp_path: Path) -> None:
    result = _apply(cli, tmp_path, ACCOUNTS)
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "serviceaccount/trainer created", "role.rbac.authorization.k8s.io/reader created",
        "rolebinding.rbac.authorization.k8s.io/read created", "clusterrole.rbac.authorization.k8s.io/viewer created",
        "clusterrolebinding.rbac.authorization.k8s.io/view-all created"]
    infos = result.err.splitlines()
    assert len(infos) == 2 and all(line.startswith("info: ") for line in infos)
    assert "not enforce RBAC" in result.err
    assert [row[:2] for row in _table(cli("get", "sa", "-n", "team").out)[1:]] == [["default", "0"], ["trainer", "0"]]
    # every namespace has its default ServiceAccount, as the API server's controller makes one
    assert _names(cli, "sa") == ["default"] and _names(cli, "sa", "-n", "nowhere") == []
    assert cli("delete", "sa", "default", "-n", "team").code == 0 and "default" in _names(cli, "sa", "-n", "team")
    assert _table(cli("get", "rolebindings", "-n", "team").out)[1][:2] == ["read", "Role/reader"]
    assert _table(cli("get", "clusterroles").out)[0] == ["NAME", "CREATED AT"]
    role = cli("get", "role", "reader", "-n", "team", "-o", "json").json()
    assert role["apiVersion"] == "rbac.authorization.k8s.io/v1"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    assert "namespace" not in cli("get", "clusterrolebinding", "view-all", "-o", "json").json()["metadata"]
    changed = ACCOUNTS.replace("name: reader, apiGroup", "name: other, apiGroup")
    assert "cannot change roleRef" in _one_error(_apply(cli, tmp_path, changed))
    assert cli("delete", "rolebinding", "read", "-n", "team").out == \
        'rolebinding.rbac.authorization.k8s.io "read" deleted\n'
    assert _names(cli, "rolebindings", "-n", "team") == []


# --- PersistentVolumeClaims and PersistentVolumes -------------------------------------------------------------

def test_a_claim_is_a_local_volume_bound_at_once(cli: Cli, home: Path, tmp_path: Path) -> None:
    result = _apply(cli, tmp_path, CLAIM)
    assert result.code == 0 and result.out == "persistentvolumeclaim/scratch created\n", result.err
    assert (home / "volumes" / "team" / "scratch").is_dir()
    rows = _table(cli("get", "pvc", "-n", "team").out)
    assert rows[0] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "AGE"]
    claim = cli("get", "pvc", "scratch", "-n", "team", "-o", "json").json()
    assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}}
    assert rows[1][:6] == ["scratch", "Bound", claim["spec"]["volumeName"], "2Gi", "RWO", "millpond-local"]
    volume = cli("get", "pv", claim["spec"]["volumeName"], "-o", "json").json()
    assert volume["spec"]["hostPath"]["path"] == str(home / "volumes" / "team" / "scratch")
    assert volume["spec"]["claimRef"]["name"] == "scratch" and volume["spec"]["claimRef"]["namespace"] == "team"
    assert _table(cli("get", "pv").out)[0] == ["NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS",
                                              "CLAIM", "STORAGECLASS", "REASON", "AGE"]
    assert _apply(cli, tmp_path, CLAIM.replace("2Gi", "5Gi")).out == "persistentvolumeclaim/scratch configured\n"
    assert "immutable" in _one_error(_apply(cli, tmp_path, CLAIM.replace("ReadWriteOnce", "ReadWriteMany")))
    assert "bound to claim team/scratch" in _one_error(cli("delete", "pv", claim["spec"]["volumeName"]))
    assert cli("delete", "pvc", "scratch", "-n", "team").code == 0
    assert not (home / "volumes" / "team" / "scratch").exists() and _names(cli, "pv") == []


def test_a_bound_dataset_shows_the_claim_and_volume_fluid_makes(cli: Cli, home: Path, tmp_path: Path) -> None:
    assert _apply(cli, tmp_path, DATASET.split("---")[0].replace("NS", "default")).code == 0
    assert _names(cli, "pvc") == []  # not bound: no runtime yet
    assert _apply(cli, tmp_path, DATASET.replace("NS", "default")).code == 0
    claim = cli("get", "pvc", "demo", "-o", "json").json()
    assert claim["spec"]["storageClassName"] == "fluid" and claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["volumeName"] == "default-demo" and claim["status"]["phase"] == "Bound"
    assert claim["status"]["capacity"] == {"storage": "30Gi"}
    assert claim["metadata"]["labels"] == {"fluid.io/s-default-demo": "true"}
    volume = cli("get", "pv", "default-demo", "-o", "json").json()
    assert volume["spec"]["csi"]["driver"] == "fuse.csi.fluid.io"
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    pvs = _table(cli("get", "pv").out)
    assert pvs[1][:6] == ["default-demo", "30Gi", "RWX", "Retain", "Bound", "default/demo"]
    assert _table(cli("get", "pvc").out)[1][:6] == ["demo", "Bound", "default-demo", "30Gi", "RWX", "fluid"]
    line = _one_error(cli("delete", "pvc", "demo"))
    assert "the volume Fluid makes for Dataset demo" in line
    assert "Fluid makes for Dataset demo" in _one_error(_apply(cli, tmp_path, CLAIM.replace(
        "scratch", "demo").replace("team", "default")))
    assert cli("delete", "dataset", "demo").code == 0
    assert _names(cli, "pvc") == [] and _names(cli, "pv") == []


def test_a_dataset_without_access_modes_gets_fluids_defaults(cli: Cli, home: Path, tmp_path: Path) -> None:
    plain = DATASET.replace("NS", "default").replace("  accessModes: [ReadWriteMany]\n", "").replace(
        ", annotations: {pvc.fluid.io/resources.requests.storage: 30Gi}", "")
    assert _apply(cli, tmp_path, plain).code == 0
    claim = cli("get", "pvc", "demo", "-o", "json").json()
    assert claim["spec"]["accessModes"] == ["ReadOnlyMany"] and claim["status"]["capacity"] == {"storage": "100Pi"}


# --- Nodes ------------------------------------------------------------------------------------------------------

def test_this_machine_is_the_one_node_with_the_ledgers_capacity(cli: Cli, home: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")
    name = node_name()
    rows = _table(cli("get", "nodes").out)
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert rows[1][:3] == [name, "Ready", "<none>"]
    node = cli("get", "node", name, "-o", "json").json()
    assert "namespace" not in node["metadata"]
    assert set(node["status"]["capacity"]) >= {"cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"}
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    assert node["status"]["nodeInfo"]["operatingSystem"] == "linux"
    described = cli("describe", "no", name)
    assert described.code == 0 and "Allocated Resources:" in described.out and "Allocated To:" in described.out
    assert "read-only" in _one_error(cli("delete", "node", name))


def test_describe_node_names_the_holders_of_the_ledgers_grants(cli: Cli, home: Path) -> None:
    import os

    from millpond.scheduling.ledger import Holder, Ledger, Request

    ledger = Ledger()
    grant = ledger.try_acquire(Request(cpu_millis=500, memory_bytes=2**30), Holder("job", "team/train", os.getpid(),
                                                                                  None))
    assert grant is not None
    try:
        described = cli("describe", "node", node_name())
        assert "train" in described.out and "500m of" in described.out and "1048576Ki of" in described.out
    finally:
        ledger.release(grant.id)


# --- Events -----------------------------------------------------------------------------------------------------

GADGET = KindName("Gadget", "gadgets", "example.millpond.dev", ("v1",), "gadgets")
AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


class _GadgetHandler(HandlerBase):
    """A family with one object that records events (as a training job's supervisor does)."""

    owner = "gadgets"
    apply_order = 60
    kinds = (GADGET,)

    def claims(self, doc: object) -> bool:
        return False

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        if not all_namespaces and namespace != "team":
            return []
        return [{"apiVersion": "example.millpond.dev/v1", "kind": "Gadget",
                 "metadata": {"name": "g1", "namespace": "team", "uid": "u-1"}}]

    def events(self, kind: KindName, name: str, namespace: str, context: KindContext) -> list[KindEvent]:
        return [KindEvent("Normal", "Started", "", "gadget-controller", "began", AT),
                KindEvent("Warning", "Restarted", "", "gadget-controller", "again", AT),
                KindEvent("Warning", "Restarted", "", "gadget-controller", "again", AT + dt.timedelta(minutes=1))]

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None: ...

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return ("NAME",)

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        return Table(("NAME",), [])

    def check(self, documents: Sequence[Any], batch: Any) -> Any:
        raise AssertionError("never claimed")


@pytest.fixture
def gadgets() -> Iterator[None]:
    REGISTRY.register_handler(_GadgetHandler())
    try:
        yield
    finally:
        REGISTRY.remove_owner("gadgets")


def test_the_events_families_record_are_v1_events_aggregated(gadgets: None, cli: Cli, home: Path) -> None:
    listed = cli("get", "events", "-n", "team", "-o", "json").json()["items"]
    assert [(e["reason"], e["count"], e["type"]) for e in listed] == [("Started", 1, "Normal"),
                                                                      ("Restarted", 2, "Warning")]
    restarted = listed[1]
    assert restarted["involvedObject"] == {"apiVersion": "example.millpond.dev/v1", "kind": "Gadget",
                                           "name": "g1", "namespace": "team", "uid": "u-1"}
    assert (restarted["firstTimestamp"], restarted["lastTimestamp"]) == ("2026-01-02T03:04:05Z",
                                                                         "2026-01-02T03:05:05Z")
    assert restarted["source"] == {"component": "gadget-controller"}
    assert restarted["metadata"]["name"].startswith("g1.") and restarted["metadata"]["namespace"] == "team"
    rows = _table(cli("get", "ev", "-n", "team").out)
    assert rows[0] == ["NAME", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert rows[2][2:] == ["Warning", "Restarted", "gadget/g1", "again"]
    one = cli("get", "event", restarted["metadata"]["name"], "-n", "team", "-o", "json").json()
    assert one == restarted
    assert _names(cli, "events") == []  # default has none
    assert "read-only" in _one_error(cli("delete", "event", restarted["metadata"]["name"], "-n", "team"))


# --- bad input --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("document", "message"), [
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n", "RFC 1123 label"),
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: Team}\n", "RFC 1123 label"),
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: t}\nspec: {finalizers: kubernetes}\n", "list of strings"),
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: t}\nspec: {owner: me}\n", 'unknown field "spec.owner"'),
    ("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: Bad_Name}\n", "RFC 1123 subdomain"),
    ("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa, namespace: '../x'}\n", "RFC 1123 label"),
    ("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\nsecrets: oops\n", "secrets: expected a list"),
    ("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\nautomountServiceAccountToken: 'yes'\n",
     "expected a boolean"),
    ("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\nspec: {}\n", 'unknown field "spec"'),
    ("apiVersion: v2\nkind: ServiceAccount\nmetadata: {name: sa}\n", "not supported"),
    ("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\nrules: [{resources: [pods]}]\n",
     "verbs"),
    ("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\n"
     "roleRef: {kind: Role, name: r, apiGroup: rbac.authorization.k8s.io}\n", 'Unsupported value: "Role"'),
    ("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\n", "roleRef"),
    ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: p}\nspec: {resources: {requests: "
     "{storage: 1Gi}}}\n", "accessModes"),
    ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: p}\nspec: {accessModes: [ReadWriteOnce]}\n",
     "requests.storage"),
    ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: p}\nspec: {accessModes: [ReadWriteOnce], "
     "resources: {requests: {storage: 2GiB}}}\n", "not a Kubernetes quantity"),
    ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: p}\nspec: {accessModes: [Sometimes], "
     "resources: {requests: {storage: 1Gi}}}\n", "Unsupported value"),
    ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: p}\nspec: {accessModes: [ReadWriteOnce], "
     "volumeMode: Block, resources: {requests: {storage: 1Gi}}}\n", "Filesystem"),
    ("apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: p}\nspec: {}\n", "read-only"),
    ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n", "read-only"),
    ("apiVersion: v1\nkind: Event\nmetadata: {name: e}\n", "read-only"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: 3\n", "type: expected a string"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, labels: {a: 1}}\n", "labels"),
])
def test_bad_input_is_one_line_and_nothing_of_the_batch_is_stored(cli: Cli, home: Path, tmp_path: Path,
                                                                   document: str, message: str) -> None:
    result = _apply(cli, tmp_path, NAMESPACE + "---\n" + CONFIG_MAP + "---\n" + CLAIM + "---\n" + document)
    assert message in _one_error(result)
    store = ResourceStore()
    for kind in ("Namespace", "ConfigMap", "PersistentVolumeClaim", "ServiceAccount", "Role", "RoleBinding"):
        assert store.list(kind, None) == [], kind
    assert ConfigStore(home).list("configmap") == [] and not (home / "volumes").exists()


# --- the server's routes ------------------------------------------------------------------------------------------

def _call(method: str, url: str, body: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, method=method, data=body.encode() if body is not None else None,
                                     headers={"Content-Type": "application/yaml"} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as failed:
        return failed.code, json.loads(failed.read())


def test_the_server_routes_reach_the_core_kinds(home: Path) -> None:
    from tests.server_support import Served

    served = Served()
    api = f"{served.url}/apis/millpond/v1"
    try:
        code, answer = _call("POST", f"{api}/fluid/apply", NAMESPACE + "---\n" + SECRET + "---\n" + ACCOUNTS)
        assert code == 200, answer
        assert [(i["kind"], i["name"], i["action"]) for i in answer["items"]][:3] == [
            ("Secret", "keys", "created"), ("Namespace", "team", "created"), ("ServiceAccount", "trainer", "created")]
        assert "s3cr3t" not in json.dumps(answer)
        code, listed = _call("GET", f"{api}/namespaces")
        assert code == 200 and [one["metadata"]["name"] for one in listed["items"]] == ["default", "team"]
        assert _call("GET", f"{api}/sa/trainer?namespace=team")[1]["kind"] == "ServiceAccount"
        code, nodes = _call("GET", f"{api}/nodes")
        assert code == 200 and len(nodes["items"]) == 1
        assert _call("GET", f"{api}/secrets")[1] == {"secrets": [{"name": "keys", "namespace": "team",
                                                                  "keys": ["access", "secret"]}]}
        assert _call("DELETE", f"{api}/namespaces/default")[0] == 403
        code, deleted = _call("DELETE", f"{api}/namespaces/team")
        assert code == 200 and deleted["message"] == 'namespace "team" deleted'
        assert _call("GET", f"{api}/secrets")[1] == {"secrets": []}
        assert _call("GET", f"{api}/serviceaccounts/trainer?namespace=team")[0] == 404
    finally:
        served.stop()


# --- what get -o json prints applies back unchanged (the Kubernetes API's update path) -------------------------

@pytest.mark.parametrize(("kind", "name"), [
    ("namespace", "team"), ("secret", "keys"), ("configmap", "settings"), ("serviceaccount", "trainer"),
    ("role", "reader"), ("rolebinding", "read"), ("clusterrole", "viewer"), ("clusterrolebinding", "view-all"),
    ("persistentvolumeclaim", "scratch"),
])
def test_an_object_as_get_prints_it_applies_back_unchanged(cli: Cli, home: Path, tmp_path: Path, kind: str,
                                                           name: str) -> None:
    batch = "---\n".join([NAMESPACE, SECRET, CONFIG_MAP, ACCOUNTS, CLAIM])
    assert _apply(cli, tmp_path, batch).code == 0
    args = ("-n", "team") if kind not in ("namespace", "clusterrole", "clusterrolebinding") else ()
    shown = cli("get", kind, name, *args, "-o", "json").json()
    again = _apply(cli, tmp_path, json.dumps(shown), "shown.json")
    assert again.code == 0 and again.out.endswith(f"/{name} unchanged\n"), (again.out, again.err)
    assert cli("get", kind, name, *args, "-o", "json").json() == shown


def test_in_cluster_mode_each_ray_node_is_a_node(cli: Cli, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from millpond.core import nodes
    from millpond.training.ray_top import RayNodeRow

    rows = [RayNodeRow("a" * 40, "10.0.0.1", "head", 4.0, 1.0, 8 * 2**30, 0.0, 1.0, 0.0),
            RayNodeRow("b" * 40, "10.0.0.2", "worker", 2.5, 0.0, 4 * 2**30, 0.0, 0.0, 0.0)]
    asked: list[str] = []
    monkeypatch.setattr(nodes, "ray_nodes", lambda address: asked.append(address) or rows)
    monkeypatch.setenv("MILLPOND_RAY_ADDRESS", "127.0.0.1:6379")
    table = _table(cli("get", "nodes").out)
    assert asked == ["127.0.0.1:6379"]
    assert [row[:3] for row in table[1:]] == [["a" * 12, "Ready", "head"], ["b" * 12, "Ready", "<none>"]]
    head = cli("get", "node", "a" * 12, "-o", "json").json()
    assert head["status"]["capacity"] == {"cpu": "4", "memory": "8388608Ki", "nvidia.com/gpu": "1"}
    assert cli("get", "node", "b" * 12, "-o", "json").json()["status"]["capacity"]["cpu"] == "2500m"


def test_a_secret_deleted_by_millpond_secret_is_gone_and_its_name_free(cli: Cli, home: Path, tmp_path: Path) -> None:
    assert _apply(cli, tmp_path, SECRET).code == 0
    ConfigStore(home).delete("secret", "keys", "team")  # what `millpond secret delete keys -n team` does
    assert _names(cli, "secrets", "-n", "team") == []
    again = _apply(cli, tmp_path, SECRET.replace("team", "default"))
    assert again.out == "secret/keys created\n", again.err
    assert [(r.namespace, r.name) for r in ResourceStore().list("Secret")] == [("default", "keys")]


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                     lambda children: st.lists(children, max_size=3)
                     | st.dictionaries(st.text(max_size=6), children, max_size=3), max_leaves=8)


def test_fuzzed_core_documents_are_applied_or_refused_in_one_line(home: Path) -> None:
    """Any shape of value in any field of any core kind: stored, or one UserError line; never another exception."""
    from millpond.core.kinds import KINDS, api_version
    from millpond.errors import UserError
    from millpond.kind_handler import ApplyBatch
    from millpond.settings import load_settings
    from millpond.store.config_documents import batch_lookup

    fields = st.sampled_from(["data", "stringData", "type", "immutable", "spec", "rules", "subjects", "roleRef",
                              "secrets", "metadata", "binaryData", "aggregationRule", "status"])

    @settings(max_examples=150, deadline=None)
    @given(st.sampled_from(sorted(KINDS)), st.dictionaries(fields, _JSON, max_size=3), st.booleans())
    def check(kind: str, body: dict[str, Any], named: bool) -> None:
        doc = {"apiVersion": api_version(KINDS[kind]), "kind": kind, **body}
        if named:
            doc["metadata"] = {"name": "x", **(body.get("metadata") if isinstance(body.get("metadata"), dict)
                                               else {})}
        documents = [("fuzz.yaml", 1, doc)]
        context = KindContext(load_settings())
        try:
            batch = ApplyBatch(context, lambda path, value: None, batch_lookup(documents, ConfigStore(home)))
            for plan in REGISTRY.plan(documents, batch):
                plan.apply(batch)
        except UserError as exc:
            assert "\n" not in str(exc)

    check()


def test_deleting_a_namespace_stops_its_running_job_and_its_pods(cli: Cli, home: Path, tmp_path: Path) -> None:
    """A batch/v1 Job running in the namespace is deleted through its handler (which stops its process), and no
    Pod view of it is left."""
    import time

    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sleeper", "namespace": "team"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": "python:3.12", "command": ["sleep", "300"]}]}}}}
    assert _apply(cli, tmp_path, NAMESPACE + "---\n" + json.dumps(job)).code == 0
    deadline = time.monotonic() + 60
    while not _names(cli, "pods", "-n", "team"):
        assert time.monotonic() < deadline, "the Job's pod never appeared"
        time.sleep(0.5)
    deleted = cli("delete", "namespace", "team")
    assert deleted.code == 0, deleted.err
    assert _names(cli, "jobs", "-n", "team") == [] and _names(cli, "pods", "-n", "team") == []
    assert "team" not in _names(cli, "namespaces")


def test_a_batch_jobs_events_are_v1_events_of_its_namespace(cli: Cli, home: Path, tmp_path: Path) -> None:
    """The Job controller's events (a family that records them) listed by ``get events`` with their times."""
    import time

    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "quick", "namespace": "team"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": "python:3.12", "command": ["true"]}]}}}}
    assert _apply(cli, tmp_path, json.dumps(job)).code == 0
    deadline = time.monotonic() + 60
    while True:
        listed = cli("get", "events", "-n", "team", "-o", "json").json()["items"]
        if any(event["reason"] == "Completed" for event in listed):
            break
        assert time.monotonic() < deadline, listed
        time.sleep(0.5)
    involved = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in listed}
    assert ("Job", "quick") in involved
    first = next(e for e in listed if e["involvedObject"]["kind"] == "Job")
    assert first["firstTimestamp"].endswith("Z") and first["source"]["component"]
