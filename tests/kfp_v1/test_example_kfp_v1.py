"""examples/kfp_v1: seeds 002 and 003 run from the CLI, as compiled packages, as v1 sources and as v2 code.

Seed 003 (func_to_container_op, a NamedTuple output) must compute add(divmod(a + 4, b).quotient, c);
seed 002 (VolumeOp, a secret volume, file_outputs) clones a local git repository into its volume,
preprocesses scikit-learn's digits and trains a classifier, and its `output` must be what train.py
wrote to output.txt: the path of the model it saved in the volume.

A kfp 1.x step has a /tmp of its own (as a pod), showing only the host's /tmp entry that holds the
home: seed 002 runs here with its repository outside that entry (/var/tmp), and once as shipped
(run.sh and the pipeline's defaults) with a home of its own under /tmp.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CliResult, task
from tests.kfp1_env import EXAMPLES, MILLPOND_BIN, SideEnv

Cli = Callable[..., CliResult]
SEED002 = EXAMPLES / "seed002_fashion_mnist"
SEED003 = EXAMPLES / "seed003_calculation"
MODEL = re.compile(r"/workspace/kubeflow-mnist/mnist-\d+\.pickle")


def _run(cli: Cli, *args: object) -> dict:
    result = cli("run", *args, "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["state"] == "SUCCEEDED", data["error"]
    return data


def _artifact(data: dict, task_name: str, output: str) -> str:
    return Path(task(data, task_name)["outputs"][output]).read_text()


@pytest.mark.parametrize("package", ["pipeline.yaml", "pipeline.py"])
def test_seed003_computes_with_its_named_tuple(package: str, request: pytest.FixtureRequest, home: Path,
                                               cli: Cli) -> None:
    if package.endswith(".py"):
        request.getfixturevalue("v1")
    data = _run(cli, SEED003 / package, "-p", "a=3", "-p", "b=2", "-p", "c=17")
    assert float(_artifact(data, "add", "add-Output")) == 7.0
    assert float(_artifact(data, "my-divmod", "my-divmod-quotient")) == 3.0  # divmod(7, 2)
    assert float(_artifact(data, "my-divmod", "my-divmod-remainder")) == 1.0
    assert float(_artifact(data, "add-2", "add-2-Output")) == 20.0  # 3 + 17


def test_seed003_in_v2(home: Path, cli: Cli) -> None:
    data = _run(cli, SEED003 / "pipeline_v2.py", "-p", "a=3", "-p", "b=2")
    assert data["outputs"] == {"Output": 20.0}


@pytest.fixture
def elsewhere() -> Iterator[Path]:
    """A folder outside the home's /tmp entry (which a kfp 1.x step's own /tmp shows): in /var/tmp."""
    folder = Path(tempfile.mkdtemp(prefix="millpond-test-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def seed002(home: Path, tmp_path: Path, elsewhere: Path, cli: Cli) -> list[str]:
    """The seed's preconditions: its git repository (local, not beside the home) and its ssh key as the
    secret ssh-key-secret."""
    repo = subprocess.run([sys.executable, SEED002 / "make_repo.py", elsewhere / "kubeflow-mnist.git"],
                          capture_output=True, text=True, check=True).stdout.strip()
    key = tmp_path / "id_rsa"
    if shutil.which("ssh-keygen"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    else:
        key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----\n")
    assert cli("secret", "create", "ssh-key-secret", "--from-file", f"id_rsa={key}").code == 0
    return ["-p", f"repo_url={repo}", "-p", f"python={sys.executable}"]


def _model_in_volume(home: Path, written: str) -> None:
    """What the step reported is the path train.py wrote to output.txt, and that model is in the volume."""
    assert MODEL.fullmatch(written), written
    outputs = list((home / "volumes").glob("default/*/kubeflow-mnist/output.txt"))
    assert len(outputs) == 1, outputs
    assert outputs[0].read_text() == written
    volume = outputs[0].parent.parent
    assert (volume / written.removeprefix("/workspace/")).stat().st_size > 1000
    assert (volume / "train_images.pickle").is_file()  # preprocessing wrote to data_dir=/workspace


@pytest.mark.parametrize("package", ["pipeline.tar.gz", "pipeline.py"])
def test_seed002_trains_and_outputs_the_model_path(package: str, request: pytest.FixtureRequest, home: Path,
                                                   seed002: list[str], cli: Cli) -> None:
    if package.endswith(".py"):
        request.getfixturevalue("v1")
    data = _run(cli, SEED002 / package, *seed002)
    log = Path(task(data, "training-and-evaluation")["log"]).read_text()
    accuracy = float(re.search(r"Test Acc: ([0-9.]+)", log)[1])
    assert accuracy > 0.8, log
    _model_in_volume(home, _artifact(data, "training-and-evaluation", "training-and-evaluation-output"))
    assert not (SEED002 / "pipeline.py.tar.gz").exists()  # the file's own compile-on-run block never ran


@pytest.mark.parametrize("how", ["run.sh", "pipeline.py"])
def test_seed002_as_shipped_with_a_home_under_tmp(how: str, request: pytest.FixtureRequest) -> None:
    """The issue's case: MILLPOND_HOME under /tmp, the repository where make_repo.py puts it by default and
    the pipeline's own default repo_url (run.sh passes make_repo's answer; pipeline.py is run without it)."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("run.sh makes its key with ssh-keygen")
    if how == "pipeline.py":
        request.getfixturevalue("v1")
    home = Path(tempfile.mkdtemp(prefix="seed002-", dir="/tmp")) / "home"
    env = {**os.environ, "MILLPOND_HOME": str(home), "PYTHON": sys.executable,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("REPO", None)
    try:
        if how == "run.sh":
            argv = [str(SEED002 / "run.sh")]
        else:
            subprocess.run([sys.executable, SEED002 / "make_repo.py"], check=True, capture_output=True, env=env)
            key = home.parent / "id_rsa"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
            subprocess.run([MILLPOND_BIN, "secret", "create", "ssh-key-secret", "--from-file", f"id_rsa={key}"],
                           check=True, capture_output=True, env=env)
            argv = [str(MILLPOND_BIN), "run", str(SEED002 / "pipeline.py"), "-p", f"python={sys.executable}"]
        result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
        assert result.returncode == 0, result.stderr
        assert "does not exist" not in result.stderr
        outputs = list((home / "volumes").glob("default/*/kubeflow-mnist/output.txt"))
        assert len(outputs) == 1, result.stderr
        _model_in_volume(home, outputs[0].read_text())
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


def test_seed002_in_v2(home: Path, seed002: list[str], cli: Cli) -> None:
    data = _run(cli, SEED002 / "pipeline_v2.py", *seed002)
    _model_in_volume(home, data["outputs"]["Output"])


def test_the_committed_packages_are_what_kfp_1_8_compiles(v1: SideEnv, tmp_path: Path) -> None:
    """pipeline.tar.gz/.yaml are dsl-compile's output for pipeline.py (all but the compile time)."""
    import tarfile

    import yaml

    def workflow(text: str) -> dict:
        doc = yaml.safe_load(text)
        doc["metadata"]["annotations"].pop("pipelines.kubeflow.org/pipeline_compilation_time")
        return doc

    dsl_compile = v1.venv / "bin" / "dsl-compile"  # kfp 1.8's own command, from the renamed venv
    for example, package in ((SEED002, "pipeline.tar.gz"), (SEED003, "pipeline.yaml")):
        out = tmp_path / f"{example.name}.yaml"
        subprocess.run([dsl_compile, "--py", example / "pipeline.py", "--output", out],
                       check=True, capture_output=True, cwd=tmp_path)
        if package.endswith(".tar.gz"):
            with tarfile.open(example / package) as archive:
                member = archive.extractfile("pipeline.yaml")
                assert member is not None
                committed = member.read().decode()
        else:
            committed = (example / package).read_text()
        assert workflow(out.read_text()) == workflow(committed), example.name
