"""One error hierarchy: every exception class millpond defines derives from MillpondError, and one
table (errors.exit_code_of / http_status_of) maps error classes to CLI exit codes and HTTP statuses."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import millpond
from millpond import errors
from millpond.datasets.ufs import UfsError
from millpond.fluid.objects import AlreadyExists, NotFound
from millpond.store.artifacts import StorageError
from millpond.store.secrets import MissingConfig


def _millpond_exception_classes() -> list[type[Exception]]:
    found: dict[str, type[Exception]] = {}
    for info in pkgutil.walk_packages(millpond.__path__, "millpond."):
        if info.name.endswith("__main__") or ".migrations." in info.name:
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            # Errors only: runners.stopping.Stopped is a KeyboardInterrupt, a stop request, not an error.
            if issubclass(obj, Exception) and obj.__module__ == info.name:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_every_error_class_is_a_millpond_error() -> None:
    classes = _millpond_exception_classes()
    assert len(classes) >= 15, classes  # the walk found the package's errors
    outside = [f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, errors.MillpondError)]
    assert outside == [], f"error classes outside the hierarchy: {outside}"


@pytest.mark.parametrize(
    ("error", "exit_code", "http_status"),
    [
        (errors.UserError("bad"), 2, 400),
        (errors.NotFoundError("no run"), 2, 404),
        (NotFound("no dataset"), 2, 404),
        (MissingConfig("secret", "x"), 2, 404),
        (AlreadyExists("taken"), 2, 409),
        (StorageError("endpoint unreachable"), 1, 503),  # an outside failure, not bad input
        (UfsError("connection refused"), 1, 503),
        (errors.TaskFailure("task broke"), 1, 500),
        (errors.MillpondError("other"), 1, 500),
        (ValueError("not ours"), 1, 500),
    ],
)
def test_one_table_maps_errors_to_exit_codes_and_http_statuses(
    error: BaseException, exit_code: int, http_status: int
) -> None:
    assert errors.exit_code_of(error) == exit_code
    assert errors.http_status_of(error) == http_status
