"""examples/fluid_mnist: seed 000's dataflow (Fluid SDK) end to end against a SeaweedFS bucket.

MNIST-format files made from scikit-learn's digits are uploaded to the bucket; the example
migrates them into a juicefs:/// ReadWrite dataset, decompresses them with the seed's bash
script, preloads them, trains a CNN on the CPU (PyTorch) whose checkpoint lands in the dataset,
and migrates the checkpoint back to the bucket, where this test loads it and checks it predicts.
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available
from millpond.runners.sandbox import sandbox_problem

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "fluid_mnist"
STEPS = [
    ("torch-mnist-training-step1", "DataMigrate"),
    ("torch-mnist-training-step2", "DataProcess"),
    ("torch-mnist-training-step3", "DataLoad"),
    ("torch-mnist-training-step4", "DataProcess"),
    ("torch-mnist-training-step5", "DataMigrate"),
]


def _missing_packages() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed (pip install torch==2.13.0, or the test extra)"
    if importlib.util.find_spec("sklearn") is None:
        return "scikit-learn is not installed (the examples or test extra)"
    return None


def _missing_isolation() -> str | None:
    problem = fuse_available()
    if problem is not None:
        return f"FUSE unavailable: {problem}"
    problem = sandbox_problem()
    return None if problem is None else f"DataProcess needs a mount namespace: {problem}"


pytestmark = pytest.mark.skipif(_missing_packages() is not None, reason=str(_missing_packages()))


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"fluid_mnist_{name}", EXAMPLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _step_table(stdout: str) -> dict[str, list[str]]:
    """run_flow.py's step table: NAME -> [KIND, PHASE, DURATION..., the message line of a failed step]."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["STEP", "KIND"])
    table: dict[str, list[str]] = {}
    for line in lines[start + 1:]:
        if line.startswith("  ") and table:
            table[list(table)[-1]].append(line.strip())
        elif len(line.split()) >= 3 and line.split()[1] in dict(STEPS).values():
            table[line.split()[0]] = line.split()[1:]
        else:
            break
    return table


def _run_flow(home: Path, server, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``run_flow.py ARGS`` against ``server`` in ``home``, as a user runs it (no AWS_* of this process)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env["MILLPOND_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, str(EXAMPLE / "run_flow.py"), *args, "--endpoint", server.endpoint_url,
         "--access-key", server.access_key, "--secret-key", server.secret_key],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )


def test_make_data_writes_mnist_idx_files(tmp_path: Path) -> None:
    make_data = _load_example("make_data")
    train = _load_example("train")
    assert make_data.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(make_data.FILES)
    images = train.read_idx(tmp_path / "train-images-idx3-ubyte")  # read from the .gz beside it
    labels = train.read_idx(tmp_path / "t10k-labels-idx1-ubyte")
    assert images.shape == (1497, 28, 28) and images.dtype.name == "uint8" and images.max() == 255
    assert labels.shape == (300,) and set(labels.tolist()) == set(range(10))
    assert (tmp_path / "train-images-idx3-ubyte.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert make_data.mnist_files() == {p.name: p.read_bytes() for p in tmp_path.iterdir()}  # deterministic


@pytest.mark.s3
@pytest.mark.skipif(_missing_isolation() is not None, reason=str(_missing_isolation()))
def test_the_seed_flow_trains_and_archives_the_checkpoint(cli, home: Path, s3_server) -> None:
    import torch

    bucket = s3_server.create_bucket()
    started = time.monotonic()
    result = _run_flow(home, s3_server, "--make-data", "--bucket", bucket, timeout=180)
    elapsed = time.monotonic() - started
    try:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        table = _step_table(result.stdout)
        for name, kind in STEPS:
            assert table[name][:2] == [kind, "Complete"] and table[name][2].endswith("s"), (name, table)
            assert f"{kind} {name} completed" in result.stdout
            # The seed's last cell cleaned the dataset up, and its operations with it (as Fluid does).
            assert cli("get", kind.lower(), name).code != 0
        assert "test accuracy" in result.stdout  # the training step's log tail is printed
        assert cli("get", "dataset", "mydataset").code != 0
        fs = s3_server.filesystem()
        # The decompressed files and the checkpoint went through the ReadWrite dataset into the bucket.
        assert fs.exists(f"{bucket}/juicefs/torch-mnist-training/MNIST/raw/train-images-idx3-ubyte")
        assert fs.exists(f"{bucket}/juicefs/torch-mnist-training/MNIST/raw/ckpt/mnist_cnn.pt")
        checkpoint = fs.cat_file(f"{bucket}/mnist_ckpt/mnist_cnn.pt")
        state = torch.load(io.BytesIO(checkpoint), weights_only=True)
        assert set(state) >= {"conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight"}
        train, make_data = _load_example("train"), _load_example("make_data")
        model = train.Net()
        model.load_state_dict(state)
        digits = make_data.digits_as_mnist()
        x = (torch.from_numpy(digits["t10k-images"]).float().unsqueeze(1) / 255.0 - 0.1307) / 0.3081
        y = torch.from_numpy(digits["t10k-labels"]).long()
        assert train.accuracy(model, x, y) > 0.8
    finally:
        cli("delete", "dataset", "mydataset")  # when the script stopped before its clean-up
    print(result.stdout)
    print(f"run_flow.py took {elapsed:.1f} s")


@pytest.mark.s3
@pytest.mark.skipif(_missing_isolation() is not None, reason=str(_missing_isolation()))
def test_without_data_the_flow_stops_at_the_first_step_and_says_why(cli, home: Path, s3_server) -> None:
    bucket = s3_server.create_bucket()
    result = _run_flow(home, s3_server, "--bucket", bucket, "--run-id", "nodata", timeout=120)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "nothing to migrate" in result.stderr and "--make-data uploads some" in result.stderr
    table = _step_table(result.stdout)
    assert table["nodata-step1"][1] == "Failed", table
    for step in range(2, 6):  # every later step failed without running, saying which step before it failed and why
        kind, before = STEPS[step - 1][1], STEPS[step - 2][1]
        row = table[f"nodata-step{step}"]
        message = row[-1]
        assert row[1] == "Failed", row
        assert message.startswith(f"{kind} nodata-step{step}: runAfter {before} nodata-step{step - 1} failed: "), row
        assert "nothing to migrate" in message, message
    assert cli("get", "dataset", "mydataset").code != 0  # cleaned up all the same, its operations with it
    assert cli("get", "datamigrate", "nodata-step1").code != 0
