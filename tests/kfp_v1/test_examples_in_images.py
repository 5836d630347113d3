"""Seeds 002 and 003 in their images (issue 31): every step runs in the image the seed names.

``run_in_images.sh`` builds stand-ins for those images from Debian packages when they are missing (no
image registry is reachable here; examples/kfp_v1/images/build.sh), then runs the compiled pipeline with
``--runtime container``: a step that could not run in its image fails the run instead of falling back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.containers_support import podman
from tests.kfp1_env import EXAMPLES, MILLPOND_BIN

pytestmark = pytest.mark.containers


def _run_script(script: Path, home: Path, tmp_path: Path) -> dict:
    podman()  # skips (fails in CI) where Podman does not work
    repo = Path("/var/tmp") / f"kubeflow-mnist-{tmp_path.name}.git"  # seed 002's clone source (not /tmp: see README)
    env = {**os.environ, "MILLPOND_HOME": str(home), "PATH": f"{MILLPOND_BIN.parent}{os.pathsep}{os.environ['PATH']}",
           "REPO": str(repo)}
    try:
        done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=1200)
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    listed = subprocess.run([str(MILLPOND_BIN), "runs", "list", "-o", "json"], env=env, capture_output=True,
                            text=True, check=True)
    run_id = json.loads(listed.stdout)[0]["run_id"]
    got = subprocess.run([str(MILLPOND_BIN), "runs", "get", run_id, "-o", "json"], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(got.stdout)


def _steps(run: dict) -> dict[str, dict]:
    """The steps that run a command in an image (a VolumeOp is millpond's own step: it names no image to run in)."""
    return {t["name"]: t for t in run["tasks"] if t.get("image") and t["kind"] == "container"
            and not t["image"].startswith("argostub/")}


def test_seed002_runs_every_step_in_its_image(home: Path, tmp_path: Path) -> None:
    run = _run_script(EXAMPLES / "seed002_fashion_mnist" / "run_in_images.sh", home, tmp_path)
    assert run["state"] == "SUCCEEDED", run["error"]
    steps = _steps(run)
    assert {name: step["ran_in"] for name, step in steps.items()} == {
        "git-clone": "podman", "preprocessing": "podman", "training-and-evaluation": "podman"}
    assert steps["git-clone"]["image"] == "alpine/git:latest"
    assert steps["training-and-evaluation"]["image"] == "benjamintanweihao/kubeflow-mnist"
    output = Path(steps["training-and-evaluation"]["outputs"]["training-and-evaluation-output"]).read_text()
    assert output.startswith("/workspace/kubeflow-mnist/mnist-") and output.endswith(".pickle")


def test_seed003_runs_every_step_in_its_image(home: Path, tmp_path: Path) -> None:
    run = _run_script(EXAMPLES / "seed003_calculation" / "run_in_images.sh", home, tmp_path)
    assert run["state"] == "SUCCEEDED", run["error"]
    steps = _steps(run)
    assert {step["ran_in"] for step in steps.values()} == {"podman"}
    assert steps["my-divmod"]["image"] == "tensorflow/tensorflow:1.14.0-py3"
    assert Path(steps["add-2"]["outputs"]["add-2-Output"]).read_text() == "18.0"
