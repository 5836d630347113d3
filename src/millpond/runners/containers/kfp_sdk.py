"""The kfp SDK for a lightweight Python component that runs in its image, provided by millpond.

kfp's compiled command starts with ``pip install kfp==…``, which needs pip and a package index
inside the image; many images (and offline machines) have neither. So a component with nothing
else to install runs its executor program with this folder on ``PYTHONPATH``: the top-level
packages that ``kfp.dsl.executor_main`` imports from millpond's own environment, hard-linked (or
copied) once per kfp and Python version into the home. The image's Python must be able to load
them (the same minor version for the few compiled ones); the task's log names the folder.
A component with ``packages_to_install`` runs kfp's own command in the image instead (upstream's way).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path

from filelock import FileLock

from millpond.errors import TaskFailure

TARGET = "/opt/millpond/kfp-sdk"  # where the container sees it
_LIST_IMPORTS = (
    "import sys, sysconfig\n"
    "before = set(sys.modules)\n"
    "import kfp.dsl.executor_main\n"
    "roots = {sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']}\n"
    "for name in sorted({m.split('.')[0] for m in set(sys.modules) - before}):\n"
    "    module = sys.modules.get(name)\n"
    "    where = getattr(module, '__file__', None) or ''\n"
    "    paths = list(getattr(module, '__path__', []) or [])\n"
    "    if any(where.startswith(r) for r in roots) or any(str(p).startswith(tuple(roots)) for p in paths):\n"
    "        print(name)\n"
)


def _version_tag() -> str:
    return f"kfp-{version('kfp')}-py{sys.version_info.major}{sys.version_info.minor}"


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def sdk_folder(cache_dir: Path) -> Path:
    """The folder holding kfp and what its executor imports; built once under ``cache_dir``."""
    folder = cache_dir / _version_tag()
    if (folder / ".complete").exists():
        return folder
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock", timeout=600):
        if (folder / ".complete").exists():
            return folder
        done = subprocess.run([sys.executable, "-c", _LIST_IMPORTS], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise TaskFailure("cannot list what kfp's executor imports here: "
                              + (done.stderr.strip().splitlines() or ["unknown error"])[-1])
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        sites = [Path(p) for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}]
        for name in done.stdout.split():
            for site in sites:
                for entry in site.iterdir():
                    stem = entry.name.split(".")[0]
                    if stem != name or (folder / entry.name).exists():
                        continue
                    if entry.is_dir():
                        shutil.copytree(entry, folder / entry.name, copy_function=_link_or_copy,
                                        ignore=shutil.ignore_patterns("__pycache__"))
                    elif entry.suffix in (".py", ".so"):
                        _link_or_copy(str(entry), str(folder / entry.name))
        (folder / ".complete").write_text("ok\n")
    return folder
