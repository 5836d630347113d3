"""Compile one KFP v1 pipeline file to an Argo workflow: run by kfp 1.8's interpreter, never imported by millpond.

    python -E compile_v1.py FILE OUTPUT.yaml RESULT.json [PIPELINE]

It does what kfp 1.8's ``dsl-compile --py`` does (``kfp.compiler.main.compile_pyfile``): it
collects the functions ``@dsl.pipeline`` decorates while the file runs (not as ``__main__``,
so the file's own compile-on-run block stays still), picks one (PIPELINE: a function name or
the pipeline's name; needed when there are several) and compiles it to YAML. RESULT.json gets
``{"ok": true}`` or ``{"error": ONE LINE, "line": N, "kind": ...}``: the user's exception as
one line, with its line in FILE. Standard library and kfp only: this runs under kfp 1.8.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
import warnings
from typing import Any


def _line_in(exc: BaseException, file: str) -> int | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == file]
    return frames[-1].lineno if frames else None


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text.splitlines() or [type(exc).__name__])[0]


def _pick(pipelines: list[Any], wanted: str) -> Any:
    """The pipeline to compile, or a str saying why there is none."""
    def names(func: Any) -> set[str]:
        return {func.__name__, getattr(func, "_component_human_name", None) or func.__name__}

    found = ", ".join(sorted(f.__name__ for f in pipelines)) or "none"
    if wanted:
        chosen = [f for f in pipelines if wanted in names(f)]
        return chosen[0] if chosen else f"no pipeline named {wanted!r} (found: {found})"
    if not pipelines:
        return "no @dsl.pipeline function found"
    if len(pipelines) > 1:
        return f"{len(pipelines)} pipelines found ({found}); pick one with --pipeline NAME"
    return pipelines[0]


def compile_file(file: str, output: str, wanted: str) -> dict[str, Any]:
    try:
        import kfp  # noqa: PLC0415 - kfp 1.x may be missing: said as a result, not a traceback
    except Exception as exc:  # an interpreter without kfp (MILLPOND_KFP1_PYTHON pointing elsewhere)
        return {"error": f"kfp 1.x is not importable by {sys.executable}: {_one_line(exc)}", "kind": "environment"}
    version = getattr(kfp, "__version__", "?")
    if not version.startswith("1."):
        return {"error": f"{sys.executable} has kfp {version}, not kfp 1.x", "kind": "environment"}
    from kfp import compiler  # noqa: PLC0415 - after the check above that kfp is 1.x
    from kfp.dsl import _pipeline  # noqa: PLC0415 - after the check above that kfp is 1.x
    collected: list[Any] = []
    previous = _pipeline._pipeline_decorator_handler
    _pipeline._pipeline_decorator_handler = lambda func: collected.append(func)  # the decorator keeps func
    sys.path.insert(0, os.path.dirname(file))
    try:
        runpy.run_path(file, run_name="__millpond_kfp1__")
    except SyntaxError as exc:
        return {"error": f"syntax error: {exc.msg}", "line": exc.lineno, "kind": "user"}
    except BaseException as exc:  # noqa: BLE001 - the user's module raised (even SystemExit) while it ran
        return {"error": _one_line(exc), "line": _line_in(exc, file), "kind": "user"}
    finally:
        _pipeline._pipeline_decorator_handler = previous
    chosen = _pick(collected, wanted)
    if isinstance(chosen, str):
        return {"error": chosen, "kind": "user"}
    try:
        compiler.Compiler().compile(chosen, output)
    except Exception as exc:  # kfp 1.8 reports the pipeline's mistakes as exceptions
        return {"error": f"kfp {version} could not compile the pipeline: {_one_line(exc)}",
                "line": _line_in(exc, file), "kind": "user"}
    return {"ok": True, "pipeline": chosen.__name__}


def main(argv: list[str]) -> int:
    file, output, result = os.path.realpath(argv[1]), argv[2], argv[3]
    wanted = argv[4] if len(argv) > 4 else ""
    sys.path.pop(0)  # this script's folder (millpond's package): the user's modules must not meet it
    warnings.simplefilter("ignore")  # kfp 1.8 warns on every ContainerOp; the user sees the result
    outcome = compile_file(file, output, wanted)
    with open(result, "w", encoding="utf-8") as out:
        json.dump(outcome, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
