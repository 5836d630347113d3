"""Register a package with its ``__init__`` deferred until a name it defines is read.

Some packages import far more in ``__init__`` than a caller needs: ``kfp/__init__.py`` pulls in
the SDK and its REST client (~0.8 s, ~60 MB) when only ``kfp.dsl.executor_main`` or a schema
module is wanted. A deferred package imports its submodules as usual and runs its own
``__init__`` only when something reads an attribute that is not a submodule
(``kfp.__version__``, ``kfp.Client``), so code that uses the package still sees all of it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from typing import Any

# What the import system itself looks up on a package: never a reason to run its __init__.
_IMPORT_MACHINERY = {"__path__", "__spec__", "__loader__", "__file__", "__package__", "__cached__", "__getattr__"}


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` runs on first access to a name it would define."""

    def __getattr__(self, name: str) -> Any:
        spec = self.__dict__.get("__spec__")
        if spec is None or self.__dict__.get("_millpond_initialised") or name in _IMPORT_MACHINERY:
            raise AttributeError(name)
        if self._is_submodule(name):
            raise AttributeError(name)  # ``from pkg import sub``: let the import system load it
        self.__dict__["_millpond_initialised"] = True
        spec.loader.exec_module(self)
        return getattr(self, name)

    def _is_submodule(self, name: str) -> bool:
        return any(
            os.path.exists(os.path.join(folder, name + ".py")) or os.path.isdir(os.path.join(folder, name))
            for folder in self.__dict__.get("__path__", [])
        )


def defer_package_init(package: str) -> None:
    """Register ``package`` deferred, unless it is imported already."""
    if package in sys.modules:
        return
    spec = importlib.util.find_spec(package)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = _DeferredPackage(package)
    module.__spec__ = spec
    module.__path__ = list(spec.submodule_search_locations)
    module.__file__ = spec.origin
    module.__loader__ = spec.loader
    module.__package__ = package
    sys.modules[package] = module
    parent, _, child = package.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
