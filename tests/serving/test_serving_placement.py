"""Where a custom predictor runs, without a container runtime: the fields read for its image, what apply
refuses, the pull request made of it, and the words the runtime's ``run`` gets (tests/containers runs them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.errors import TaskFailure, UserError
from millpond.runners.containers.images import ImagePullError
from millpond.runners.containers.policy import ANNOTATION
from millpond.serving import placement
from millpond.serving.spec import predictor_spec
from millpond.store.secrets import ConfigStore

API = "serving.kserve.io/v1beta1"


def isvc(container: dict[str, Any], annotations: dict[str, str] | None = None, **predictor: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "m", "namespace": "default"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": API, "kind": "InferenceService", "metadata": metadata,
            "spec": {"predictor": {**predictor, "containers": [{"name": "kserve-container", **container}]}}}


def test_a_custom_containers_image_fields_are_read_as_kserve_and_the_kubelet_read_them(monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_RUNTIME", "podman")
    spec = predictor_spec(isvc({"image": "reg.example:5000/team/server:2", "imagePullPolicy": "Never",
                                "ports": [{"containerPort": 9000}], "workingDir": "/app",
                                "env": [{"name": "STORAGE_URI", "value": "file:///srv/models/m"}],
                                "resources": {"limits": {"memory": "256Mi", "cpu": "500m"}}},
                               imagePullSecrets=[{"name": "regcred"}, {"name": "other"}]))
    container = spec.container
    assert (container.image_pull_policy, container.memory_limit, container.cpu_limit) == ("Never", 256 << 20, 0.5)
    assert container.port == 9000 and container.port_declared and container.working_dir == "/app"
    assert spec.image_pull_secrets == ("regcred", "other") and spec.runtime_policy == "podman"
    assert spec.storage is not None and spec.storage.uri == "file:///srv/models/m"  # KServe's STORAGE_URI
    assert spec.unservable is None  # no command: its image's entrypoint runs it
    annotated = predictor_spec(isvc({"image": "server:1"}, {ANNOTATION: "host"}))
    assert annotated.runtime_policy == "host" and "the container has no command" in str(annotated.unservable)


@pytest.mark.parametrize(("document", "says"), [
    (isvc({"image": "s:1", "command": ["x"]}, {ANNOTATION: "kubernetes"}),
     "metadata.annotations.millpond.io/runtime: 'kubernetes' takes one of: auto, host, container, podman, docker"),
    (isvc({"image": "s:1", "command": ["x"], "imagePullPolicy": "Sometimes"}),
     "spec.predictor.containers[0].imagePullPolicy: Unsupported value: 'Sometimes'"),
])
def test_apply_refuses_a_runtime_or_pull_policy_kubernetes_does_not_know(cli, tmp_path: Path, document: dict[str, Any],
                                                                         says: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(document))
    result = cli("apply", "-f", path)
    assert result.code == 2 and result.err.count("\n") == 1 and says in result.err, result.err
    assert cli("get", "isvc").out == "" or "m " not in cli("get", "isvc").out


def test_the_pull_request_carries_the_pull_secrets_and_warns_of_a_missing_one(home: Path) -> None:
    config = {"auths": {"reg.example:5000": {"auth": "dTpw"}}}
    ConfigStore(home).create("secret", "regcred", {".dockerconfigjson": json.dumps(config)})
    ConfigStore(home).create("secret", "plain", {"password": "p"})
    spec = predictor_spec(isvc({"image": "reg.example:5000/s:1", "args": ["--port", "8080"]},
                               imagePullSecrets=[{"name": "regcred"}, {"name": "gone"}]))
    asked, warnings = placement.request(spec, ConfigStore(home))
    assert asked is not None and asked.pull_secrets == (config,) and asked.args_only and asked.image.endswith("s:1")
    assert warnings == ["Unable to retrieve some image pull secrets (gone); attempting to pull the image may not "
                        "succeed."]
    broken = predictor_spec(isvc({"image": "s:1"}, imagePullSecrets=[{"name": "plain"}]))
    with pytest.raises(TaskFailure, match='secret "plain" has no .dockerconfigjson key'):
        placement.request(broken, ConfigStore(home))
    sklearn = predictor_spec({"apiVersion": API, "kind": "InferenceService", "metadata": {"name": "s"},
                              "spec": {"predictor": {"sklearn": {"storageUri": "file:///m"}}}})
    assert placement.request(sklearn, ConfigStore(home)) == (None, [])  # millpond's own server: always this host


def test_host_places_it_on_this_host_saying_why(home: Path) -> None:
    spec = predictor_spec(isvc({"image": "s:1", "command": ["serve"]}, {ANNOTATION: "host"}))
    assert placement.place(spec, ConfigStore(home)) == placement.Placement(None, "the runtime policy is host")


def test_the_working_folder_is_the_images_and_nothing_else_changes() -> None:
    words = ["podman", "run", "-v", "/w:/w", "-w", "/w", "-e", "PORT", "img", "serve"]
    assert placement.working_folder(words, "/app") == ["podman", "run", "-v", "/w:/w", "-w", "/app", "-e", "PORT",
                                                       "img", "serve"]
    with pytest.raises(UserError):
        predictor_spec(isvc({"image": "s:1", "command": ["x"]}, {ANNOTATION: "nowhere"}))


def test_a_decision_settles_as_the_kubelet_reports_it() -> None:
    spec = predictor_spec(isvc({"image": "reg.example/s:1"}, {ANNOTATION: "container"}))
    failed = placement.settle(spec, ImagePullError("ErrImagePull", 'pulling image "reg.example/s:1": unauthorized'))
    assert failed.placement is None and failed.retry
    assert failed.failure == ("ErrImagePull", 'pulling image "reg.example/s:1": unauthorized')
    assert [e[1:] for e in failed.events] == [
        ("Failed", 'Failed to pull image "reg.example/s:1": pulling image "reg.example/s:1": unauthorized'),
        ("Failed", "Error: ErrImagePull")]
    backoff = placement.settle(spec, ImagePullError("ImagePullBackOff", 'Back-off pulling image "reg.example/s:1"'))
    assert backoff.failure is not None and backoff.failure[0] == "ImagePullBackOff"
    assert backoff.events[0][1] == "BackOff"
    host = placement.settle(spec, placement.Placement(None, "no container runtime works here (podman is missing)"))
    assert host.placement is None and not host.retry and host.failure is not None
    assert host.failure[0] == "InvalidPredictorSpec" and "podman is missing" in host.failure[1]
    assert [e[1] for e in host.events] == ["ImageNotUsed"]
    commanded = predictor_spec(isvc({"image": "reg.example/s:1", "command": ["serve"]}))
    fallback = placement.settle(commanded, placement.Placement(None, "the image could not be had"))
    assert fallback.placement == placement.Placement(None, "the image could not be had") and fallback.failure is None
    assert "the command runs on this host: the image could not be had" in fallback.said
    crashed = placement.settle(commanded, RuntimeError("boom"))
    assert crashed.failure == ("RunContainerError", "RuntimeError: boom")
