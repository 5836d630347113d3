"""Turn what the user points at (a kfp ``.py`` file or compiled IR YAML) into IR dictionaries.

A ``.py`` file is imported and its ``@dsl.pipeline`` compiled with the real kfp compiler; a
file of KFP v1 code (``dsl.ContainerOp``…, which kfp 2 cannot import) is compiled by kfp 1.8
in a side environment instead (``pipelines.kfp1``) and read as the Argo workflow it becomes;
a ``.yaml`` is read as IR with its optional second document (the kfp-kubernetes platform
spec). Every failure here is the user's: one line naming the file and the problem.

Text is parsed by ``millpond.documents`` (bounded: size, depth, aliases, 64-bit integers, no
NUL), then normalised as protobuf reads JSON (``null`` for a message, map or list field means
"not set"), so the rest of millpond may trust the IR's shape after ``validate_pipeline_spec``.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
import tempfile
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from millpond.documents import MAX_TEXT_CHARS, DocumentError, load_json, load_yaml_documents
from millpond.errors import UserError
from millpond.pipelines.argo.package import is_archive_name, read_package
from millpond.pipelines.argo.paths import FIELD as ARGO_PATHS
from millpond.pipelines.argo.paths import SIDECARS_FIELD as ARGO_SIDECARS
from millpond.pipelines.argo.paths import check_sidecars
from millpond.pipelines.argo.paths import from_ir as argo_paths
from millpond.pipelines.argo.reader import is_argo_workflow, read_workflow
from millpond.pipelines.argo.to_ir import translate
from millpond.pipelines.ir import check_executor, validate_pipeline_spec, validate_platform_spec
from millpond.pipelines.kfp1.compile import compile_v1
from millpond.pipelines.kfp1.detect import Kfp1Code, evidence_in_error, scan_file
from millpond.pipelines.kfp1.side_env import Progress, line_progress
from millpond.pipelines.protos import kubernetes_executor_config_pb2, pipeline_spec_pb2

# The kfp compiler's rule for pipeline names (kfp.dsl.utils.validate_pipeline_name: at most 128).
MAX_PIPELINE_NAME = 128
# Component, executor, task, parameter and artifact names: Kubernetes' longest object name (a DNS
# subdomain), which also fits the database's 255-character name columns.
MAX_NAME = 253
# The one type whose JSON ``null`` is a value (NULL_VALUE) rather than "field not set".
_NULL_IS_VALUE = frozenset({"google.protobuf.Value"})
_WELL_KNOWN = "google.protobuf."


@dataclass(frozen=True)
class LoadedPipeline:
    """A validated pipeline: its IR, its platform spec (or None) and where it came from."""

    spec: dict[str, Any]
    platform_spec: dict[str, Any] | None
    source: str
    # The Argo workflow kfp 1.x compiled, as parsed, when the pipeline came from one: the UI draws its
    # own steps and the API gives it back as the version's and run's pipeline_spec (Kubeflow's v2
    # backend returns a v1 upload so). None for a v2 pipeline.
    workflow: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return str(self.spec.get("pipelineInfo", {}).get("name") or "pipeline")


def load_pipeline(
    path: str | Path, pipeline_name: str | None = None, progress: Progress = line_progress
) -> LoadedPipeline:
    """Load the pipeline at ``path``; ``progress`` shows a long step (installing kfp 1.8 for v1 code, once)."""
    file = Path(path)
    if not file.exists():
        raise UserError(f"{file}: no such file")
    if not file.is_file():
        raise UserError(f"{file}: not a file")
    if file.suffix == ".py":
        return _load_source(file, pipeline_name, progress)
    if is_archive_name(file.name):  # dsl-compile's .tar.gz (or .zip) holding a kfp 1.x workflow
        if pipeline_name:
            raise UserError(f"{file}: --pipeline picks a function in a .py file; a compiled package holds one pipeline")
        return load_ir_text(read_package(file), str(file))
    if file.suffix in (".yaml", ".yml", ".json"):
        if pipeline_name:
            raise UserError(f"{file}: --pipeline picks a function in a .py file; a compiled IR file holds one pipeline")
        if file.stat().st_size > MAX_TEXT_CHARS * 4:  # the text limit, in the largest UTF-8 encoding
            raise UserError(f"{file}: larger than {MAX_TEXT_CHARS // (1024 * 1024)} MiB")
        return load_ir_text(file.read_text(encoding="utf-8", errors="replace"), str(file))
    raise UserError(f"{file}: expected a .py file with a @dsl.pipeline or a compiled IR .yaml")


def _documents(text: str, source: str) -> list[Any]:
    """The text's documents: JSON through the stdlib parser when it is JSON (as the kfp compiler writes a
    ``.json`` package), YAML otherwise. JSON is YAML, but PyYAML builds it ~50 times slower: a 10,000-task
    IR (17 MB) took over a minute to load."""
    if text.lstrip().startswith("{"):
        try:
            return [load_json(text, source)]
        except DocumentError:
            pass  # YAML's flow style, or a malformed file: the YAML loader says which, with the line
    return load_yaml_documents(text, source)


def load_ir_text(text: str, source: str) -> LoadedPipeline:
    """Parse IR YAML or JSON (one or two documents) and validate it."""
    documents = [doc for doc in _documents(text, source) if doc is not None]
    if not documents:
        raise UserError(f"{source}: empty file, expected a KFP pipeline spec")
    spec = documents[0]
    workflow: dict[str, Any] | None = None
    if is_argo_workflow(spec):  # kfp 1.x compiled an Argo Workflow: say it in IR
        if len(documents) > 1:
            raise UserError(f"{source}: unexpected YAML document after the Argo workflow")
        workflow = copy.deepcopy(spec)
        spec, translated = translate(read_workflow(spec, source))
        documents = [spec] if translated is None else [spec, translated]
    platform: dict[str, Any] | None = None
    for extra in documents[1:]:
        if isinstance(extra, dict) and "platforms" in extra:
            platform = extra
        else:
            raise UserError(
                f"{source}: unexpected YAML document after the pipeline spec "
                "(expected a platform spec with 'platforms')"
            )
    if isinstance(spec, dict) and "pipelineSpec" in spec and "root" not in spec:
        # A PipelineJob wrapper (as the KFP API and Vertex write it).
        platform = platform or spec.get("platformSpec")
        spec = spec["pipelineSpec"]
    if isinstance(spec, dict):
        spec = _shaped(spec, pipeline_spec_pb2().PipelineSpec.DESCRIPTOR, source)
        _check_deployment(spec, source)
        _check_names(spec, source)
    validate_pipeline_spec(spec, source)
    if platform is not None:
        if not isinstance(platform, dict):
            raise UserError(f"{source}: the platform spec is not a mapping")
        platform = _shaped_platform(platform, source)
        validate_platform_spec(platform, spec, source)
    return LoadedPipeline(spec=spec, platform_spec=platform, source=source, workflow=workflow)


def _shaped(value: dict[str, Any], descriptor: Any, source: str = "", path: str = "") -> dict[str, Any]:
    """``value`` shaped as protobuf reads it from JSON (a copy): ``null`` fields dropped, containers checked.

    ``components: null`` is an empty map to the KFP backend; left in, every ``.get(..., {})``
    downstream would meet None. Protobuf's Python parser also lets ``dag: []`` pass as an empty
    message, so a message, map or list field holding the wrong kind of container is refused here.
    Nulls inside google.protobuf.Value/Struct are values and stay.
    """
    if descriptor.full_name.startswith(_WELL_KNOWN):
        return value
    fields = {**descriptor.fields_by_name, **{f.json_name: f for f in descriptor.fields}}
    kept: dict[str, Any] = {}
    for key, child in value.items():
        field = fields.get(key)
        message = field.message_type if field is not None else None
        if child is None and field is not None and (message is None or message.full_name not in _NULL_IS_VALUE):
            continue
        where = f"{path}.{key}" if path else str(key)
        if message is not None and message.GetOptions().map_entry:
            entry = message.fields_by_name["value"].message_type
            child = {k: _message(v, entry, source, f"{where}[{k}]") if entry else v
                     for k, v in _container(child, dict, source, where).items()}
        elif message is not None and _repeated(field):
            child = [_message(v, message, source, f"{where}[{i}]")
                     for i, v in enumerate(_container(child, list, source, where))]
        elif message is not None:
            child = _message(child, message, source, where)
        kept[key] = child
    return kept


def _repeated(field: Any) -> bool:
    """protobuf ≥ 6 says ``is_repeated``; older ones only have ``label`` (deprecated since)."""
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


def _message(value: Any, descriptor: Any, source: str, where: str) -> Any:
    if descriptor.full_name.startswith(_WELL_KNOWN):  # JSON forms of their own ("0s", "2024-01-01T00:00:00Z"…)
        return value
    return _shaped(_container(value, dict, source, where), descriptor, source, where)


def _container(value: Any, kind: type, source: str, where: str) -> Any:
    if not isinstance(value, kind):
        expected = "a mapping" if kind is dict else "a list"
        raise UserError(f"{source}: {where}: expected {expected}, got {type(value).__name__} {json.dumps(value)[:40]}")
    return value


def _check_deployment(spec: dict[str, Any], source: str) -> None:
    """deploymentSpec is a Struct in PipelineSpec; the KFP driver reads it as a PipelineDeploymentConfig, so must we."""
    deployment = spec.get("deploymentSpec")
    if deployment is None:
        return
    pb = pipeline_spec_pb2()
    if not isinstance(deployment, dict):
        raise UserError(f"{source}: deploymentSpec: expected a mapping with executors")
    executors = deployment.get("executors")
    for label, executor_spec in (executors.items() if isinstance(executors, dict) else ()):
        check_executor(label, executor_spec, source)  # its plain words, before protobuf's for the same mistakes
    deployment, argo = _argo_paths(deployment, source)
    deployment = _shaped(deployment, pb.PipelineDeploymentConfig.DESCRIPTOR, source, "deploymentSpec")
    try:
        json_format.ParseDict(deployment, pb.PipelineDeploymentConfig())
    except json_format.ParseError as exc:
        problem = str(exc).splitlines()[0]
        raise UserError(f"{source}: invalid deploymentSpec: {problem}") from None
    for label, records in argo.items():
        deployment["executors"][label]["container"].update(records)
    spec["deploymentSpec"] = deployment


def _argo_paths(deployment: dict[str, Any], source: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``deployment`` less each container's ``argoPaths`` (a kfp 1.x step's fixed paths, ``argo.paths``) and
    ``argoSidecars``, and those records by executor, checked: protobuf knows no such fields, so they are put
    back after it checked the rest."""
    executors = deployment.get("executors")
    if not isinstance(executors, dict):
        return deployment, {}
    stripped = dict(executors)
    taken: dict[str, dict[str, Any]] = {}
    for label, executor_spec in executors.items():
        container = executor_spec.get("container") if isinstance(executor_spec, dict) else None
        if not isinstance(container, dict) or not (ARGO_PATHS in container or ARGO_SIDECARS in container):
            continue
        where = f"{source}: executor {label!r}"
        if ARGO_PATHS in container:
            argo_paths(container[ARGO_PATHS], where)
        if ARGO_SIDECARS in container:
            check_sidecars(container[ARGO_SIDECARS], where)
        private = (ARGO_PATHS, ARGO_SIDECARS)
        stripped[label] = {**executor_spec, "container": {k: v for k, v in container.items() if k not in private}}
        taken[label] = {k: container[k] for k in private if k in container}
    return {**deployment, "executors": stripped}, taken


