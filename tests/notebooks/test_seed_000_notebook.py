"""Seed 000 as a notebook (examples/fluid_mnist/seed_000.ipynb), executed cell by cell INSIDE a millpond Notebook:
applied with the real ``kubectl`` to a real ``millpond server``, ``train.py`` uploaded through Jupyter's contents
API, a real kernel started through the notebook server's REST API and driven over the proxied WebSocket
(``kernel_channels``). Its Fluid steps and its ``arena submit`` land in the same millpond: the Dataset, the five
data operations and the Arena job exist afterwards, and the trained checkpoint is in the SeaweedFS bucket,
where it loads and predicts; the seed's last cell then cleans the dataset up. The data is the example test's
(MNIST-format files made from scikit-learn's digits), trained for two epochs on the CPU when there is no GPU."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from millpond.datasets.mounts import fuse_available
from millpond.runners.sandbox import sandbox_problem
from millpond.scheduling.machine import capacity
from tests.kube_support import Kubectl, kubectl_for
from tests.notebooks.kernel_channels import KernelChannels
from tests.notebooks.support import ending_notebooks, kernel_channels, request
from tests.server_support import Served

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fluid_mnist"
STEPS = [("torch-mnist-training-step1", "datamigrate"), ("torch-mnist-training-step2", "dataprocess"),
         ("torch-mnist-training-step3", "dataload"), ("torch-mnist-training-step4", "dataprocess"),
         ("torch-mnist-training-step5", "datamigrate")]


def _missing() -> str | None:
    for package, hint in (("torch", "PyTorch"), ("sklearn", "scikit-learn"), ("jupyterlab", "JupyterLab")):
        if importlib.util.find_spec(package) is None:
            return f"{hint} is not installed"
    problem = fuse_available() or sandbox_problem()
    return None if problem is None else f"the dataflow needs FUSE and a mount namespace: {problem}"


pytestmark = [pytest.mark.timeout(900), pytest.mark.s3,
              pytest.mark.skipif(_missing() is not None, reason=str(_missing()))]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"fluid_mnist_{name}", EXAMPLE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def served(home: Path) -> Iterator[Served]:
    yield from ending_notebooks(Served())


def _arena(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "arena"), *args], capture_output=True, text=True,
                          timeout=60, check=False, env={"PATH": "/usr/bin:/bin", "MILLPOND_HOME": str(home)})


def test_seed_000_runs_cell_by_cell_in_a_millpond_notebook(served: Served, home: Path, s3_server,
                                                             tmp_path: Path) -> None:
    import torch

    kubectl: Kubectl = kubectl_for(served, tmp_path / "kubectl")
    bucket = s3_server.create_bucket()
    make_data = _load("make_data")
    make_data.upload(make_data.mnist_files(), bucket, "mnist", s3_server.endpoint_url, s3_server.access_key,
                     s3_server.secret_key)  # the seed's prerequisite: the raw MNIST files in object storage
    for secret in ("jfs-secret", "oss-access-creds"):  # the seed's prerequisite: its two Secrets, with kubectl
        kubectl.ok("create", "secret", "generic", secret, f"--from-literal=access-key={s3_server.access_key}",
                   f"--from-literal=secret-key={s3_server.secret_key}")
    env = [{"name": "AWS_ENDPOINT_URL", "value": s3_server.endpoint_url}, {"name": "S3_BUCKET", "value": bucket},
           {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "jfs-secret", "key": "access-key"}}}]
    if not capacity().gpus:  # the seed's --gpus=1 runs on the CPU here, as `millpond config set gpu-fallback cpu`
        env.append({"name": "MILLPOND_GPU_FALLBACK", "value": "cpu"})
    kubectl.ok("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": "fluid-demo"},
        "spec": {"template": {"spec": {"containers": [{"name": "fluid-demo", "image": "jupyter-pytorch",
                                                       "env": env}]}}}}))
    kubectl.ok("wait", "--for=condition=Ready", "notebook/fluid-demo", "--timeout=180s")
    base = f"{served.url}/notebook/default/fluid-demo"
    status, text = request(f"{base}/api/contents/train.py", "PUT", {
        "type": "file", "format": "text", "content": (EXAMPLE / "train.py").read_text()})
    assert status in (200, 201), text
    kernel = KernelChannels(kernel_channels(base))
    notebook = nbformat.read(EXAMPLE / "seed_000.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    started = time.monotonic()
    try:
        for cell in code[:-1]:  # all but the clean-up
            kernel.run_cell(cell, timeout=600 if "run.wait()" in cell.source else 120)
        elapsed = time.monotonic() - started
        shown = "".join(str(o.get("text", "")) for cell in code for o in cell.outputs)
        for name, kind in STEPS:
            assert f"{name} completed" in shown, shown[-3000:]
            phase = kubectl.json("get", kind, name)["status"]["phase"]
            assert phase == "Complete", (name, phase)
        assert kubectl.json("get", "dataset", "mydataset")["status"]["phase"] == "Bound"
        job = _arena(home, "get", "mnist-pytorch", "-o", "json")
        assert job.returncode == 0, job.stderr
        assert json.loads(job.stdout)["status"] == "SUCCEEDED"
        assert "saved /data/ckpt/mnist_cnn.pt" in _arena(home, "logs", "mnist-pytorch").stdout
        checkpoint = s3_server.filesystem().cat_file(f"{bucket}/mnist_ckpt/mnist_cnn.pt")  # cell 12's archive
        state = torch.load(io.BytesIO(checkpoint), weights_only=True)
        train = _load("train")
        model = train.Net()
        model.load_state_dict(state)
        digits = make_data.digits_as_mnist()
        x = (torch.from_numpy(digits["t10k-images"]).float().unsqueeze(1) / 255.0 - 0.1307) / 0.3081
        assert train.accuracy(model, x, torch.from_numpy(digits["t10k-labels"]).long()) > 0.8
        kernel.run_cell(code[-1])  # the seed's last cell: the dataset cleaned up
        assert kubectl.run("get", "dataset", "mydataset").returncode != 0
    finally:
        kernel.close()
        nbformat.write(notebook, tmp_path / "seed_000.executed.ipynb")
        subprocess.run([str(Path(sys.executable).parent / "millpond"), "delete", "dataset", "mydataset"],
                       capture_output=True, check=False, timeout=60)
    nbformat.validate(notebook)
    print(f"seed 000's cells ran in {elapsed:.1f} s; executed notebook: {tmp_path / 'seed_000.executed.ipynb'}")
