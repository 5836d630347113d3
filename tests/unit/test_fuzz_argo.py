"""Fuzzing the KFP v1 (Argo) reader, its tags and its ``when`` parser: a result or one error line, never a traceback.

Seeds are corpus workflows (``../shared/conformance/kfp-v1``) covering every template kind:
VolumeOp and VolumeSnapshotOp resources, loops, conditions, exit handlers, sidecars, raw artifacts.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from millpond.errors import MillpondError, TaskFailure
from millpond.pipelines.argo import package, templating, when
from millpond.pipelines.argo.reader import load_workflow_text, read_workflow
from millpond.pipelines.loader import load_ir_text
from tests.fuzz_support import fuzz_settings, mutated, mutated_text

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/conformance/kfp-v1")
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared kfp-v1 corpus is not here")
SEED_NAMES = ["volumeop_basic.yaml", "volume_snapshotop_sequential.yaml", "condition.yaml", "withitem_nested.yaml",
              "legacy_exit_handler.yaml", "sidecar.yaml", "input_artifact_raw_value.yaml",
              "runtime_resource_request.yaml", "artifact_passing_using_volume.yaml", "withparam_output_dict.yaml"]
TEXTS = [(CORPUS / name).read_text() for name in SEED_NAMES] if CORPUS.is_dir() else ["a: 1"]
DOCUMENTS: list[Any] = [yaml.safe_load(text) for text in TEXTS]


def _one_line(exc: BaseException) -> None:
    assert isinstance(exc, MillpondError), f"{type(exc).__name__}: {exc}"
    assert "\n" not in str(exc) and str(exc)


@fuzz_settings(300)
@given(mutated(DOCUMENTS))
def test_mutated_workflows_load_or_are_refused(document: Any) -> None:
    try:
        read_workflow(document, "fuzz.yaml")
    except MillpondError as exc:
        _one_line(exc)


@fuzz_settings(200)
@given(mutated(DOCUMENTS))
def test_mutated_workflows_translate_to_valid_ir_or_are_refused(document: Any) -> None:
    """``millpond run`` of a v1 workflow: read, translated to IR, validated as IR; never a traceback."""
    try:
        text = yaml.safe_dump(document)
    except yaml.YAMLError:
        return
    try:
        load_ir_text(text, "fuzz.yaml")
    except MillpondError as exc:
        _one_line(exc)


@fuzz_settings(150)
@given(mutated_text(TEXTS))
def test_mutated_workflow_texts_load_or_are_refused(text: str) -> None:
    try:
        load_workflow_text(text, "fuzz.yaml")
    except MillpondError as exc:
        _one_line(exc)


@fuzz_settings(100)
@given(st.binary(max_size=200), st.sampled_from([b"\x1f\x8b", b"PK\x03\x04", b""]))
def test_random_bytes_are_refused_as_packages(data: bytes, magic: bytes) -> None:
    try:
        package.unpack(magic + data, "fuzz.tar.gz")
    except MillpondError as exc:
        _one_line(exc)


def _archive(kind: str, names: list[str]) -> bytes:
    buffer = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buffer, "w") as archive:
            for name in names:
                archive.writestr(name, "a: 1")
    else:
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for name in names:
                info = tarfile.TarInfo(name)
                info.size = 4
                archive.addfile(info, io.BytesIO(b"a: 1"))
    return buffer.getvalue()


_MEMBER_NAMES = st.one_of(
    st.sampled_from(["pipeline.yaml", "./pipeline.yaml", "x/pipeline.yaml", "../pipeline.yaml", "/pipeline.yaml",
                     "a/../../pipeline.yaml", "C:/pipeline.yaml", "a\\..\\pipeline.yaml", "x/y/pipeline.yaml"]),
    st.text(min_size=1, max_size=20).filter(lambda n: "\x00" not in n),
)


@fuzz_settings(100)
@given(st.sampled_from(["tar", "zip"]), st.lists(_MEMBER_NAMES, min_size=1, max_size=4, unique=True))
def test_member_names_are_pipeline_yaml_or_refused(kind: str, names: list[str]) -> None:
    try:
        text = package.unpack(_archive(kind, names), "fuzz")
    except MillpondError as exc:
        _one_line(exc)
        return
    assert text == "a: 1"
    assert not any(name.startswith("/") or ".." in name.split("/") for name in names)


# ---- expressions ----------------------------------------------------------------------------------

_WHEN_PIECES = st.sampled_from([
    "==", "!=", "<", ">", "<=", ">=", "&&", "||", "!", "(", ")", "-", '"heads"', "'tails'", "5", "1.5", "-3",
    "true", "false", "heads", " ", '"', "\\", "=", "1e9", ".5", "{{x}}", "\n",
])


@fuzz_settings(400)
@given(st.one_of(st.lists(_WHEN_PIECES, max_size=12).map(" ".join), st.text(max_size=40)))
def test_when_is_a_boolean_or_one_error_line(expression: str) -> None:
    try:
        result = when.evaluate(expression)
    except TaskFailure as exc:
        _one_line(exc)
        with pytest.raises(MillpondError):  # what cannot evaluate either fails to parse or is a type error at run time
            when.evaluate(expression)
    else:
        assert isinstance(result, bool)
        when.check(expression, "w")  # what evaluates also passes the load-time check


@fuzz_settings(200)
@given(st.text(max_size=60), st.dictionaries(st.sampled_from(list(templating.item_values({"a": 1}))
                                                             + ["inputs.parameters.x", "workflow.name"]),
                                             st.text(max_size=10)), st.booleans())
def test_substitute_resolves_or_fails_in_one_line(text: str, values: dict[str, str], loop: bool) -> None:
    try:
        result = templating.substitute(text, values, loop)
    except TaskFailure as exc:
        _one_line(exc)
        return
    if "{{" not in text:
        assert result == text
    try:
        templating.check_text(text, "w")
    except MillpondError as exc:
        _one_line(exc)
