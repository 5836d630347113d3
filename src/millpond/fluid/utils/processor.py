"""``make_processor_from_func``: a DataProcess step written as a Python function, as in Fluid's SDK.

The function's source and a call with ``process_func_params`` become the ScriptProcessor's
script, run with ``python3`` (a DataProcess passes the script file as the command's last
argument). Fluid wraps the same Python in a bash heredoc for its container; here the script
is plain Python, so it reads as written. The function must not use names from its module:
only its own source travels (import inside it what it needs).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from millpond.fluid import models

DEFAULT_PIP_INDEX_URL = "https://pypi.org/simple"
DEFAULT_BASE_IMAGE = "python:3.10"


def _call(name: str, params: dict[str, Any] | None) -> str:
    if not params:
        return f"{name}()"
    for key, value in params.items():
        try:
            same = ast.literal_eval(repr(value)) == value
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise ValueError(f"process_func_params[{key!r}]: {type(value).__name__} cannot be written into a script "
                             "(use str, numbers, bools, None, and lists/dicts/tuples of them)")
    return f"{name}(**{params!r})"


def _pip_install(packages: list[str], index_url: str, quiet: bool) -> str:
    argv = [
        *(["--quiet"] if quiet else []), "--disable-pip-version-check", "--index-url", index_url, *map(str, packages)
    ]
    return ("import subprocess as _subprocess, sys as _sys\n"
            f"_subprocess.check_call([_sys.executable, '-m', 'pip', 'install', *{argv!r}])\n\n")


def make_processor_from_func(
    process_func: Callable[..., Any],
    process_func_params: dict[str, Any] | None = None,
    packages_to_install: list[str] | None = None,
    pip_index_url: str = DEFAULT_PIP_INDEX_URL,
    base_image: str = DEFAULT_BASE_IMAGE,
    debug_mode: bool = False,
    **kwargs: Any,
) -> models.Processor:
    """A Processor whose script defines ``process_func`` and calls it with ``process_func_params``.

    ``packages_to_install`` are pip-installed first; ``base_image`` (``name:tag``) is recorded
    for Kubernetes; other keywords (``env``, ``volumes``, ``command``…) go to the ScriptProcessor.
    """
    if not callable(process_func):
        raise TypeError(f"Process function must be callable, got function type: {type(process_func)}")
    name = getattr(process_func, "__name__", "")
    if not name.isidentifier():
        raise ValueError(f"Process function must be a named function (def), not {name or type(process_func).__name__}")
    try:
        source = textwrap.dedent(inspect.getsource(process_func))
    except (OSError, TypeError) as exc:
        raise ValueError(
            f"the source of {name} cannot be read ({exc}): define it in a file or a notebook cell"
        ) from None
    script = f"{source}\n\n{_call(name, process_func_params)}\n"
    if packages_to_install:
        script = _pip_install(packages_to_install, pip_index_url, quiet=not debug_mode) + script
    image, _, tag = base_image.partition(":")
    kwargs.setdefault("command", ["python3", "-u"])
    return models.Processor(
        script=models.ScriptProcessor(source=script, image=image, image_tag=tag or "latest", **kwargs)
    )
