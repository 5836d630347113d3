"""examples/fluid_resnet: seed 001 on one machine, end to end against a SeaweedFS bucket.

The example makes an ImageNet-style folder of JPEGs (from scikit-learn's digits), uploads it,
applies its Dataset + AlluxioRuntime, and trains a small ResNet with ``arena submit pytorch
--workers 2 --data imagenet:/data ./train.sh`` (DDP over gloo, a DataLoader with 2 workers per
rank). Here with 600 images and one epoch, so it takes well under a minute on 2 cores.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available
from millpond.runners.sandbox import sandbox_problem
from tests.datasets_support import cache_files
from tests.training_support import arena, job_json

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fluid_resnet"
EPOCH_LINE = re.compile(r"^epoch 1/1: train loss (\d+\.\d+), train accuracy (\d+\.\d+)%, val accuracy (\d+\.\d+)%",
                        re.MULTILINE)


PACKAGES = (("torch", "PyTorch (torch==2.13.0, the test extra)"), ("sklearn", "scikit-learn"),
            ("PIL", "Pillow (the examples or test extra)"))


def _missing() -> str | None:
    return next((f"{why} is not installed" for module, why in PACKAGES if importlib.util.find_spec(module) is None),
                None)


def _cannot_run_jobs() -> str | None:
    """Why this machine cannot run the example's job (its instances mount the dataset in a sandbox), or None."""
    problems = [f"FUSE unavailable: {fuse_available()}" if fuse_available() else "",
                f"no mount namespace for the instances: {sandbox_problem()}" if sandbox_problem() else ""]
    return "; ".join(p for p in problems if p) or None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def _example(name: str):
    """A module of the example's folder (put on the path: train.py imports imagefolder from beside it)."""
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
    return importlib.import_module(name)


def test_the_image_folder_is_deterministic_distinct_and_reads_back(tmp_path: Path) -> None:
    from PIL import Image

    make_images, imagefolder, train = _example("make_images"), _example("imagefolder"), _example("train")
    first = make_images.write_image_folder(tmp_path / "a", count=60, seed=3)
    again = make_images.write_image_folder(tmp_path / "b", count=60, seed=3)
    other = make_images.write_image_folder(tmp_path / "c", count=60, seed=4)
    assert len(first) == 60 and sum(p.parts[-3] == "val" for p in first) == 6
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in first]
    assert digest == [hashlib.sha256(p.read_bytes()).hexdigest() for p in again]  # the same seed, the same bytes
    assert len(set(digest)) == 60  # every file a distinct picture
    assert not set(digest) & {hashlib.sha256(p.read_bytes()).hexdigest() for p in other}
    with Image.open(first[0]) as image:
        assert (image.format, image.mode, image.size) == ("JPEG", "RGB", (32, 32))
    # A second, smaller run into the same folder leaves none of the first run's images behind.
    assert len(make_images.write_image_folder(tmp_path / "a", count=30, seed=3)) == 30
    assert len(list((tmp_path / "a").rglob("*.JPEG"))) == 30

    folder = imagefolder.ImageFolder(tmp_path / "c" / "train")
    assert folder.classes == [f"n{d:02d}" for d in range(10)] and len(folder) == 54
    image, label = folder[0]
    assert tuple(image.shape) == (3, 32, 32) and str(image.dtype) == "torch.float32" and label == 0
    assert -2.5 < float(image.min()) < float(image.max()) < 2.7  # normalised with ImageNet's mean and std
    params = sum(p.numel() for p in train.ResNet(10).parameters())
    assert 200_000 < params < 700_000, params


def test_train_py_without_an_image_folder_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "train" / "n00").mkdir(parents=True)  # a class folder with no images, and no val/ at all
    result = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--data", str(tmp_path)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == (f"error: {tmp_path}/train: no images (.jpeg, .jpg, .png) in class folders "
                             "(DATA_DIR must hold train/ and val/ with a folder per class)\n")


