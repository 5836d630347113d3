"""The markers every test gets from what it uses, and the xdist group that keeps heavy servers single.

A test says what it needs through its fixtures (``s3_server``, ``pg_url``, ``ray_cluster``, ``kfp1``)
or by opening Chromium (``chromium_page``); conftest's ``pytest_collection_modifyitems`` turns that
into markers, so ``-m "not ray"`` or ``-m "not slow"`` needs no hand-kept list per file. ``slow`` is
the one hand-kept list (SLOW below): measured, each entry with its reason.

Under pytest-xdist (``--dist loadgroup``) the tests that start a Ray cluster, a browser or kfp 1.8's
side environment each share one ``xdist_group``: one worker runs them all, so the session starts one
Ray cluster (three raylets on two cores), one browser at a time, and builds kfp 1.8 once.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import pytest

FIXTURE_MARKERS = {
    "s3_server": "s3",
    "failing_s3_server": "s3",
    "pg_server": "postgresql",
    "pg_url": "postgresql",
    "ray_cluster": "ray",
}
BROWSER_CALLS = ("chromium_page(", "_browser(")  # tests/ui/test_server_ui.py's ways into Chromium

# One worker each (the first that applies): a Ray cluster, then a browser, then kfp 1.8's side environment.
GROUPS = (("ray", "ray"), ("ui", "ui"), ("kfp1", "kfp1"))


@dataclass(frozen=True)
class Slow:
    """A test (every parametrization of it) kept out of ``-m "not slow"``, and why."""

    test: str  # "tests/<area>/test_x.py::test_name"
    why: str


# Measured with ``pytest -n 4 --durations=0`` (load ~4 on 2 cores): each over ~8 s there, or one that
# starts a cluster, trains, or runs a whole example. Remove an entry once its test gets fast.
SLOW = [Slow(test, why) for test, why in (
)]
SLOW_TESTS = {entry.test: entry.why for entry in SLOW}


def _is_browser_test(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return False
    return any(call in source for call in BROWSER_CALLS)


def markers_for(item: pytest.Item) -> list[str]:
    """The markers ``item`` earns from its fixtures, its use of Chromium and the slow list."""
    fixtures = set(getattr(item, "fixturenames", ()))
    names = {marker for fixture, marker in FIXTURE_MARKERS.items() if fixture in fixtures}
    if "kfp1" in fixtures:
        names.add("kfp1")
    if _is_browser_test(item):
        names.add("ui")
    if item.nodeid.split("[")[0] in SLOW_TESTS:
        names.add("slow")
    return sorted(names)


def apply_markers(items: list[pytest.Item]) -> None:
    """Mark each item, and put the heavy ones in their xdist group."""
    for item in items:
        names = markers_for(item)
        for name in names:
            item.add_marker(name)
        group = next((group for marker, group in GROUPS if marker in names), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
