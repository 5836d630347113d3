"""Measure the shape of `millpond.pipelines` against issue 29's engine targets.

Prints three figures, each read from the source with `ast` (nothing is imported):

- the line count of `pipelines/engine.py` (target: under 500);
- every function or method in `pipelines/` (subpackages included) longer than 60 lines,
  longest first (target: none);
- the share of public function/method signatures in `pipelines/` (name without a leading
  underscore) whose parameter or return annotations mention `Any` (target: under 15%).
  A signature counts once however many of its annotations mention `Any`, including nested
  uses such as `dict[str, Any]` or `typing.Any`.

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


def _mentions_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
            # a string annotation ("dict[str, Any]"): parse it and look again
            try:
                if _mentions_any(ast.parse(node.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
    return False


def _signature_mentions_any(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    arguments = fn.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    if arguments.vararg is not None:
        every.append(arguments.vararg)
    if arguments.kwarg is not None:
        every.append(arguments.kwarg)
    return any(_mentions_any(a.annotation) for a in every) or _mentions_any(fn.returns)


def functions_in(path: Path, root: Path) -> list[FunctionShape]:
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
                    mentions_any=_signature_mentions_any(node),
                )
            )
    return found


def main(argv: list[str]) -> int:
    package = Path(argv[1]) if len(argv) > 1 else Path("src/millpond/pipelines")
    root = package.parent
    engine = package / "engine.py"
    print(f"engine.py lines: {len(engine.read_text().splitlines())}")
    shapes = [s for path in sorted(package.rglob("*.py")) for s in functions_in(path, root)]
    long = sorted((s for s in shapes if s.lines > LONG_FUNCTION_LINES), key=lambda s: -s.lines)
    print(f"functions over {LONG_FUNCTION_LINES} lines: {len(long)}")
    for shape in long:
        print(f"  {shape.lines:4d}  {shape.where}")
    public = [s for s in shapes if s.public]
    with_any = [s for s in public if s.mentions_any]
    share = 100.0 * len(with_any) / len(public) if public else 0.0
    print(f"public signatures mentioning Any: {len(with_any)}/{len(public)} = {share:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
