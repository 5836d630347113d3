"""Profiles and ResourceQuotas through the Kubernetes API with the real ``kubernetes`` client, as Kubeflow's
tools reach them: ``kubeflow.org/v1`` (and ``v1beta1``) profiles at the cluster scope, the namespace they make
read back with ``CoreV1Api``, a ResourceQuota's status with what its namespace uses, and the namespace gone
with its Profile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.server_support import Served


@pytest.fixture
def api(home: Path) -> Iterator[client.ApiClient]:
    served = Served()
    configuration = client.Configuration()
    configuration.host = served.url
    yield client.ApiClient(configuration)
    served.stop()


def test_a_profile_through_the_kubernetes_api(api: client.ApiClient) -> None:
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    profile = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Profile", "metadata": {"name": "team-k"},
               "spec": {"owner": {"kind": "User", "name": "alice@example.com"},
                        "resourceQuotaSpec": {"hard": {"requests.cpu": "4", "pods": "10"}}}}
    created = custom.create_cluster_custom_object("kubeflow.org", "v1beta1", "profiles", profile)
    assert created["metadata"]["name"] == "team-k"
    listed = custom.list_cluster_custom_object("kubeflow.org", "v1", "profiles")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["team-k"]
    namespace = core.read_namespace("team-k")
    assert namespace.metadata.annotations == {"owner": "alice@example.com"}
    assert namespace.metadata.labels["app.kubernetes.io/part-of"] == "kubeflow-profile"
    quota = core.read_namespaced_resource_quota("kf-resource-quota", "team-k")
    assert quota.spec.hard == {"requests.cpu": "4", "pods": "10"}
    assert quota.status.hard == {"requests.cpu": "4", "pods": "10"} and quota.status.used == {"requests.cpu": "0",
                                                                                            "pods": "0"}
    custom.delete_cluster_custom_object("kubeflow.org", "v1", "profiles", "team-k")
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_resource_quota("kf-resource-quota", "team-k")
    assert missing.value.status == 404
    assert "team-k" not in [item.metadata.name for item in core.list_namespace().items]