def _shaped_platform(platform: dict[str, Any], source: str) -> dict[str, Any]:
    """The platform spec with protobuf's unset nulls dropped, executors read as KubernetesExecutorConfig."""
    pb = pipeline_spec_pb2()
    cleaned = _shaped(platform, pb.PlatformSpec.DESCRIPTOR, source, "platform spec")
    kubernetes = (cleaned.get("platforms") or {}).get("kubernetes")
    if isinstance(kubernetes, dict):
        deployment = kubernetes.get("deploymentSpec")
        executors = deployment.get("executors") if isinstance(deployment, dict) else None
        if isinstance(deployment, dict) and isinstance(executors, dict):
            config = kubernetes_executor_config_pb2().KubernetesExecutorConfig.DESCRIPTOR
            deployment["executors"] = {
                label: _message(value, config, source, f"platform spec executors[{label}]")
                for label, value in executors.items()
            }
    return cleaned


def _check_names(spec: dict[str, Any], source: str) -> None:
    """Refuse absurdly long names before they reach file names, database columns or log lines."""
    info = spec.get("pipelineInfo")
    name = info.get("name") if isinstance(info, dict) else None
    if isinstance(name, str) and len(name) > MAX_PIPELINE_NAME:
        raise UserError(f"{source}: pipelineInfo.name is longer than {MAX_PIPELINE_NAME} characters: {name[:40]!r}...")
    for where, names in _named_maps(spec):
        for key in names:
            if not key:
                raise UserError(f"{source}: {where}: an empty name")
            if len(key) > MAX_NAME:
                raise UserError(f"{source}: {where}: name longer than {MAX_NAME} characters: {key[:40]!r}...")


