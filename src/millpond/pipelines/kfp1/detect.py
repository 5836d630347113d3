"""Tell KFP v1 code from v2 code without importing it.

kfp 2 cannot import a v1 file (``module 'kfp.dsl' has no attribute 'ContainerOp'``), so the
file is scanned first: its imports give each local name the kfp (or kubernetes) object it
stands for, and a name that only kfp 1.x has (``dsl.ContainerOp``, ``VolumeOp``,
``components.func_to_container_op``, ``kfp.gcp``…), a kubernetes client model handed to a
ContainerOp method (``op.add_volume(V1Volume(...))``) or a compile to a ``.tar.gz`` package (kfp
2 writes YAML only) is the evidence. A file that reaches v1 code only through a module of its
own passes the scan; kfp 2's import then fails naming a v1 name, or refusing a component called
with positional arguments as kfp 1.x allowed (:func:`evidence_in_error`).

Names kfp 2 shares with kfp 1 (``dsl.pipeline``, ``dsl.Condition``, ``ExitHandler``,
``load_component_from_file``) are no evidence: a file using only those is valid v2 code.
"""

from __future__ import annotations

import ast
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from millpond.errors import MillpondError

# What only kfp 1.x has (kfp 2.x lacks every one of them; checked against kfp 2.17).
V1_ONLY: frozenset[str] = frozenset(
    [f"kfp.dsl.{name}" for name in (
        "ContainerOp", "VolumeOp", "VolumeSnapshotOp", "PipelineVolume", "ResourceOp", "Sidecar",
        "InputArgumentPath", "UserContainer", "PipelineParam", "BaseOp", "VOLUME_MODE_RWO", "VOLUME_MODE_RWM",
        "VOLUME_MODE_ROM", "RUN_ID_PLACEHOLDER", "EXECUTION_ID_PLACEHOLDER", "PipelineConf", "get_pipeline_conf",
        "PipelineExecutionMode",
    )]
    + [f"kfp.components.{name}" for name in (
        "func_to_container_op", "create_component_from_func", "func_to_component_text", "InputPath", "OutputPath",
        "InputTextFile", "OutputTextFile", "InputBinaryFile", "OutputBinaryFile", "ComponentStore",
        "create_graph_component_from_pipeline_func",
    )]
    + ["kfp.gcp", "kfp.onprem", "kfp.aws", "kfp.azure", "kfp.containers", "kfp.notebook"]
)
# ContainerOp's methods and attributes that kfp 2's PipelineTask lacks.
CONTAINER_OP_ONLY: frozenset[str] = frozenset({
    "add_volume", "add_volume_mount", "add_env_variable", "add_pvolumes", "add_sidecar", "add_init_container",
    "add_pod_label", "add_pod_annotation", "add_toleration", "add_affinity", "add_resource_request",
    "add_resource_limit", "set_image_pull_policy", "apply", "container", "file_outputs", "pvolume", "pvolumes",
    "execution_options",
})
_PACKAGE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
# kfp 2's refusal of ``add_op(a, 3)`` (base_component.BaseComponent.__call__); kfp 1.x took positional arguments.
_POSITIONAL = "Components must be instantiated using keyword arguments"
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


@dataclass(frozen=True)
class V1Evidence:
    """What shows a file is KFP v1 code: the name as written (or a short description) and its line."""

    name: str
    line: int | None

    def where(self) -> str:
        return f"{self.name} at line {self.line}" if self.line else self.name


class Kfp1Code(MillpondError):  # noqa: N818 - a signal between the loader's steps, not an error anyone sees
    """kfp 2 failed to import the file on a v1 name: compile it as v1 code instead (the loader
    catches it; in the one hierarchy so that nothing of millpond's escapes as a bare Exception)."""

    def __init__(self, evidence: V1Evidence) -> None:
        super().__init__(evidence.name)
        self.evidence = evidence


def _is_v1(qualified: str) -> bool:
    parts = qualified.split(".")
    if len(parts) > 2 and parts[:2] in (["kfp", "dsl"], ["kfp", "components"], ["kfp", "compiler"]):
        if parts[2].startswith("_") and not parts[2].startswith("__"):  # kfp 1's private modules (dsl._for_loop…)
            return True
    return any(".".join(parts[:n]) in V1_ONLY for n in range(2, len(parts) + 1))


