"""Turn what the user points at (a kfp ``.py`` file or compiled IR YAML) into IR dictionaries.

A ``.py`` file is imported and its ``@dsl.pipeline`` compiled with the real kfp compiler;
a ``.yaml`` is read as IR with its optional second document (the kfp-kubernetes platform
spec). Every failure here is the user's: one line naming the file and the problem.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from millpond.errors import UserError
from millpond.pipelines.ir import validate_pipeline_spec, validate_platform_spec

# libyaml's parser when PyYAML has it (10× faster on large IR files), the pure-Python one otherwise.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class LoadedPipeline:
    """A validated pipeline: its IR, its platform spec (or None) and where it came from."""

    spec: dict[str, Any]
    platform_spec: dict[str, Any] | None
    source: str

    @property
    def name(self) -> str:
        return str(self.spec.get("pipelineInfo", {}).get("name") or "pipeline")


def load_pipeline(path: str | Path, pipeline_name: str | None = None) -> LoadedPipeline:
    file = Path(path)
    if not file.exists():
        raise UserError(f"{file}: no such file")
    if not file.is_file():
        raise UserError(f"{file}: not a file")
    if file.suffix == ".py":
        return _load_python(file, pipeline_name)
    if file.suffix in (".yaml", ".yml", ".json"):
        if pipeline_name:
            raise UserError(f"{file}: --pipeline picks a function in a .py file; a compiled IR file holds one pipeline")
        return load_ir_text(file.read_text(encoding="utf-8", errors="replace"), str(file))
    raise UserError(f"{file}: expected a .py file with a @dsl.pipeline or a compiled IR .yaml")


def load_ir_text(text: str, source: str) -> LoadedPipeline:
    """Parse IR YAML (one or two documents) and validate it."""
    try:
        documents = [doc for doc in yaml.load_all(text, Loader=_SAFE_LOADER) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{where}: malformed YAML: {problem}") from None
    if not documents:
        raise UserError(f"{source}: empty file, expected a KFP pipeline spec")
    spec = documents[0]
    platform: dict[str, Any] | None = None
    for extra in documents[1:]:
        if isinstance(extra, dict) and "platforms" in extra:
            platform = extra
        else:
            raise UserError(f"{source}: unexpected YAML document after the pipeline spec (expected a platform spec with 'platforms')")
    if isinstance(spec, dict) and "pipelineSpec" in spec and "root" not in spec:
        # A PipelineJob wrapper (as the KFP API and Vertex write it).
        platform = platform or spec.get("platformSpec")
        spec = spec["pipelineSpec"]
    validate_pipeline_spec(spec, source)
    if platform is not None:
        validate_platform_spec(platform, spec, source)
    return LoadedPipeline(spec=spec, platform_spec=platform, source=source)


def _import_module(file: Path) -> Any:
    module_name = f"_millpond_user_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise UserError(f"{file}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise UserError(f"{file}:{exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:  # the user's module raised while being imported
        line = _user_line(exc, file)
        raise UserError(f"{file}{line}: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    finally:
        sys.path.remove(str(file.parent.resolve()))
    return module


def _user_line(exc: BaseException, file: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == file.resolve()]
    return f":{frames[-1].lineno}" if frames else ""


def _outermost(pipelines: dict[str, Any]) -> dict[str, Any]:
    """The pipelines that no other pipeline of the file uses as a component."""
    from kfp.dsl.utils import sanitize_component_name

    def used_by(inner: Any, outer: Any) -> bool:
        return outer is not inner and sanitize_component_name(inner.name) in outer.pipeline_spec.components

    return {
        name: p for name, p in pipelines.items() if not any(used_by(p, other) for other in pipelines.values())
    }


def _load_python(file: Path, pipeline_name: str | None) -> LoadedPipeline:
    from kfp import compiler
    from kfp.dsl.graph_component import GraphComponent

    module = _import_module(file)
    pipelines = {name: obj for name, obj in vars(module).items() if isinstance(obj, GraphComponent)}
    # A pipeline imported from elsewhere is still a candidate, but one defined here wins.
    if pipeline_name:
        chosen = pipelines.get(pipeline_name) or next(
            (p for p in pipelines.values() if p.name == pipeline_name), None
        )
        if chosen is None:
            names = ", ".join(sorted(pipelines)) or "none"
            raise UserError(f"{file}: no pipeline named {pipeline_name!r} (found: {names})")
    elif not pipelines:
        raise UserError(f"{file}: no @dsl.pipeline function found")
    elif len(_outermost(pipelines)) == 1:
        chosen = next(iter(_outermost(pipelines).values()))
    elif len(pipelines) > 1:
        raise UserError(f"{file}: {len(pipelines)} pipelines found ({', '.join(sorted(pipelines))}); pick one with --pipeline NAME")
    else:
        chosen = next(iter(pipelines.values()))
    with tempfile.TemporaryDirectory(prefix="millpond-compile-") as tmp:
        out = Path(tmp) / "pipeline.yaml"
        try:
            compiler.Compiler().compile(chosen, str(out))
        except Exception as exc:  # kfp's compiler reports the user's mistakes as exceptions
            raise UserError(f"{file}: kfp could not compile the pipeline: {exc}".splitlines()[0]) from None
        return load_ir_text(out.read_text(), str(file))
