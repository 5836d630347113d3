"""examples/fluid_mnist: seed 000's dataflow (Fluid SDK) end to end against a SeaweedFS bucket.

MNIST-format files made from scikit-learn's digits are uploaded to the bucket; the example
migrates them into a juicefs:/// ReadWrite dataset, decompresses them with the seed's bash
script, preloads them, trains a CNN on the CPU (PyTorch) as an Arena job that the seed's
script submits and polls from inside its DataProcess step, the checkpoint landing in the
dataset, and migrates the checkpoint back to the bucket, where this test loads it and checks
it predicts. The training step's own failures (a job that fails, one that never starts) are
run alone over a local dataset: they must end the step Failed, saying why, in seconds.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from millpond import fluid
from millpond.datasets.mounts import fuse_available
from millpond.fluid import constants
from millpond.runners.sandbox import sandbox_problem
from millpond.scheduling.machine import capacity
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fluid_mnist"
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
    """``run_flow.py ARGS`` against ``server`` in ``home``, as a user runs it.

    With none of this process's AWS_* variables, and a PATH without the venv millpond runs from
    (never activated, as ``.venv/bin/python run_flow.py`` runs it): the step's script must find
    ``arena`` all the same.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env["MILLPOND_HOME"] = str(home)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", os.defpath).split(os.pathsep) if p != venv_bin)
    return subprocess.run(
        [sys.executable, str(EXAMPLE / "run_flow.py"), *args, "--endpoint", server.endpoint_url,
         "--access-key", server.access_key, "--secret-key", server.secret_key],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )


def _arena(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """This installation's ``arena`` console script, run against ``home``."""
    return subprocess.run([str(Path(sys.executable).parent / "arena"), *args],
                          env={**os.environ, "MILLPOND_HOME": str(home)},
                          capture_output=True, text=True, timeout=60, check=False)


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
        assert cli("get", "dataset", "mydataset").code != 0
        # Step 4's script is the seed's: it submitted the Arena job and polled it with jq until it succeeded.
        script_log = (home / "operations" / "default_DataProcess_torch-mnist-training-step4.out").read_text()
        assert "+ arena submit pytorch --name=mnist-pytorch --gpus=1 --workers=1" in script_log, script_log
        assert "--data=mydataset:/data" in script_log and "+ status=SUCCEEDED" in script_log, script_log
        # The job outlived its step, as a Kubernetes job does: SUCCEEDED, one GPU asked (run on the CPU here).
        got = _arena(home, "get", "mnist-pytorch", "-o", "json")
        assert got.returncode == 0, got.stderr
        info = json.loads(got.stdout)
        assert info["status"] == "SUCCEEDED" and info["trainer"] == "pytorchjob", info
        assert info["requestGPUs"] == 1 and [i["name"] for i in info["instances"]] == ["mnist-pytorch-master-0"]
        job_log = _arena(home, "logs", "mnist-pytorch").stdout
        assert "data: 1497 train and 300 test images of (28, 28) from /data/MNIST/raw" in job_log, job_log
        assert "epoch 2: train loss" in job_log and "saved /data/ckpt/mnist_cnn.pt" in job_log, job_log
        assert "test accuracy" in result.stdout  # run_flow.py prints the job's log tail
        if not capacity().gpus and not os.environ.get("MILLPOND_GPU_FALLBACK"):
            assert "no GPU here: the job's --gpus=1 runs on the CPU (MILLPOND_GPU_FALLBACK=cpu" in result.stdout
        fs = s3_server.filesystem()
        # The decompressed files and the job's checkpoint went through the ReadWrite dataset into the bucket.
        assert fs.exists(f"{bucket}/juicefs/torch-mnist-training/MNIST/raw/train-images-idx3-ubyte")
        assert fs.exists(f"{bucket}/juicefs/torch-mnist-training/ckpt/mnist_cnn.pt")
        # ... and step 5 archived it where the seed's cell 12 puts it.
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
        # A second run stops before it starts: the seed's job name is taken.
        again = _run_flow(home, s3_server, "--bucket", bucket, "--run-id", "again", timeout=60)
        assert again.returncode == 2 and again.stderr.splitlines() == [
            "error: the Arena job mnist-pytorch exists (SUCCEEDED, left by an earlier run): "
            "arena delete mnist-pytorch, then run again"], again.stderr
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


@pytest.fixture
def local_dataset(home: Path, tmp_path: Path) -> Iterator[fluid.FluidDataset]:
    """Cells 5-6 over a local folder (with the MNIST/raw the training step mounts), cleaned up after."""
    ufs = tmp_path / "ufs"
    (ufs / "MNIST" / "raw").mkdir(parents=True)
    (ufs / "MNIST" / "raw" / "README").write_text("no MNIST files here\n")  # a folder is seen through its files
    client = fluid.FluidClient(fluid.ClientConfig())
    client.create_dataset(dataset_name="mydataset", mount_name="local", mount_point=f"local://{ufs}", mode="ReadWrite")
    dataset = client.get_dataset(dataset_name="mydataset")
    dataset.bind_runtime(runtime_type=constants.JUICEFS_RUNTIME_KIND, cache_capacity_GiB=1, cache_medium="SSD",
                         wait=True)
    yield dataset
    for resource in ResourceStore().list("Dataset", None):
        client.cleanup_dataset(resource.name, resource.namespace)


def _train_alone(dataset: fluid.FluidDataset, run_id: str, command: str, timeout_s: int) -> tuple[str, str, float]:
    """The seed's training step as a one-step flow: (the Failed condition's message, the script's log, seconds)."""
    run_flow = _load_example("run_flow")
    run = run_flow.train_step(dataset, dataset.name, command, timeout_s).run(run_id=run_id)
    started = time.monotonic()
    with pytest.raises(fluid.DataFlowFailed) as failed:
        run.wait(timeout=90)
    elapsed = time.monotonic() - started
    status = next(iter(run.get_current_status()[0].values()))
    assert status["phase"] == "Failed" and failed.value.step == f"{run_id}-step1", status
    log = load_settings().home / "operations" / f"default_DataProcess_{run_id}-step1.out"
    return status["conditions"][0]["message"], log.read_text(), elapsed


@pytest.mark.skipif(_missing_isolation() is not None, reason=str(_missing_isolation()))
def test_a_dataprocess_script_reaches_this_arena_and_this_home(
    home: Path, local_dataset: fluid.FluidDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a venv never activated and a relative MILLPOND_HOME: the script's ``arena`` is this one, its home ours."""
    venv_bin = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin))
    monkeypatch.chdir(home.parent)
    monkeypatch.setenv("MILLPOND_HOME", home.name)  # the script runs in a folder of its own: it must not resolve this
    script = 'set -e\ncommand -v arena\necho "home=$MILLPOND_HOME"\narena list\n'
    flow = local_dataset.process(dataset_mountpath="/data", processor=fluid.models.Processor(
        script=fluid.models.ScriptProcessor(command=["bash"], source=script)))
    assert flow.run(run_id="env").wait(timeout=60) is None
    lines = (home / "operations" / "default_DataProcess_env-step1.out").read_text().splitlines()
    assert lines[:3] == [f"{venv_bin}/arena", f"home={home}", "NAME  STATUS  TRAINER  DURATION  GPU(Requested)  "
                                                                 "GPU(Allocated)  NODE"], lines