def _named_maps(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, map) for every map of the IR whose keys are names: components, executors, tasks, inputs, outputs."""
    def maps(owner: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if not isinstance(owner, dict):
            return
        for part in ("inputDefinitions", "outputDefinitions"):
            definitions = owner.get(part)
            for kind in ("parameters", "artifacts"):
                named = definitions.get(kind) if isinstance(definitions, dict) else None
                if isinstance(named, dict):
                    yield f"{where}.{part}.{kind}", named
        dag = owner.get("dag")
        tasks = dag.get("tasks") if isinstance(dag, dict) else None
        if isinstance(tasks, dict):
            yield f"{where}.dag.tasks", tasks

    components = spec.get("components")
    if isinstance(components, dict):
        yield "components", components
        for name, component in components.items():
            yield from maps(component, f"components.{name[:40]}")
    deployment = spec.get("deploymentSpec")
    executors = deployment.get("executors") if isinstance(deployment, dict) else None
    if isinstance(executors, dict):
        yield "deploymentSpec.executors", executors
    yield from maps(spec.get("root"), "root")


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
        evidence = evidence_in_error(exc, file)
        if evidence is not None:  # kfp 2 met a name only kfp 1.x has (in a module the file imports, say)
            raise Kfp1Code(evidence) from None
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
    from kfp.dsl.utils import sanitize_component_name  # noqa: PLC0415 - the kfp SDK (~0.8 s) for .py files only

    def used_by(inner: Any, outer: Any) -> bool:
        return outer is not inner and sanitize_component_name(inner.name) in outer.pipeline_spec.components

    return {
        name: p for name, p in pipelines.items() if not any(used_by(p, other) for other in pipelines.values())
    }


def _load_source(file: Path, pipeline_name: str | None, progress: Progress) -> LoadedPipeline:
    """kfp 2 compiles v2 code here; v1 code, found by its names before or by kfp 2's import error, goes to kfp 1.8."""
    evidence = scan_file(file) if file.stat().st_size <= MAX_TEXT_CHARS else None
    if evidence is None:
        try:
            return _load_python(file, pipeline_name)
        except Kfp1Code as found:
            evidence = found.evidence
    return load_ir_text(compile_v1(file, pipeline_name, evidence, progress), str(file))


def _load_python(file: Path, pipeline_name: str | None) -> LoadedPipeline:
    from kfp import compiler  # noqa: PLC0415 - the kfp SDK (~0.8 s) for .py files only
    from kfp.dsl.graph_component import GraphComponent  # noqa: PLC0415 - the kfp SDK (~0.8 s) for .py files only

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
        raise UserError(
            f"{file}: {len(pipelines)} pipelines found ({', '.join(sorted(pipelines))}); pick one with --pipeline NAME"
        )
    else:
        chosen = next(iter(pipelines.values()))
    with tempfile.TemporaryDirectory(prefix="millpond-compile-") as tmp:
        out = Path(tmp) / "pipeline.yaml"
        try:
            compiler.Compiler().compile(chosen, str(out))
        except Exception as exc:  # kfp's compiler reports the user's mistakes as exceptions
            raise UserError(f"{file}: kfp could not compile the pipeline: {exc}".splitlines()[0]) from None
        return load_ir_text(out.read_text(), str(file))
