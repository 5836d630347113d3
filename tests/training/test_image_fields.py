"""What a training job keeps of its pod templates' images (no container runtime needed): the fields read from a
manifest, Arena's flags, a TrainJob's trainer over its runtime, the stored spec, the argv and folder an
instance runs with in its image, and the pull secrets a namespace lends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from millpond.errors import UserError
from millpond.runners.base import InImage
from millpond.runners.containers.runtimes import ContainerRuntime
from millpond.settings import load_settings
from millpond.training.builder import CommonArgs, mpi_spec, pytorch_spec
from millpond.training.images import RoleRuntime, cwd_in_image, for_instance, host_note, instance_argv, ran_in
from millpond.training.kinds import KINDS
from millpond.training.manifests import replica_job_spec
from millpond.training.pull_secrets import pull_secrets
from millpond.training.spec import ContainerImage, spec_from_json, spec_to_json
from millpond.training.trainjobs import trainjob_spec

GIB = 2**30


def _pytorchjob(container: dict[str, Any], pod: dict[str, Any] | None = None,
                annotations: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "pytorch", **container}], **(pod or {})}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "team"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template}}}}


def test_a_manifest_keeps_the_image_its_pull_fields_limits_and_shm() -> None:
    body = _pytorchjob(
        {"image": "registry.local:5000/train:1", "imagePullPolicy": "Never", "args": ["--epochs", "2"],
         "resources": {"limits": {"memory": "1Gi", "cpu": "1500m"}, "requests": {"cpu": "1"}},
         "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]},
        {"imagePullSecrets": [{"name": "regcred"}], "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory",
                                                                                              "sizeLimit": "2Gi"}}]},
        {"millpond.io/runtime": "container"})
    spec, _ = replica_job_spec(KINDS["PyTorchJob"], body)
    image = spec.replicas[0].image
    assert image == ContainerImage("registry.local:5000/train:1", "Never", ("regcred",), args_only=True,
                                   args=("--epochs", "2"), memory_bytes=GIB, cpus=1.5, shm_bytes=2 * GIB,
                                   runtime="container")
    assert "no command" in spec.replicas[0].command[2]  # on the host: it fails saying why
    assert spec_from_json(json.loads(json.dumps(spec_to_json(spec)))) == spec


def test_a_command_is_not_args_only_and_no_image_is_none() -> None:
    spec, _ = replica_job_spec(KINDS["PyTorchJob"], _pytorchjob({"image": "x:1", "command": ["python", "t.py"],
                                                                 "args": ["-v"]}))
    assert spec.replicas[0].image == ContainerImage("x:1")
    spec, _ = replica_job_spec(KINDS["PyTorchJob"], _pytorchjob({"command": ["true"]}))
    assert spec.replicas[0].image is None and "image" not in json.dumps(spec_to_json(spec)["replicas"])


def test_a_bad_pull_policy_is_refused_naming_its_field() -> None:
    with pytest.raises(UserError, match=r"containers\[0\]\.imagePullPolicy: \"Sometimes\" is not one of"):
        replica_job_spec(KINDS["PyTorchJob"], _pytorchjob({"image": "x:1", "imagePullPolicy": "Sometimes",
                                                           "command": ["true"]}))


def test_arena_image_flags_reach_every_replica() -> None:
    args = CommonArgs(name="a", command=("python", "t.py"), image="train:2", image_pull_policy="IfNotPresent",
                      image_pull_secrets=("regcred",), workers=2, memory="512Mi", cpu="2", share_memory="1Gi")
    spec = pytorch_spec(args)
    assert {r.role: r.image for r in spec.replicas} == dict.fromkeys(
        ("master", "worker"), ContainerImage("train:2", "IfNotPresent", ("regcred",), memory_bytes=512 * 2**20,
                                             cpus=2.0, shm_bytes=GIB))
    assert all(r.image is not None for r in mpi_spec(CommonArgs(name="m", command=("mpirun",), image="mpi:1")).replicas)
    with pytest.raises(UserError, match="--image-pull-policy 'Sometimes'"):
        pytorch_spec(CommonArgs(name="b", command=("true",), image="x", image_pull_policy="Sometimes"))
    assert pytorch_spec(CommonArgs(name="c", command=("true",))).replicas[0].image is None


def test_a_trainjobs_trainer_overrides_its_runtimes_image_and_command() -> None:
    runtime = {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [{
        "name": "node", "template": {"spec": {"template": {
            "metadata": {"annotations": {"millpond.io/runtime": "podman"}},
            "spec": {"containers": [{"name": "node", "image": "base:1", "command": ["torchrun", "t.py"]}]}}}}}]}}}
    body = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "default"},
            "spec": {"runtimeRef": {"name": "mine"}, "trainer": {"image": "mine:2", "args": ["--lr", "1"]}}}
    spec, _ = trainjob_spec(body, lambda kind, name, namespace: {"spec": runtime})
    image = spec.replicas[0].image
    assert image is not None and (image.image, image.args_only, image.runtime) == ("mine:2", False, "podman")
    assert spec.replicas[0].command == ("torchrun", "t.py", "--lr", "1")


def _runtime() -> ContainerRuntime:
    return ContainerRuntime("podman", "/usr/bin/podman")


def test_an_instance_in_its_image_runs_the_images_torchrun_and_entrypoint_in_its_folder() -> None:
    host = ("/venv/bin/python", "-m", "torch.distributed.run")
    assert instance_argv((*host, "--no-python", "sh", "-c", "x"), ContainerImage("i"), host) == (
        "torchrun", "--no-python", "sh", "-c", "x")
    assert instance_argv(("sh", "-c", "fails"), ContainerImage("i", args_only=True, args=("a",)), ()) == ("a",)
    role = RoleRuntime(InImage(_runtime(), "i", labels={"io.millpond.owner": "PyTorchJob/default/j"}),
                       ContainerImage("i"), workdir="/app")
    assert cwd_in_image(role, "", Path("/home/j/work")) == Path("/app")
    assert cwd_in_image(role, "/w", Path("/home/j/work")) == Path("/w")
    assert cwd_in_image(RoleRuntime(role.in_image, role.image), "", Path("/home/j/work")) == Path("/home/j/work")
    labelled = for_instance(role, "j-master-0")
    assert labelled is not None and labelled.labels["io.millpond.instance"] == "j-master-0"
    assert host_note(role) == ""
    on_host = RoleRuntime(None, ContainerImage("i"), reason="the runtime policy is host")
    assert host_note(on_host) == " (it ran on this machine, not in its image i: the runtime policy is host)"
    assert ran_in({"launcher": {"runtime": "podman"}}, "worker", "launcher") == {"millpond.io/ran-in": "podman"}
    assert ran_in({"pod": {"runtime": "host", "reason": "why"}}, "pod") == {"millpond.io/ran-in": "host: why"}


def test_pull_secrets_are_read_from_the_jobs_namespace_and_the_rest_skipped_with_a_warning(
        cli, home: Path, tmp_path: Path) -> None:
    config = json.dumps({"auths": {"registry.local:5000": {"auth": "dXNlcjpwYXNz"}}})
    docs = [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
             "type": kind, "stringData": {key: config}}
            for name, namespace, kind, key in (
                ("regcred", "team", "kubernetes.io/dockerconfigjson", ".dockerconfigjson"),
                ("elsewhere", "other", "kubernetes.io/dockerconfigjson", ".dockerconfigjson"),
                ("opaque", "team", "Opaque", "token"))]
    path = tmp_path / "secrets.yaml"
    path.write_text("\n---\n".join(json.dumps(doc) for doc in docs))
    assert cli("apply", "-f", path).code == 0
    warnings = tmp_path / "log"
    with open(warnings, "wb") as log:
        found = pull_secrets(("regcred", "elsewhere", "opaque", "missing"), "team", load_settings(), log)
    assert found == ({"auths": {"registry.local:5000": {"auth": "dXNlcjpwYXNz"}}},)
    said = warnings.read_text()
    assert "Secret team/elsewhere does not exist" in said and "Secret team/missing does not exist" in said
    assert "Secret team/opaque is of type Opaque" in said