@pytest.mark.skipif(_missing_isolation() is not None, reason=str(_missing_isolation()))
def test_a_failing_training_job_fails_the_step_naming_why(
    home: Path, local_dataset: fluid.FluidDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """train.py exits 1 (the dataset has no MNIST files): the job FAILED, and the step with it, at the next poll."""
    monkeypatch.setenv("MILLPOND_GPU_FALLBACK", "cpu")  # --gpus=1 on a machine that may have none
    script = shlex.quote(str(EXAMPLE / "train.py"))
    command = shlex.quote(f"{shlex.quote(sys.executable)} {script} --data /data --save-model-path /data/ckpt")
    message, log, elapsed = _train_alone(local_dataset, "broken", command, timeout_s=120)
    assert message == ("DataProcess broken-step1: the script exited with status 1: "
                       "the arena job mnist-pytorch FAILED: mnist-pytorch-master-0 exited with code 1"), message
    assert "FileNotFoundError" in log and "train-images-idx3-ubyte" in log, log  # arena logs --tail 10, before it
    assert elapsed < 60, elapsed  # the poll (5 s) and a few arena commands; the wait above bounds a hang
    info = json.loads(_arena(home, "get", "mnist-pytorch", "-o", "json").stdout)
    assert info["status"] == "FAILED" and info["instances"][0]["status"] == "Failed", info


@pytest.mark.skipif(_missing_isolation() is not None, reason=str(_missing_isolation()))
def test_a_training_job_that_never_starts_is_deleted_and_fails_the_step(
    home: Path, local_dataset: fluid.FluidDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine's one GPU is held by another job: the seed's job waits QUEUING; past the bound the step ends."""
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1")
    holder = _arena(home, "submit", "pytorch", "--name", "holder", "--gpus", "1", "sleep 60")
    assert holder.returncode == 0, holder.stderr
    try:
        message, log, elapsed = _train_alone(local_dataset, "stuck", shlex.quote("echo never runs"), timeout_s=2)
        assert message == ("DataProcess stuck-step1: the script exited with status 1: "
                           "the arena job mnist-pytorch was still QUEUING after 2s: deleted it"), message
        assert "+ status=QUEUING" in log and "deleted successfully" in log, log
        assert elapsed < 60, elapsed  # the poll (5 s) and a few arena commands; the wait above bounds a hang
        gone = _arena(home, "get", "mnist-pytorch")
        assert gone.returncode != 0 and "mnist-pytorch" in gone.stderr, gone  # it cannot start after its step failed
        assert json.loads(_arena(home, "get", "holder", "-o", "json").stdout)["status"] == "RUNNING"
    finally:
        _arena(home, "delete", "holder")
