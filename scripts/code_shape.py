"""Measure the shape of `millpond.pipelines` against issue 29's engine targets.

Prints three figures, each read from the source with `ast` (nothing is imported):

- the line count of `pipelines/engine.py` (target: under 500);
- every function or method in `pipelines/` (subpackages included) longer than 60 lines,
  longest first (target: none);
- the share of public function/method signatures in `pipelines/` (name without a leading
  underscore) whose parameter or return annotations mention `Any` (target: under 15%).
  A signature counts once however many of its annotations mention `Any`, including nested
  uses such as `dict[str, Any]` or `typing.Any`, and type aliases whose value mentions `Any`
  (`Artifacts = dict[str, list[dict[str, Any]]]`, defined at module level anywhere in the
  package): an alias hides `Any` from the eye, not from the count.

Run from the repository root: `python scripts/code_shape.py [package_dir]`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

LONG_FUNCTION_LINES = 60


@dataclass(frozen=True)
class FunctionShape:
    """One function or method: where it is, how long, whether it is public and takes/returns Any."""

    where: str
    lines: int
    public: bool
    mentions_any: bool


def _mentions_any(annotation: ast.expr | None, aliases: frozenset[str] = frozenset()) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and (node.id == "Any" or node.id in aliases):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
            # a string annotation ("dict[str, Any]"): parse it and look again
            try:
                if _mentions_any(ast.parse(node.value, mode="eval").body, aliases):
                    return True
            except SyntaxError:
                continue
    return False


def any_aliases(paths: list[Path]) -> frozenset[str]:
    """Module-level names assigned a type that mentions Any (``X = dict[str, Any]``, ``X: TypeAlias = ...``)."""
    names: set[str] = set()
    for path in paths:
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                target, value = node.target.id, node.value
            else:
                continue
            if isinstance(value, (ast.Subscript, ast.BinOp, ast.Name, ast.Attribute)) and _mentions_any(value):
                names.add(target)
    return frozenset(names)


def _signature_mentions_any(fn: ast.FunctionDef | ast.AsyncFunctionDef, aliases: frozenset[str]) -> bool:
    arguments = fn.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    if arguments.vararg is not None:
        every.append(arguments.vararg)
    if arguments.kwarg is not None:
        every.append(arguments.kwarg)
    return any(_mentions_any(a.annotation, aliases) for a in every) or _mentions_any(fn.returns, aliases)


def functions_in(path: Path, root: Path, aliases: frozenset[str] = frozenset()) -> list[FunctionShape]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[FunctionShape] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            found.append(
                FunctionShape(
                    where=f"{path.relative_to(root)}:{node.lineno} {node.name}",
                    lines=lines,
                    public=not node.name.startswith("_"),
                    mentions_any=_signature_mentions_any(node, aliases),
                )
            )
    return found


def main(argv: list[str]) -> int:
    package = Path(argv[1]) if len(argv) > 1 else Path("src/millpond/pipelines")
    root = package.parent
    engine = package / "engine.py"
    print(f"engine.py lines: {len(engine.read_text().splitlines())}")
    paths = sorted(package.rglob("*.py"))
    aliases = any_aliases(paths)
    shapes = [s for path in paths for s in functions_in(path, root, aliases)]
    long = sorted((s for s in shapes if s.lines > LONG_FUNCTION_LINES), key=lambda s: -s.lines)
    print(f"functions over {LONG_FUNCTION_LINES} lines: {len(long)}")
    for shape in long:
        print(f"  {shape.lines:4d}  {shape.where}")
    public = [s for s in shapes if s.public]
    with_any = [s for s in public if s.mentions_any]
    share = 100.0 * len(with_any) / len(public) if public else 0.0
    print(f"public signatures mentioning Any: {len(with_any)}/{len(public)} = {share:.1f}%"
          f" (aliases of Any counted: {', '.join(sorted(aliases)) or 'none'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
