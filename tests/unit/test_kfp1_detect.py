"""Telling KFP v1 code from v2 code before kfp 2 imports it (pipelines/kfp1/detect.py).

The v1 corpus' sources (kfp 1.8's own test pipelines) are the v1 side: each is found by the
name and line where it first uses something only kfp 1.x has, or is plain v2-compatible code
that kfp 2 compiles as it is. millpond's own v2 pipelines are the other side: none is taken
for v1. The fallback reads kfp 2's real import errors.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millpond.pipelines.kfp1.detect import V1Evidence, evidence_in_error, scan, scan_file

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
if not CORPUS.is_dir():  # a worktree elsewhere: the shared copy
    CORPUS = Path("/work/shared/conformance/kfp-v1")
ROOT = Path(__file__).resolve().parents[2]
# The corpus files that use nothing kfp 2 lacks: load_component_from_text with v1 component YAML.
V2_COMPATIBLE = {"fail_parameter_value_missing.py", "placeholder_if.py", "reused_component.py"}


def test_every_v1_source_of_the_corpus_is_found_by_a_v1_name() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"{CORPUS} (the shared v1 corpus) is not on this machine")
    files = sorted(CORPUS.glob("*.py"))
    assert len(files) >= 40
    for file in files:
        found = scan_file(file)
        if file.name in V2_COMPATIBLE:
            assert found is None, file.name
            continue
        assert found is not None, file.name
        line = file.read_text().splitlines()[found.line - 1]
        assert found.name.split(" import ")[-1].split(".")[-1] in line, (file.name, found, line)


def test_the_seed_examples_are_found_where_the_seeds_write_v1() -> None:
    assert scan_file(ROOT / "examples/kfp_v1/seed002_fashion_mnist/pipeline.py") == V1Evidence(
        "from kfp.dsl import PipelineVolume", 14
    )
    seed003 = scan_file(ROOT / "examples/kfp_v1/seed003_calculation/pipeline.py")
    assert seed003 is not None and seed003.name == "comp.func_to_container_op"
    assert seed003.where() == f"comp.func_to_container_op at line {seed003.line}"


def test_v2_pipelines_are_never_taken_for_v1() -> None:
    files = [*(ROOT / "tests/pipelines").glob("*.py"), *(ROOT / "examples").rglob("*.py")]
    v1 = {ROOT / f"examples/kfp_v1/{name}/pipeline.py" for name in ("seed002_fashion_mnist", "seed003_calculation")}
    checked = 0
    for file in files:
        if file in v1 or file.parent.name == "repo":
            continue
        assert scan_file(file) is None, file
        checked += 1
    assert checked > 25


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("import kfp\nkfp.dsl.ContainerOp(name='a', image='b')\n", "kfp.dsl.ContainerOp"),
        ("import kfp.dsl as d\n\nop = d.VolumeOp\n", "d.VolumeOp"),
        ("from kfp.dsl import ContainerOp as Op\nOp()\n", "from kfp.dsl import ContainerOp"),
        ("from kfp.dsl import *\nContainerOp()\n", "ContainerOp"),
        ("import kfp.gcp\n", "import kfp.gcp"),
        ("from kfp.onprem import mount_pvc\n", "from kfp.onprem import mount_pvc"),
        ("from kfp import components\nf = components.func_to_container_op(g)\n", "components.func_to_container_op"),
        ("import kfp.components as comp\ncomp.create_component_from_func(f)\n", "comp.create_component_from_func"),
        # a kubernetes model handed to a ContainerOp method, through any import form
        ("from kubernetes.client.models import V1Volume\nop.add_volume(V1Volume(name='v'))\n",
         ".add_volume(V1Volume(...))"),
        ("from kubernetes import client as k8s\nop.add_env_variable(k8s.V1EnvVar(name='A', value='1'))\n",
         ".add_env_variable(V1EnvVar(...))"),
        # kfp 2 compiles to YAML only: a package path means kfp 1.x
        ("import kfp\nkfp.compiler.Compiler().compile(p, 'p.tar.gz')\n",
         "Compiler().compile(...) to a .tar.gz package"),
        ("import kfp.compiler as compiler\ncompiler.Compiler().compile(p, __file__ + '.tar.gz')\n",
         "Compiler().compile(...) to a .tar.gz package"),
        ("from kfp import compiler\ncompiler.Compiler().compile(p, package_path=f'{x}.zip')\n",
         "Compiler().compile(...) to a .tar.gz package"),
    ],
)
def test_v1_names_through_every_import_form(source: str, name: str) -> None:
    found = scan(source)
    assert found is not None and found.name == name


@pytest.mark.parametrize(
    "source",
    [
        "from kfp import dsl\n@dsl.pipeline\ndef p():\n    with dsl.Condition(x == 1):\n        pass\n",
        "from kfp import dsl, compiler\ncompiler.Compiler().compile(p, 'p.yaml')\n",
        "from kubernetes.client.models import V1Volume\nv = V1Volume(name='x')\n",  # no ContainerOp method
        "import kfp\nkfp.components.load_component_from_file('c.yaml')\n",
        "ContainerOp = 1\nContainerOp()\n",  # not kfp's
        "from mylib.dsl import ContainerOp\nContainerOp()\n",
        "op.add_volume(V1Volume())\n",  # V1Volume from nowhere known
        "def f(:\n",  # not Python: kfp 2's import reports the syntax error
        "x = '\0'\n",
        "x = " + "(" * 100_000 + ")" * 100_000 + "\n",  # nested past Python's parser
        "import kfp\nx = kfp" + ".a" * 100_000 + "\n",  # an attribute chain deeper than the recursion limit
    ],
)
def test_v2_and_foreign_code_is_no_evidence(source: str) -> None:
    assert scan(source) is None


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_scan_never_raises(text: str) -> None:
    found = scan(text)
    assert found is None or isinstance(found, V1Evidence)


def _kfp2_error(tmp_path: Path, source: str) -> tuple[BaseException, Path]:
    file = tmp_path / f"m_{abs(hash(source))}.py"
    file.write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module(file.stem)
    except Exception as exc:  # noqa: BLE001 - the import error is the subject
        return exc, file
    finally:
        sys.path.remove(str(tmp_path))
    raise AssertionError("kfp 2 imported v1 code")


@pytest.mark.parametrize(
    ("source", "name", "line"),
    [
        ("from kfp import dsl\n\nop = dsl.ContainerOp\n", "kfp.dsl.ContainerOp", 3),
        ("from kfp.dsl import VolumeOp\n", "kfp.dsl.VolumeOp", 1),
        ("import kfp.gcp\n", "kfp.gcp", 1),
        ("from kfp.components import func_to_container_op\n", "kfp.components.func_to_container_op", 1),
        ("from kfp import dsl\nfrom kfp.dsl import _for_loop\n", "kfp.dsl._for_loop", 2),
    ],
)
def test_kfp2_import_errors_name_the_v1_name(tmp_path: Path, source: str, name: str, line: int) -> None:
    exc, file = _kfp2_error(tmp_path, source)
    assert evidence_in_error(exc, file) == V1Evidence(name, line)


def test_a_kfp2_task_lacking_a_container_op_method_is_v1(tmp_path: Path) -> None:
    source = (
        "from kfp import dsl\n\n@dsl.container_component\ndef c():\n"
        "    return dsl.ContainerSpec(image='alpine', command=['true'])\n\n"
        "@dsl.pipeline\ndef p():\n    c().add_pod_label('a', 'b')\n"
    )
    exc, file = _kfp2_error(tmp_path, source)
    found = evidence_in_error(exc, file)
    assert found is not None and found.name.startswith("PipelineTask.add_pod_label") and found.line == 9


def test_a_component_called_with_positional_arguments_is_v1(tmp_path: Path) -> None:
    """kfp 1.x took ``add_op(a, 3)``; kfp 2 refuses it (the corpus' reused_component.py)."""
    source = (
        "from kfp import components, dsl\n\n"
        "echo = components.load_component_from_text('''\nname: Echo\ninputs:\n- {name: text}\n"
        "implementation:\n  container:\n    image: alpine\n    command: [echo, {inputValue: text}]\n''')\n\n"
        "@dsl.pipeline\ndef p():\n    echo('hello')\n"
    )
    exc, file = _kfp2_error(tmp_path, source)
    found = evidence_in_error(exc, file)
    assert found is not None and found.name.startswith("a component called with positional arguments")
    assert found.line == len(source.splitlines())


def test_other_import_errors_are_not_v1(tmp_path: Path) -> None:
    for source in ("import no_such_module_here\n", "from kfp import dsl\ndsl.no_such_thing\n", "1 / 0\n"):
        exc, file = _kfp2_error(tmp_path, source)
        assert evidence_in_error(exc, file) is None, source
