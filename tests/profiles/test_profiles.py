"""Kubeflow Profiles as the profile controller makes them, and ResourceQuotas, through ``millpond apply/get/delete``
and ``millpond profile``: the namespace with the controller's labels and owner annotation, the owner's
``namespaceAdmin`` RoleBinding, ``default-editor``/``default-viewer``, ``kf-resource-quota`` made and removed
with ``resourceQuotaSpec``, a namespace owned by someone else refused with the controller's words, the
namespace deleted with its Profile; bad input is one line, exit 2, nothing stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.core.contributors import binding_name
from millpond.store.resources import ResourceStore

Cli = Callable[..., Any]

PROFILE = """\
apiVersion: kubeflow.org/{version}
kind: Profile
metadata: {{name: team-a}}
spec:
  owner: {{kind: User, name: alice@example.com}}
{quota}"""
QUOTA = """\
  resourceQuotaSpec:
    hard: {cpu: "2", memory: 2Gi, requests.nvidia.com/gpu: "1", persistentvolumeclaims: "1", requests.storage: 5Gi}
"""


def _apply(cli: Cli, tmp_path: Path, text: str) -> Any:
    path = tmp_path / "doc.yaml"
    path.write_text(text)
    return cli("apply", "-f", path)


def _get(cli: Cli, *args: str) -> Any:
    result = cli("get", *args, "-o", "yaml")
    assert result.code == 0, result.err
    return yaml.safe_load(result.out)


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_a_profile_makes_its_namespace_bindings_accounts_and_quota_as_the_controller_does(
        cli: Cli, tmp_path: Path, version: str) -> None:
    result = _apply(cli, tmp_path, PROFILE.format(version=version, quota=QUOTA))
    assert result.code == 0 and result.out.strip() == "profile.kubeflow.org/team-a created", result.err
    profile = _get(cli, "profile", "team-a")
    assert profile["apiVersion"] == "kubeflow.org/v1" and "namespace" not in profile["metadata"]
    assert profile["status"]["conditions"][0]["type"] == "Successful"
    namespace = _get(cli, "namespace", "team-a")
    assert namespace["metadata"]["annotations"] == {"owner": "alice@example.com"}
    labels = namespace["metadata"]["labels"]
    for key, value in {"app.kubernetes.io/part-of": "kubeflow-profile", "pipelines.kubeflow.org/enabled": "true",
                       "katib.kubeflow.org/metrics-collector-injection": "enabled",
                       "serving.kubeflow.org/inferenceservice": "enabled", "istio-injection": "enabled"}.items():
        assert labels[key] == value
    bindings = {b["metadata"]["name"]: b for b in _get(cli, "rolebindings", "-n", "team-a")["items"]}
    admin = bindings["namespaceAdmin"]
    assert admin["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": "kubeflow-admin"}
    assert admin["subjects"] == [{"kind": "User", "name": "alice@example.com",
                                  "apiGroup": "rbac.authorization.k8s.io"}]
    assert admin["metadata"]["annotations"] == {"user": "alice@example.com", "role": "admin"}
    assert bindings["default-editor"]["roleRef"]["name"] == "kubeflow-edit"
    assert bindings["default-viewer"]["subjects"] == [{"kind": "ServiceAccount", "name": "default-viewer",
                                                       "namespace": "team-a"}]
    accounts = {a["metadata"]["name"] for a in _get(cli, "serviceaccounts", "-n", "team-a")["items"]}
    assert {"default", "default-editor", "default-viewer"} <= accounts
    quota = _get(cli, "resourcequota", "kf-resource-quota", "-n", "team-a")
    assert quota["status"]["hard"]["requests.nvidia.com/gpu"] == "1"
    assert quota["status"]["used"] == {"cpu": "0", "memory": "0", "requests.nvidia.com/gpu": "0",
                                       "persistentvolumeclaims": "0", "requests.storage": "0"}
    table = cli("get", "quota", "-n", "team-a").out
    assert "requests.nvidia.com/gpu: 0/1" in table and "persistentvolumeclaims: 0/1" in table

    assert _apply(cli, tmp_path, PROFILE.format(version=version, quota="")).code == 0  # the quota dropped
    assert ResourceStore().get("ResourceQuota", "kf-resource-quota", "team-a") is None

    deleted = cli("delete", "profile", "team-a")
    assert deleted.code == 0, deleted.err
    assert ResourceStore().list("RoleBinding", "team-a") == [] and ResourceStore().get("Namespace", "team-a") is None
    assert "team-a" not in cli("get", "namespaces").out


def test_a_namespace_someone_else_made_is_not_taken_over(cli: Cli, tmp_path: Path) -> None:
    assert _apply(cli, tmp_path, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n").code == 0
    assert _apply(cli, tmp_path, PROFILE.format(version="v1", quota=QUOTA)).code == 0  # stored, as kubectl's
    (condition,) = _get(cli, "profile", "team-a")["status"]["conditions"]
    assert condition == {"type": "Failed", "status": "True",
                         "message": "namespace already exist, but not owned by profile creator alice@example.com"}
    assert ResourceStore().list("RoleBinding", "team-a") == []
    assert cli("delete", "profile", "team-a").code == 0
    assert ResourceStore().get("Namespace", "team-a") is not None  # not the profile's: left alone
    refused = cli("profile", "create", "team-a", "--owner", "alice@example.com")  # the CLI refuses it up front
    assert refused.code == 2 and refused.err.strip() == (
        "error: profile team-a: namespace already exist, but not owned by profile creator alice@example.com")
    assert ResourceStore().get("Profile", "team-a") is None


def test_a_profile_adopts_a_namespace_only_implied_by_objects_applied_with_it(cli: Cli, tmp_path: Path) -> None:
    queue = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, namespace: team-a}\n"
             "spec: {clusterQueue: cq}\n---\n")
    assert _apply(cli, tmp_path, queue + PROFILE.format(version="v1", quota=QUOTA)).code == 0
    assert _get(cli, "profile", "team-a")["status"]["conditions"][0]["type"] == "Successful"


@pytest.mark.parametrize(("text", "message"), [
    (PROFILE.format(version="v2", quota=""), 'Profile: apiVersion "kubeflow.org/v2" is not supported'),
    ("apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: team-a}\nspec: {}\n",
     "spec.owner: Required value"),
    ("apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: Team.A}\nspec: {owner: {kind: User, name: a}}\n",
     "metadata.name"),
    (PROFILE.format(version="v1", quota="  resourceQuotaSpec: {hard: {cpu: lots}}\n"), "'lots' is not a Kubernetes"),
    (PROFILE.format(version="v1", quota="  resourceQuotaSpec: {hard: {cpu: '-1'}}\n"), "must be greater than or"),
    ("apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: team-a}\n"
     "spec: {owner: {kind: Robot, name: a}}\n", 'spec.owner.kind: Unsupported value: "Robot"'),
    ("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: x}\nspec: {hard: {pods: ten}}\n",
     "'ten' is not a Kubernetes quantity"),
    ("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: x}\nspec: {limits: {}}\n",
     'unknown field "limits"'),
])
def test_bad_profiles_and_quotas_are_one_line_and_nothing_is_stored(cli: Cli, tmp_path: Path, text: str,
                                                                     message: str) -> None:
    result = _apply(cli, tmp_path, text)
    assert result.code == 2 and result.out == "", result.out
    assert len(result.err.strip().splitlines()) == 1 and message in result.err, result.err
    assert ResourceStore().list("Profile") == [] and ResourceStore().list("ResourceQuota") == []


def test_a_quota_counts_claims_and_objects_in_its_namespace(cli: Cli, tmp_path: Path) -> None:
    text = """\
