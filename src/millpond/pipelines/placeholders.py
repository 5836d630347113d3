"""Resolve the ``{{$...}}`` placeholders and Concat/IfPresent structures of a container's command.

Mirrors the KFP driver: ``{{$}}`` is the executor input as JSON; input parameters splice
as raw strings (JSON for other types); artifacts expose uri, path and metadata; output
parameters expose the file the component writes its value to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from millpond.errors import TaskFailure
from millpond.pipelines.values import to_placeholder_text

_PLACEHOLDER = re.compile(r"\{\{\$(?P<expr>[^{}]*)\}\}")
_INPUT_PARAM = re.compile(r"^\.inputs\.parameters\['(?P<name>[^']+)'\](?:\.json_escape\[(?P<level>\d+)\])?$")
_ARTIFACT = re.compile(
    r"^\.(?P<side>inputs|outputs)\.artifacts\['(?P<name>[^']+)'\]"
    r"\.(?P<attr>uri|path|metadata)(?:\['(?P<key>[^']+)'\])?$"
)
_OUTPUT_PARAM = re.compile(r"^\.outputs\.parameters\['(?P<name>[^']+)'\]\.output_file$")

# Where kfp's Artifact.path looks for a remote URI's local copy (kfp.dsl.types.artifact_types).
REMOTE_MOUNTS = {"gs://": "/gcs/", "minio://": "/minio/", "s3://": "/s3/"}


class PlaceholderError(TaskFailure):
    """A placeholder the task cannot resolve: the task fails with this message."""


def local_path(uri: str) -> str:
    """The path at which a component sees an artifact, exactly as kfp's ``Artifact.path``."""
    for prefix, mount in REMOTE_MOUNTS.items():
        if uri.startswith(prefix):
            return mount + uri[len(prefix):]
    return uri


@dataclass
class PlaceholderContext:
    executor_input: dict[str, Any]
    job: dict[str, str] = field(default_factory=dict)  # pipeline_job_name, pipeline_task_uuid, ...

    def _artifact(self, side: str, name: str) -> dict[str, Any]:
        entry = self.executor_input.get(side, {}).get("artifacts", {}).get(name)
        if not entry or not entry.get("artifacts"):
            raise PlaceholderError(f"no {side[:-1]} artifact named {name!r}")
        return entry["artifacts"][0]

    def has_input(self, name: str) -> bool:
        inputs = self.executor_input.get("inputs", {})
        return name in inputs.get("parameterValues", {}) or name in inputs.get("artifacts", {})

    def resolve(self, expr: str) -> str:
        if expr == "":
            return json.dumps(self.executor_input)
        if match := _INPUT_PARAM.match(expr):
            values = self.executor_input.get("inputs", {}).get("parameterValues", {})
            name = match["name"]
            if name not in values:
                raise PlaceholderError(f"input parameter {name!r} has no value")
            text = to_placeholder_text(values[name])
            for _ in range(int(match["level"] or 0)):
                text = json.dumps(text)[1:-1]
            return text
        if match := _ARTIFACT.match(expr):
            artifact = self._artifact(match["side"], match["name"])
            if match["attr"] == "uri":
                return str(artifact["uri"])
            if match["attr"] == "path":
                return local_path(str(artifact["uri"]))
            metadata = artifact.get("metadata", {})
            if match["key"]:
                return to_placeholder_text(metadata.get(match["key"], ""))
            return json.dumps(metadata)
        if match := _OUTPUT_PARAM.match(expr):
            entry = self.executor_input.get("outputs", {}).get("parameters", {}).get(match["name"])
            if not entry:
                raise PlaceholderError(f"no output parameter named {match['name']!r}")
            return str(entry["outputFile"])
        if expr == ".outputs.output_file":
            return str(self.executor_input["outputs"]["outputFile"])
        key = expr.lstrip(".")
        if key in self.job:
            return self.job[key]
        raise PlaceholderError(f"unsupported placeholder {{{{${expr}}}}}")

    def substitute(self, text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: self.resolve(m["expr"]), text)

    def expand(self, arg: object) -> list[str]:
        """One IR argument → zero or more argv words (IfPresent can drop or add several)."""
        if isinstance(arg, str):
            stripped = arg.strip()
            if stripped.startswith("{") and ('"Concat"' in stripped or '"IfPresent"' in stripped):
                try:
                    structure = json.loads(stripped)
                except json.JSONDecodeError:
                    return [self.substitute(arg)]
                return self._expand_structure(structure)
            return [self.substitute(arg)]
        if isinstance(arg, dict):
            return self._expand_structure(arg)
        return [self.substitute(str(arg))]

    def _expand_structure(self, node: Any) -> list[str]:
        if isinstance(node, str):
            return self.expand(node)
        if isinstance(node, list):
            return [word for item in node for word in self._expand_structure(item)]
        if isinstance(node, dict) and "Concat" in node:
            return ["".join("".join(self._expand_structure(item)) for item in node["Concat"])]
        if isinstance(node, dict) and "IfPresent" in node:
            spec = node["IfPresent"]
            branch = spec.get("Then") if self.has_input(spec["InputName"]) else spec.get("Else")
            if branch is None:
                return []
            return self._expand_structure(branch if isinstance(branch, list) else [branch])
        return [self.substitute(json.dumps(node))]

    def command_line(self, words: Sequence[object]) -> list[str]:
        return [word for arg in words for word in self.expand(arg)]
