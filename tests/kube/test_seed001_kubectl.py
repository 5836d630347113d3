"""Seed 001's dataset steps with the seed's own kubectl commands (examples/fluid_resnet/kubectl_flow.sh):
``kubectl create -f dataset.yaml``, ``kubectl describe alluxioruntime imagenet``, ``kubectl describe
dataset``, ``kubectl get pv,pvc``, against a real server over a SeaweedFS bucket."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube_support import Kubectl, kubectl_binary, kubectl_for
from tests.s3_server import S3Server
from tests.server_support import Served, module_home

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "fluid_resnet" / "kubectl_flow.sh"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "seed001-kubectl"):
        server = Served()
        yield server
        server.stop()


def test_seed_001s_kubectl_commands_as_written(served: Served, s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.create_bucket()
    fs = s3_server.filesystem()
    for index in range(3):
        fs.pipe(f"{bucket}/imagenet/train/n0{index}/img{index}.JPEG", b"x" * (1000 + index))
    kubectl: Kubectl = kubectl_for(served, tmp_path / "kubectl")
    env = {**os.environ, **s3_server.env(), "BUCKET": bucket, "S3_ENDPOINT": s3_server.endpoint_url,
           "S3_REGION": s3_server.region, "KUBECONFIG": str(kubectl.config), "KUBECTL": kubectl_binary()}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "secret/imagenet-s3 created" in out
    assert "dataset.data.fluid.io/imagenet created" in out and "alluxioruntime.data.fluid.io/imagenet created" in out
    runtime, dataset = out.split("Kind:         AlluxioRuntime", 1)[1].split("Kind:         Dataset", 1)
    for shown in ("Master Phase:                     Ready", "Worker Phase:                     Ready",
                  "Fuse Phase:                       Ready"):
        assert shown in runtime, runtime
    dataset_fields = [" ".join(line.split()) for line in dataset.splitlines()]
    for shown in ("Phase: Bound", "Reason: DatasetReady", "Type: alluxio", "Category: Accelerate", "File Num: 3",
                  "Ufs Total: 2.93KiB"):
        assert shown in dataset_fields, dataset
    lines = out.split("persistentvolume/", 1)[1].splitlines()
    assert lines[0].split()[0] == "default-imagenet" and "Bound" in lines[0] and "default/imagenet" in lines[0]
    claim = next(line for line in lines if line.startswith("persistentvolumeclaim/imagenet"))
    assert claim.split()[1:3] == ["Bound", "default-imagenet"]
    assert s3_server.secret_key not in out + done.stderr  # the Secret's value never printed