apiVersion: v1
kind: ResourceQuota
metadata: {name: objects, namespace: lab}
spec: {hard: {persistentvolumeclaims: "2", requests.storage: 10Gi, count/configmaps: "5", pods: "4"}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: lab}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 3Gi}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: lab}
data: {mode: fast}
"""
    assert _apply(cli, tmp_path, text).code == 0
    used = _get(cli, "resourcequota", "objects", "-n", "lab")["status"]["used"]
    assert used == {"persistentvolumeclaims": "1", "requests.storage": "3Gi", "count/configmaps": "1", "pods": "0"}


def test_the_profile_commands_are_a_convenience_over_the_same_objects(cli: Cli) -> None:
    created = cli("profile", "create", "team-vision", "--owner", "alice@example.com",
                  "--quota", "requests.nvidia.com/gpu=2,pods=10")
    assert created.code == 0 and created.out.strip() == "profile.kubeflow.org/team-vision created", created.err
    row = ResourceStore().get("Profile", "team-vision")
    assert row is not None and row.spec["resourceQuotaSpec"] == {"hard": {"requests.nvidia.com/gpu": "2",
                                                                          "pods": "10"}}
    added = cli("profile", "add-contributor", "team-vision", "Bob.Smith@Example.com", "--role", "view")
    name = "user-bob-smith-example-com-clusterrole-view"
    assert added.code == 0 and added.out.strip() == f"rolebinding.rbac.authorization.k8s.io/{name} created"
    assert binding_name("User", "Bob.Smith@Example.com", "ClusterRole", "view") == name
    binding = ResourceStore().get("RoleBinding", name, "team-vision")
    assert binding is not None and binding.manifest["roleRef"]["name"] == "kubeflow-view"
    assert binding.manifest["metadata"]["annotations"] == {"user": "Bob.Smith@Example.com", "role": "view"}
    again = cli("profile", "add-contributor", "team-vision", "Bob.Smith@Example.com", "--role", "view")
    assert again.code == 2 and "already exists" in again.err
    listed = cli("profile", "contributors", "team-vision").out.split()
    assert listed == ["USER", "ROLE", "alice@example.com", "admin", "Bob.Smith@Example.com", "view"]
    assert "team-vision" in cli("profile", "list").out and "requests.nvidia.com/gpu=2" in cli("profile", "list").out
    removed = cli("profile", "remove-contributor", "team-vision", "Bob.Smith@Example.com")
    assert removed.code == 0 and ResourceStore().get("RoleBinding", name, "team-vision") is None
    owner = cli("profile", "remove-contributor", "team-vision", "alice@example.com")  # the owner is no contributor
    assert owner.code == 2 and ResourceStore().get("RoleBinding", "namespaceAdmin", "team-vision") is not None
    for args, message in ((("add-contributor", "nosuch", "x@y.z"), 'profiles.kubeflow.org "nosuch" not found'),
                          (("create", "x", "--owner", "a", "--quota", "gpus"), "--quota: 'gpus': use RESOURCE=AMOUNT"),
                          (("add-contributor", "team-vision", "x@y.z", "--role", "owner"), "Invalid value")):
        result = cli("profile", *args)
        assert result.code == 2 and message in result.err, result.err
    assert cli("profile", "delete", "team-vision").code == 0
    assert ResourceStore().list("Profile") == [] and ResourceStore().list("RoleBinding", "team-vision") == []
