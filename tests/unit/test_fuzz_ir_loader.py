"""Fuzzing the IR loader: any document or text either loads or is refused with a MillpondError, in bounded time.

Seeds are the tests' own pipelines, compiled by the real kfp compiler (conditions, loops, exit
handlers, nested pipelines, artifacts, a kfp-kubernetes platform spec) and the hand-written IR
of tests/test_hostile_input.py. A spec that loads must also bind its defaults without anything
but a MillpondError, since that is what ``millpond run`` does next.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from millpond.errors import MillpondError
from millpond.pipelines.arguments import bind_arguments
from millpond.pipelines.loader import load_ir_text
from tests.fuzz_support import fuzz_settings, hostile_values, mutated, mutated_text
from tests.server.test_hostile_input import pipeline


def _compiled() -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(IR, platform spec or None) of a few of the tests' pipelines, compiled once."""
    from kfp import compiler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from tests.pipelines import artifacts, control_flow, platform_secrets, typed_params
    functions = [typed_params.typed_params, control_flow.branches, control_flow.loops, control_flow.exit_handling,
                 control_flow.retrying, artifacts.artifacts_pipeline, platform_secrets.platform_secrets]
    compiled = []
    for function in functions:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "p.yaml"
            compiler.Compiler().compile(function, str(path))
            documents = list(yaml.safe_load_all(path.read_text()))
        compiled.append((documents[0], documents[1] if len(documents) > 1 else None))
    compiled.append((yaml.safe_load(pipeline()), None))
    return compiled


SEEDS = _compiled()
SPECS = [spec for spec, _ in SEEDS]
PLATFORMS = [platform for _, platform in SEEDS if platform]
TEXTS = [pipeline()] + [json.dumps(spec) for spec in SPECS[:2]] + [
    yaml.safe_dump(spec) + ("---\n" + yaml.safe_dump(platform) if platform else "") for spec, platform in SEEDS[-3:]
]


def load_or_refuse(text: str) -> None:
    """What ``millpond run FILE`` does before recording anything; only a MillpondError may come out."""
    try:
        loaded = load_ir_text(text, "fuzz.yaml")
    except MillpondError:
        return
    try:
        bind_arguments(loaded.spec, {}, {}, None)
    except MillpondError:
        pass


def as_text(spec: Any, platform: Any = None) -> str:
    text = json.dumps(spec, allow_nan=True)
    return text if platform is None else text + "\n---\n" + json.dumps(platform, allow_nan=True)


def test_every_seed_loads() -> None:
    for spec, platform in SEEDS:
        load_ir_text(as_text(spec, platform), "seed")


@fuzz_settings(examples=1000)
@given(mutated(SPECS))
def test_mutated_ir_loads_or_is_refused(spec: Any) -> None:
    load_or_refuse(as_text(spec))


@fuzz_settings(examples=400)
@given(st.sampled_from(SPECS), mutated(PLATFORMS))
def test_mutated_platform_spec_loads_or_is_refused(spec: Any, platform: Any) -> None:
    load_or_refuse(as_text(spec, platform))


@fuzz_settings(examples=800)
@given(mutated_text(TEXTS))
def test_mutated_yaml_text_loads_or_is_refused(text: str) -> None:
    load_or_refuse(text)


@fuzz_settings(examples=200)
@given(hostile_values)
def test_any_json_value_as_a_whole_document_is_refused(value: Any) -> None:
    with pytest.raises(MillpondError):
        load_ir_text(as_text(value), "fuzz.yaml")


@fuzz_settings(examples=400)
@given(st.sampled_from(SPECS), st.dictionaries(st.sampled_from(["i", "n", "items", "l", "d", "xs", "s", "f", "b"]),
                                                hostile_values, max_size=3))
def test_hostile_run_arguments_bind_or_are_refused(spec: dict[str, Any], values: dict[str, Any]) -> None:
    """What the create-run route does with ``runtime_config.parameters``."""
    try:
        bind_arguments(spec, {}, values, None)
    except MillpondError:
        pass
