"""Bind the user's run arguments (``-p`` text and a JSON params file) to a pipeline's inputs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from millpond.documents import load_json
from millpond.errors import UserError
from millpond.pipelines.values import check_json, parse_text
from millpond.pipelines.views import PipelineSpec


def parse_assignments(assignments: list[str]) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` → ``{"a": "1", "b": "x=y"}``; a word without '=' is an error."""
    parsed: dict[str, str] = {}
    for item in assignments:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"-p {item!r}: expected NAME=VALUE")
        parsed[name.strip()] = value
    return parsed


def read_params_file(path: str | Path) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise UserError(f"{file}: no such params file")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{file}: not UTF-8 text") from None
    data = load_json(text, str(file))
    if not isinstance(data, dict):
        raise UserError(f"{file}: expected a JSON object of parameter names to values")
    return data


def bind_arguments(
    spec: dict[str, Any],
    texts: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
    params_file: str | None = None,
) -> dict[str, Any]:
    """Typed values for every root input that has one; defaults fill the gaps.

    ``texts`` are command-line strings (parsed by type), ``values`` already-typed JSON (a
    params file or an API call). A command-line value overrides the same name in a file.
    """
    root = PipelineSpec(spec).root
    definitions, artifact_inputs = root.input_parameters, root.input_artifacts
    bound: dict[str, Any] = {}
    source = params_file or "parameter"
    for name, value in (values or {}).items():
        if name not in definitions:
            raise UserError(f"{source}: unknown parameter {name!r} ({_known(definitions)})")
        bound[name] = check_json(value, definitions[name].type, f"parameter {name!r}")
    for name, text in (texts or {}).items():
        if name not in definitions:
            raise UserError(f"-p {name}: unknown parameter ({_known(definitions)})")
        bound[name] = parse_text(text, definitions[name].type, f"-p {name}")
    for name, definition in definitions.items():
        if name in bound:
            continue
        if definition.has_default:
            bound[name] = check_json(definition.default, definition.type, f"default of {name!r}")
        elif not definition.is_optional:
            kind = definition.type.lower()
            raise UserError(f"missing required parameter {name!r} ({kind}); pass -p {name}=VALUE")
    for name, artifact in artifact_inputs.items():
        if not artifact.is_optional:
            raise UserError(
                f"pipeline input artifact {name!r} cannot be passed from the command line; "
                "wrap the pipeline or use an importer"
            )
    return bound


def _known(definitions: Mapping[str, object]) -> str:
    return "known: " + ", ".join(sorted(definitions)) if definitions else "the pipeline takes no parameters"