def scan(source: str) -> V1Evidence | None:
    """The first v1-only use in ``source``, or None (v2 code, or not Python at all: the import says so)."""
    try:
        tree = ast.parse(source)
        found = sorted(_Scanner(tree).evidence(), key=lambda e: (e[0], e[1], len(e[2])))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # not Python (a NUL byte is a ValueError) or nested past what Python compiles: kfp 2's import says so
        return None
    return V1Evidence(found[0][2], found[0][0]) if found else None


def scan_file(file: Path) -> V1Evidence | None:
    try:
        return scan(file.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


class _Scanner:
    """One pass over a module: aliases from its imports, then every name they reach."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.aliases: dict[str, str] = {}
        self.star: list[str] = []  # modules imported with *
        self.found: list[tuple[int, int, str]] = []

    def evidence(self) -> list[tuple[int, int, str]]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Attribute, ast.Name)):
                qualified = self.qualified(node)
                if qualified and _is_v1(qualified):
                    self._add(node, ast.unparse(node))
            elif isinstance(node, ast.Call):
                self._call(node)
        return self.found

    def _add(self, node: ast.AST, name: str) -> None:
        self.found.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), name))

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _ours(alias.name):
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.aliases[top] = top
                if _is_v1(alias.name):
                    self._add(node, f"import {alias.name}")

    def _import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or not _ours(module):
            return
        for alias in node.names:
            if alias.name == "*":
                self.star.append(module)
                continue
            qualified = f"{module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = qualified
            if _is_v1(qualified):
                self._add(node, f"from {module} import {alias.name}")

    def qualified(self, node: ast.expr) -> str | None:
        """The dotted kfp/kubernetes name ``node`` stands for, through the file's imports; None if none."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            for module in self.star:
                if _is_v1(f"{module}.{node.id}") or (module.startswith("kubernetes") and node.id.startswith("V1")):
                    return f"{module}.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def _call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in CONTAINER_OP_ONLY:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                target = arg.func if isinstance(arg, ast.Call) else None
                qualified = self.qualified(target) if target is not None else None
                if qualified and qualified.startswith("kubernetes.") and qualified.rsplit(".", 1)[-1].startswith("V1"):
                    self._add(node, f".{func.attr}({qualified.rsplit('.', 1)[-1]}(...))")
        if isinstance(func, ast.Attribute) and func.attr == "compile" and isinstance(func.value, ast.Call):
            compiler = self.qualified(func.value.func)
            path = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "package_path"), None
            )
            if compiler == "kfp.compiler.Compiler" and _names_package(path):
                self._add(node, "Compiler().compile(...) to a .tar.gz package")


def _ours(module: str) -> bool:
    return module == "kfp" or module.startswith(("kfp.", "kubernetes"))


def _names_package(path: ast.expr | None) -> bool:
    """Whether a compile's package path ends in .tar.gz/.tgz/.zip: a literal, ``x + '.tar.gz'`` or an f-string."""
    if isinstance(path, ast.BinOp):
        return _names_package(path.right)
    if isinstance(path, ast.JoinedStr) and path.values:
        return _names_package(path.values[-1])
    return isinstance(path, ast.Constant) and isinstance(path.value, str) and path.value.endswith(_PACKAGE_SUFFIXES)


def evidence_in_error(exc: BaseException, file: Path) -> V1Evidence | None:
    """The v1 name kfp 2's import of ``file`` failed on, or None when it failed for another reason."""
    name: str | None = None
    if isinstance(exc, ModuleNotFoundError) and exc.name and _is_v1(exc.name):
        name = exc.name
    elif isinstance(exc, ImportError):
        match = _CANNOT_IMPORT.search(str(exc))
        if match and _is_v1(f"{match[2]}.{match[1]}"):
            name = f"{match[2]}.{match[1]}"
    elif isinstance(exc, AttributeError) and exc.name:
        obj = getattr(exc, "obj", None)
        if isinstance(obj, ModuleType) and _is_v1(f"{obj.__name__}.{exc.name}"):
            name = f"{obj.__name__}.{exc.name}"
        elif type(obj).__module__.startswith("kfp.") and exc.name in CONTAINER_OP_ONLY:
            name = f"{type(obj).__name__}.{exc.name} (a kfp 1.x ContainerOp attribute)"
    elif isinstance(exc, TypeError) and str(exc).startswith(_POSITIONAL):
        name = "a component called with positional arguments, which only kfp 1.x allows"
    if name is None:
        return None
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == file.resolve()]
    return V1Evidence(name, frames[-1].lineno if frames else None)
