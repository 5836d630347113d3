"""The fixed paths of a kfp 1.x step, as a typed record the IR carries to the launcher.

A kfp 1.x step reads and writes files at absolute paths Argo's executor provides in the pod:
``/tmp/outputs/Output/data``, a ``file_outputs`` path such as ``/workspace/x/output.txt``,
``/tmp/inputs/X/data``, ``/mlpipeline-ui-metadata.json``. The v2 IR has no words for those (a v2
step is told its paths by placeholders), so ``to_ir`` records them on the executor's container
as ``argoPaths`` and the launcher (``argo_staging``) makes them real in the task's private mount
namespace. Why a record and not a rewrite of the command: a path built at run time (a Python
``os.path.join`` in the step's own script) is never named in the command, yet must work.

``check_path`` is the one gate for every such path, at load and again at run time (a stored or
hand-written IR may hold anything): absolute, normal (no ``..``, no ``//``), not ``/`` and not
under the kernel's trees (``/proc``, ``/sys``, ``/dev``), where no file of a step may live.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from millpond.errors import UserError

FIELD = "argoPaths"  # the container's key (loader tolerates it beside protobuf's fields)
# A kfp 1.x step's sidecars (``to_ir``): each one's name, image, command, args and plain env, so that a step that
# runs in its image starts each sidecar in its own image (``launcher``); on the host the step's wrapper script
# (``step_config.sidecar_script``) starts them. The loader tolerates it as it does FIELD.
SIDECARS_FIELD = "argoSidecars"
_KERNEL_TREES = ("/proc", "/sys", "/dev")
_MAX_PATH = 1024
# kfp 1.x's UI outputs: a ContainerOp writes them at the root without declaring them.
UI_METADATA = "mlpipeline-ui-metadata"
UI_METRICS = "mlpipeline-metrics"
UI_OUTPUTS = {UI_METADATA: "/mlpipeline-ui-metadata.json", UI_METRICS: "/mlpipeline-metrics.json"}


@dataclass(frozen=True)
class OutputPath:
    """One output Argo's executor saves after the step: a parameter or an artifact.

    A parameter is read from ``path`` (Argo's one-newline trim, ``default`` when the file is
    missing) or is the constant ``value`` (launcher placeholders filled at task start). An
    artifact is the file or folder at ``path``; ``optional``: its absence is no failure, and
    ``implicit``: kfp wrote it without declaring it (skipped where no sandbox can place it).
    """

    name: str
    kind: str  # "parameter" or "artifact"
    path: str | None = None
    value: str | None = None
    default: str | None = None
    optional: bool = False
    implicit: bool = False


@dataclass(frozen=True)
class InputPath:
    """An input artifact placed at ``path`` before the step: the task's input ``name``, or ``raw`` text."""

    path: str
    name: str | None = None
    raw: str | None = None


@dataclass(frozen=True)
class ArgoPaths:
    outputs: tuple[OutputPath, ...] = ()
    inputs: tuple[InputPath, ...] = ()

    def to_ir(self) -> dict[str, Any]:
        def drop(entry: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in entry.items() if v not in (None, False)}

        return {
            "outputs": [drop(vars(o)) for o in self.outputs],
            "inputs": [drop(vars(i)) for i in self.inputs],
        }

    @property
    def paths(self) -> list[str]:
        return [p for p in (*(o.path for o in self.outputs), *(i.path for i in self.inputs)) if p is not None]


def check_path(path: object, where: str) -> str:
    """``path`` if it is a place a step's file may be; a UserError naming it otherwise."""
    if not isinstance(path, str) or not path:
        raise UserError(f"{where}: a path must be a non-empty string")
    shown = repr(path[:80])
    if len(path) > _MAX_PATH or "\0" in path or "\n" in path:
        raise UserError(f"{where}: path {shown} is too long or holds a NUL or newline")
    if not path.startswith("/"):
        raise UserError(f"{where}: path {shown} is not absolute")
    if ".." in path.split("/") or posixpath.normpath(path) != path or path.startswith("//"):
        raise UserError(f"{where}: path {shown} is not a normal absolute path (no '..', '.', '//' or trailing '/')")
    if path == "/" or any(path == tree or path.startswith(tree + "/") for tree in _KERNEL_TREES):
        raise UserError(f"{where}: path {shown} is '/' or under /proc, /sys or /dev, where no step file may be")
    return path


def _text(entry: dict[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise UserError(f"{where}: {key} must be a string, got {type(value).__name__}")
    return value


def from_ir(value: object, where: str) -> ArgoPaths:
    """Read (and check) the ``argoPaths`` record; a UserError for any other shape."""
    if not isinstance(value, dict) or set(value) - {"outputs", "inputs"}:
        raise UserError(f"{where}: {FIELD} must be a mapping with outputs and inputs")
    if not all(isinstance(value.get(key) or [], list) for key in ("outputs", "inputs")):
        raise UserError(f"{where}: {FIELD} outputs and inputs must be lists")
    outputs: list[OutputPath] = []
    inputs: list[InputPath] = []
    for index, entry in enumerate(value.get("outputs") or []):
        at = f"{where}: {FIELD}.outputs[{index}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "kind", "path", "value", "default", "optional",
                                                        "implicit"}:
            raise UserError(f"{at}: expected a mapping of name, kind, path, value, default, optional, implicit")
        name, kind = _text(entry, "name", at), _text(entry, "kind", at)
        if not name or kind not in ("parameter", "artifact"):
            raise UserError(f"{at}: needs a name and a kind (parameter or artifact)")
        path, constant = _text(entry, "path", at), _text(entry, "value", at)
        if (path is None) == (constant is None) or (kind == "artifact" and path is None):
            raise UserError(f"{at}: output {name!r} needs a path (or, for a parameter, a value), not both")
        outputs.append(OutputPath(
            name=name, kind=kind, path=None if path is None else check_path(path, at), value=constant,
            default=_text(entry, "default", at), optional=entry.get("optional") is True,
            implicit=entry.get("implicit") is True))
    for index, entry in enumerate(value.get("inputs") or []):
        at = f"{where}: {FIELD}.inputs[{index}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "path", "raw"}:
            raise UserError(f"{at}: expected a mapping of path and name or raw")
        name, raw = _text(entry, "name", at), _text(entry, "raw", at)
        if (name is None) == (raw is None):
            raise UserError(f"{at}: an input needs a name or raw text, not both")
        inputs.append(InputPath(path=check_path(entry.get("path"), at), name=name, raw=raw))
    return ArgoPaths(tuple(outputs), tuple(inputs))


def check_sidecars(record: object, where: str) -> None:
    """An ``argoSidecars`` record as ``to_ir`` writes it; a UserError naming what is wrong (a hand-edited IR)."""
    if not isinstance(record, list):
        raise UserError(f"{where}: {SIDECARS_FIELD} must be a list")
    for index, item in enumerate(record):
        at = f"{where}: {SIDECARS_FIELD}[{index}]"
        if not isinstance(item, dict) or not all(isinstance(item.get(key), str) for key in ("name", "image")):
            raise UserError(f"{at} needs a name and an image")
        for key in ("command", "args"):
            if not isinstance(item.get(key, []), list) or not all(isinstance(w, str) for w in item.get(key, [])):
                raise UserError(f"{at}.{key} must be a list of strings")
        env = item.get("env", [])
        if not isinstance(env, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                                and isinstance(e.get("value"), str) for e in env):
            raise UserError(f"{at}.env must be a list of name/value pairs")