@pytest.mark.s3
@pytest.mark.skipif(_cannot_run_jobs() is not None, reason=str(_cannot_run_jobs()))
def test_arena_trains_the_resnet_over_the_cached_image_dataset(cli, capsys, home: Path, tmp_path: Path,
                                                                s3_server) -> None:
    import torch

    bucket = s3_server.create_bucket()
    cache, checkpoint = tmp_path / "cache", tmp_path / "ckpt" / "resnet.pt"
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env["MILLPOND_HOME"] = str(home)
    started = time.monotonic()
    command = [sys.executable, str(EXAMPLE / "run_example.py"), "--bucket", bucket, "--endpoint",
               s3_server.endpoint_url, "--access-key", s3_server.access_key, "--secret-key", s3_server.secret_key,
               "--epochs", "1", "--name", "resnet", "--cache-path", str(cache), "--checkpoint", str(checkpoint),
               "--timeout", "150"]
    result = subprocess.run([*command, "--count", "600"], env=env, capture_output=True, text=True, timeout=240,
                            check=False)
    elapsed = time.monotonic() - started
    try:
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
        assert "uploaded 600 files to s3://" in result.stdout
        assert s3_server.filesystem().exists(f"{bucket}/imagenet/train/n00")  # the bucket holds the folder

        info = job_json(capsys, "resnet")
        assert info["status"] == "SUCCEEDED" and info["trainer"] == "pytorchjob", info
        assert [(i["name"], i["status"]) for i in info["instances"]] == [
            ("resnet-master-0", "Succeeded"), ("resnet-worker-0", "Succeeded")]
        master = arena(capsys, "logs", "resnet").out
        worker = arena(capsys, "logs", "resnet", "-i", "resnet-worker-0").out
        # Each rank read its half of the 540 train images from the dataset's mount at /data/imagenet.
        assert "rank 0/2: 270 of 540 train images, 60 val images, 10 classes from /data/imagenet" in master, master
        assert "rank 1/2: 270 of 540 train images, 60 val images, 10 classes from /data/imagenet" in worker, worker
        assert "rank 1: epoch 1 done" in worker and "rank 1: done in" in worker
        found = EPOCH_LINE.search(master)
        assert found, master
        loss, val_accuracy = float(found.group(1)), float(found.group(3))
        assert 0 < loss < 10 and 0 <= val_accuracy <= 100

        saved = torch.load(checkpoint, weights_only=True)  # rank 0 wrote it through the sandbox to the host
        assert saved["classes"] == [f"n{d:02d}" for d in range(10)] and saved["epochs"] == 1
        assert round(saved["val_accuracy"] * 100, 2) == val_accuracy
        assert "fc.weight" in saved["model"]

        # The images were read through the dataset: its cache holds every one of them now.
        cached = [p for p in cache_files(cache) if p.suffix == ".JPEG"]
        assert len(cached) == 600, len(cached)
        dataset = json.loads(cli("get", "dataset", "imagenet", "-o", "json").out)
        assert dataset["status"]["phase"] == "Bound", dataset["status"]
        assert dataset["status"]["cacheStates"]["cachedPercentage"] == "100.0%", dataset["status"]

        # A second run under the same job name stops at once, saying so, before making or uploading anything.
        again = subprocess.run([*command, "--count", "20"], env=env, capture_output=True, text=True, timeout=60,
                               check=False)
        assert again.returncode == 2, again.stdout + again.stderr
        assert again.stderr.strip() == ("error: a job named 'resnet' exists: arena delete resnet, or pass --name")
        assert again.stdout == "" and len(s3_server.filesystem().find(f"{bucket}/imagenet")) == 600
    finally:
        arena(capsys, "delete", "resnet")
        cli("delete", "dataset", "imagenet")
    print(result.stdout)
    print(f"run_example.py took {elapsed:.1f} s")
